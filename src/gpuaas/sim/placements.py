"""OCM placement in ``gpuaas scenario run``: the scenario's OCM objects and the decisions they make.

A scenario may carry Open Cluster Management objects (ManagedCluster, ManagedClusterSet,
ManagedClusterSetBinding, Placement, AddOnPlacementScore) among its ``objects`` and in ``apply``
and ``delete`` steps; ``expect.placements`` then states, per Placement (``namespace/name``), the
exact set of clusters it selects at that moment. There are no workers in a simulation, so what is
tested is the decision: the same ``core.placement.schedule`` the hub runs, with the ManagedClusterSets
``default`` and ``global`` an OCM hub always has, an AddOnPlacementScore's ``status`` taken as
written (there is no add-on to produce it), and each Placement's previous decision kept between
steps (OCM's Steady prioritizer and ``NoSelectIfNew`` read it). No I/O, no clock: ``at`` is the
step's simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaas.core import ocm
from gpuaas.core.manifest_common import ManifestError
from gpuaas.core.placement import PlacementResult, Snapshot, schedule

JsonDoc = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace or "", name)
_DEFAULT_SETS = (
    ocm.ManagedClusterSet("default"),
    ocm.ManagedClusterSet("global", "LabelSelector"),
)


def is_ocm(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("kind") in ocm.KINDS


_CLUSTER_SCOPED = ("ManagedCluster", "ManagedClusterSet")


def key_of(doc: JsonDoc) -> Key:
    meta = doc.get("metadata") or {}
    ns = "" if doc["kind"] in _CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    return str(doc["kind"]), ns, str(meta["name"])


def check(doc: JsonDoc) -> None:
    """Raise ``ManifestError`` naming the object and field when an OCM object is unusable."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestError(str(doc.get("kind")), None, None, "metadata.name", "required value")
    ocm.check(doc)


@dataclass
class PlacementBook:
    """The scenario's OCM objects as applied so far, and each Placement's last decision."""

    docs: dict[Key, JsonDoc] = field(default_factory=dict)
    decided: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    def apply(self, docs: list[JsonDoc]) -> None:
        for doc in docs:
            if is_ocm(doc):
                meta = dict(doc.get("metadata") or {})
                if doc["kind"] not in _CLUSTER_SCOPED:
                    meta.setdefault("namespace", "default")
                self.docs[key_of(doc)] = {**doc, "metadata": meta}

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        """Forget an OCM object; False when ``kind`` is not OCM's."""
        if kind not in ocm.KINDS:
            return False
        ns = "" if kind in _CLUSTER_SCOPED else (namespace or "default")
        self.docs.pop((kind, ns, name), None)
        return True

    def _of(self, kind: str) -> list[JsonDoc]:
        return [d for (k, _, _), d in sorted(self.docs.items()) if k == kind]

    def schedule(self, at: float) -> dict[str, PlacementResult]:
        """Every Placement's decision now (``namespace/name`` -> result); decisions are kept."""
        sets = {s.name: s for s in _DEFAULT_SETS}
        sets.update({s.name: s for s in map(ocm.parse_cluster_set, self._of("ManagedClusterSet"))})
        scores = {(s.cluster, s.resource_name): s
                  for s in map(ocm.parse_score, self._of("AddOnPlacementScore"))}  # fmt: skip
        snap = Snapshot(
            [ocm.parse_managed_cluster(d) for d in self._of("ManagedCluster")],
            sets,
            [ocm.parse_binding(d) for d in self._of("ManagedClusterSetBinding")],
            scores,
            dict(self.decided),
        )
        out = {}
        for doc in self._of("Placement"):
            p = ocm.parse_placement(doc)
            result = schedule(p, snap, at)
            out[f"{p.namespace}/{p.name}"] = result
        self.decided = {(k.split("/", 1)[0], k.split("/", 1)[1]): r.decisions
                        for k, r in out.items()}  # fmt: skip
        return out

    def mismatches(self, at: float, expected: dict[str, list[str]]) -> tuple[JsonDoc, list[str]]:
        """What each Placement selects now, and how that differs from ``expected``."""
        results = self.schedule(at)
        observed = {k: sorted(r.decisions) for k, r in sorted(results.items())}
        out = []
        for key, want in sorted(expected.items()):
            if key not in results:
                out.append(f"at {at}: placements: Placement {key} was never applied")
                continue
            got = observed[key]
            if sorted(want) != got:
                r = results[key]
                why = "; ".join(f"{c}: {w}" for c, w in sorted(r.excluded.items()))
                out.append(f"at {at}: placements: {key}: expected {sorted(want)}, observed {got} "
                           f"({r.reason}: {r.message}{'; ' + why if why else ''})")  # fmt: skip
        return observed, out
