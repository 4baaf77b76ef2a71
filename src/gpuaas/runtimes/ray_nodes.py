"""The Ray cluster's nodes as gpuaas sees them, and where a pod may go: label selectors.

This module owns two translations. From Ray: ``ray.nodes()`` records become ``RayNode`` values
(name, labels given with ``ray start --labels``, CPUs, memory, GPUs and their model where the node
reports one, alive or dead) plus the taints gpuaas's own node config attaches per node name,
because Ray has no taints. To Ray: a pod's node selector (its flavor's ``nodeLabels`` and its own
``nodeSelector``) and tolerations become one bundle label selector, the Kubernetes way: every
label must match, and nodes with a scheduling taint the pod does not tolerate are excluded by id
(``ray.io/node-id: !in(...)``), decided with ``inventory.matching`` as for the local node. Pure
logic but ``load_taints`` (reads a YAML file); it calls no Ray API itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuaas.core.objects import Taint, Toleration
from gpuaas.inventory.matching import untolerated_taint
from gpuaas.runtimes.base import RuntimeRequestError
from gpuaas.runtimes.ray_actor import NODE_NAME_LABEL, node_name

NODE_ID_LABEL = "ray.io/node-id"
ACCELERATOR_LABEL = "ray.io/accelerator-type"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(slots=True, frozen=True)
class RayNode:
    node_id: str
    name: str
    alive: bool
    address: str
    labels: Mapping[str, str]
    cpus: float
    memory_bytes: int
    gpus: int
    gpu_model: str | None
    taints: tuple[Taint, ...] = ()
    used_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pod -> its GPU ids

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodeID": self.node_id,
            "alive": self.alive,
            "address": self.address,
            "labels": dict(self.labels),
            "capacity": {
                "cpu": self.cpus,
                "memory": self.memory_bytes,
                "nvidia.com/gpu": self.gpus,
            },
            "gpuModel": self.gpu_model,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            "gpusInUse": {pod: list(ids) for pod, ids in sorted(self.used_by.items())},
        }


def from_ray(
    records: Iterable[Mapping[str, Any]], taints: Mapping[str, tuple[Taint, ...]]
) -> list[RayNode]:
    """``ray.nodes()`` -> nodes, alive first, then by name; ``taints`` by node name."""
    nodes = []
    for rec in records:
        labels = {str(k): str(v) for k, v in (rec.get("Labels") or {}).items()}
        resources = rec.get("Resources") or {}
        node_id = str(rec.get("NodeID", ""))
        name = node_name(labels, node_id)
        model = labels.get("nvidia.com/gpu.product") or labels.get(ACCELERATOR_LABEL)
        if model is None:
            model = next(
                (
                    k[len("accelerator_type:") :]
                    for k in resources
                    if k.startswith("accelerator_type:")
                ),
                None,
            )
        nodes.append(
            RayNode(
                node_id=node_id,
                name=name,
                alive=bool(rec.get("Alive")),
                address=str(rec.get("NodeManagerAddress", "")),
                labels=labels,
                cpus=float(resources.get("CPU", 0)),
                memory_bytes=int(resources.get("memory", 0)),
                gpus=int(resources.get("GPU", 0)),
                gpu_model=model,
                taints=taints.get(name, ()),
            )
        )
    return sorted(nodes, key=lambda n: (not n.alive, n.name, n.node_id))


def label_selector(
    node_selector: Iterable[tuple[str, str]],
    tolerations: Iterable[Toleration],
    nodes: Iterable[RayNode],
) -> dict[str, str]:
    """The bundle label selector for a pod: its labels, minus nodes whose taints it cannot bear."""
    selector = dict(node_selector)
    tols = tuple(tolerations)
    excluded = sorted(
        n.node_id for n in nodes if n.taints and untolerated_taint(n.taints, tols) is not None
    )
    if excluded:
        selector[NODE_ID_LABEL] = f"!in({','.join(excluded)})"
    return selector


def load_taints(path: Path | None) -> dict[str, tuple[Taint, ...]]:
    """Taints per Ray node name, from YAML ``{nodes: {NAME: {taints: [{key, value, effect}]}}}``."""
    if path is None:
        return {}
    where = f"Ray node config {path}"
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise RuntimeRequestError(f"{where}: cannot read: {exc}") from None
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, dict):
        raise RuntimeRequestError(f"{where}: needs a mapping 'nodes: {{NAME: {{taints: [...]}}}}'")
    out: dict[str, tuple[Taint, ...]] = {}
    for name, spec in nodes.items():
        items = (spec or {}).get("taints", []) if isinstance(spec, dict) else None
        if not isinstance(items, list):
            raise RuntimeRequestError(f"{where}: nodes.{name}.taints must be a list")
        taints = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not item.get("key"):
                raise RuntimeRequestError(f"{where}: nodes.{name}.taints[{i}] needs a key")
            effect = str(item.get("effect", "NoSchedule"))
            if effect not in TAINT_EFFECTS:
                raise RuntimeRequestError(
                    f"{where}: nodes.{name}.taints[{i}].effect: {effect!r} is not one of "
                    f"{list(TAINT_EFFECTS)}"
                )
            taints.append(Taint(str(item["key"]), str(item.get("value", "")), effect))
        out[str(name)] = tuple(taints)
    return out


__all__ = ["NODE_NAME_LABEL", "RayNode", "from_ray", "label_selector", "load_taints"]
