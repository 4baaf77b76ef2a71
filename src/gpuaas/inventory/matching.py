"""Whether a ResourceFlavor describes this node, decided as Kueue matches flavors to nodes.

Kueue injects a flavor's ``nodeLabels`` into the pod's node selector and its ``tolerations``
into the pod, so a node serves a flavor when it carries every flavor label and every scheduling
taint on it (NoSchedule, NoExecute; PreferNoSchedule only steers) is tolerated by the pod's
tolerations plus the flavor's. The flavor's own ``nodeTaints`` must also be tolerated, as in
Kueue's flavor assigner. Pure logic: no I/O, no inventory detection (see ``inventory.node``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuaas.core.objects import ResourceFlavor, Taint, Toleration

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(slots=True, frozen=True)
class NodeMatch:
    ok: bool
    reason: str  # plain words; empty when ok

    def __bool__(self) -> bool:
        return self.ok


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first scheduling taint that no toleration tolerates, as Kubernetes checks it."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect not in SCHEDULING_EFFECTS:
            continue
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None


def flavor_matches_node(
    flavor: ResourceFlavor,
    node_labels: dict[str, str],
    node_taints: Iterable[Taint] = (),
    pod_tolerations: Iterable[Toleration] = (),
    pod_node_selector: dict[str, str] | None = None,
) -> NodeMatch:
    """Could a pod admitted with ``flavor`` land on a node with these labels and taints?"""
    for key, value in sorted(flavor.node_labels.items()):
        have = node_labels.get(key)
        if have != value:
            found = "absent" if have is None else f"{have!r}"
            return NodeMatch(
                False, f"flavor {flavor.name} needs label {key}={value}, node has {found}"
            )
    for key, value in sorted((pod_node_selector or {}).items()):
        if node_labels.get(key) != value:
            return NodeMatch(False, f"pod nodeSelector {key}={value} does not match the node")
    tolerations = (*pod_tolerations, *flavor.tolerations)
    for source, taints in (("flavor", flavor.node_taints), ("node", tuple(node_taints))):
        taint = untolerated_taint(taints, tolerations)
        if taint is not None:
            text = (
                f"{taint.key}={taint.value}:{taint.effect}"
                if taint.value
                else f"{taint.key}:{taint.effect}"
            )
            return NodeMatch(False, f"untolerated taint {text} on the {source} ({flavor.name})")
    return NodeMatch(True, "")
