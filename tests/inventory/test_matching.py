"""Flavor-to-node matching as Kueue does it: flavor labels a subset, scheduling taints tolerated."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpuaas.core.objects import ResourceFlavor, Taint, Toleration
from gpuaas.inventory import flavor_matches_node

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
NODE = {"nvidia.com/gpu.product": "NVIDIA-L4", "node.kubernetes.io/instance-type": "g6.xlarge"}


@dataclass
class Case:
    name: str
    flavor: ResourceFlavor
    node_taints: tuple[Taint, ...] = ()
    pod_tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    ok: bool = True
    reason: str = ""


CASES = [
    Case("empty flavor matches any node", ResourceFlavor("default")),
    Case("labels subset", ResourceFlavor("l4", {"nvidia.com/gpu.product": "NVIDIA-L4"})),
    Case(
        "label value differs",
        ResourceFlavor("a100", {"nvidia.com/gpu.product": "NVIDIA-A100"}),
        ok=False,
        reason="needs label nvidia.com/gpu.product=NVIDIA-A100, node has 'NVIDIA-L4'",
    ),
    Case(
        "label absent",
        ResourceFlavor("spot", {"cloud/spot": "true"}),
        ok=False,
        reason="node has absent",
    ),
    Case(
        "node taint not tolerated",
        ResourceFlavor("l4"),
        node_taints=(GPU_TAINT,),
        ok=False,
        reason="untolerated taint nvidia.com/gpu=present:NoSchedule on the node",
    ),
    Case(
        "node taint tolerated by the flavor",
        ResourceFlavor("l4", tolerations=(Toleration("nvidia.com/gpu", "Exists"),)),
        node_taints=(GPU_TAINT,),
    ),
    Case(
        "node taint tolerated by the pod",
        ResourceFlavor("l4"),
        node_taints=(GPU_TAINT,),
        pod_tolerations=(Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),),
    ),
    Case(
        "toleration with the wrong value",
        ResourceFlavor("l4"),
        node_taints=(GPU_TAINT,),
        pod_tolerations=(Toleration("nvidia.com/gpu", "Equal", "absent"),),
        ok=False,
        reason="untolerated taint",
    ),
    Case(
        "toleration for another effect",
        ResourceFlavor("l4"),
        node_taints=(GPU_TAINT,),
        pod_tolerations=(Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"),),
        ok=False,
        reason="untolerated taint",
    ),
    Case(
        "PreferNoSchedule only steers",
        ResourceFlavor("l4"),
        node_taints=(Taint("busy", "", "PreferNoSchedule"),),
    ),
    Case(
        "NoExecute must be tolerated",
        ResourceFlavor("l4"),
        node_taints=(Taint("maint", "", "NoExecute"),),
        ok=False,
        reason="maint:NoExecute",
    ),
    Case(
        "wildcard toleration",
        ResourceFlavor("l4"),
        node_taints=(GPU_TAINT, Taint("maint", "", "NoExecute")),
        pod_tolerations=(Toleration("", "Exists"),),
    ),
    Case(
        "flavor's own taint needs a pod toleration",
        ResourceFlavor("spot", node_taints=(Taint("spot", "true", "NoSchedule"),)),
        ok=False,
        reason="on the flavor",
    ),
    Case(
        "flavor's own taint tolerated",
        ResourceFlavor("spot", node_taints=(Taint("spot", "true", "NoSchedule"),)),
        pod_tolerations=(Toleration("spot", "Equal", "true"),),
    ),
    Case(
        "pod nodeSelector must match too",
        ResourceFlavor("default"),
        node_selector={"node.kubernetes.io/instance-type": "p5.48xlarge"},
        ok=False,
        reason="pod nodeSelector",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flavor_matches_node(case: Case) -> None:
    got = flavor_matches_node(
        case.flavor, NODE, case.node_taints, case.pod_tolerations, case.node_selector
    )
    assert bool(got) is case.ok
    assert case.reason in got.reason
    if case.ok:
        assert got.reason == ""
