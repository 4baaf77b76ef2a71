"""Ray nodes as gpuaas sees them, and the label selectors that keep pods on the right nodes.

Pure: ``ray.nodes()``-shaped records in, ``RayNode`` values and bundle label selectors out; a
flavor's nodeLabels become equality selectors and a node whose taint the pod does not tolerate is
excluded by id, as Kubernetes keeps such a pod off it. No Ray needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.objects import Taint, Toleration
from gpuaas.runtimes import RuntimeRequestError
from gpuaas.runtimes.base import PodSpec
from gpuaas.runtimes.ray_nodes import from_ray, label_selector, load_taints
from gpuaas.runtimes.ray_records import bundle

L4_1, L4_4 = "g6.4xlarge", "g6.12xlarge"
TYPE = "node.kubernetes.io/instance-type"


def _record(
    node_id: str, name: str, gpus: int, labels: dict[str, str] | None = None, alive: bool = True
) -> dict[str, Any]:
    return {
        "NodeID": node_id,
        "Alive": alive,
        "NodeManagerAddress": "10.0.0.1",
        "Labels": {"kubernetes.io/hostname": name, "ray.io/node-id": node_id, **(labels or {})},
        "Resources": {"CPU": 16.0, "memory": 2.0**36, **({"GPU": float(gpus)} if gpus else {})},
    }


RECORDS = [
    _record("c" * 56, "head", 0),
    _record("a" * 56, "w1", 1, {TYPE: L4_1, "nvidia.com/gpu.product": "NVIDIA-L4"}),
    _record("b" * 56, "w2", 4, {TYPE: L4_4}),
    _record("d" * 56, "gone", 2, alive=False),
]
TAINTS = {"w2": (Taint("nvidia.com/gpu", "present", "NoSchedule"),)}


def test_nodes_carry_labels_gpus_model_and_configured_taints() -> None:
    nodes = {n.name: n for n in from_ray(RECORDS, TAINTS)}
    assert [n.name for n in from_ray(RECORDS, TAINTS)] == ["head", "w1", "w2", "gone"]
    assert nodes["w1"].gpus == 1 and nodes["w1"].gpu_model == "NVIDIA-L4"
    assert nodes["w2"].gpus == 4 and nodes["w2"].labels[TYPE] == L4_4
    assert nodes["w2"].taints == TAINTS["w2"] and nodes["w1"].taints == ()
    assert not nodes["gone"].alive
    assert nodes["w2"].to_dict()["capacity"]["nvidia.com/gpu"] == 4


@pytest.mark.parametrize(
    ("name", "selector", "tolerations", "expected"),
    [
        (
            "flavor labels pass through",
            ((TYPE, L4_1),),
            (Toleration("", "Exists"),),
            {TYPE: L4_1},
        ),
        (
            "an untolerated taint excludes its node by id",
            ((TYPE, L4_4),),
            (),
            {TYPE: L4_4, "ray.io/node-id": f"!in({'b' * 56})"},
        ),
        (
            "a toleration lets the pod onto the tainted node",
            ((TYPE, L4_4),),
            (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
            {TYPE: L4_4},
        ),
        ("no labels, no taints tolerated", (), (), {"ray.io/node-id": f"!in({'b' * 56})"}),
    ],
)
def test_label_selector(
    name: str,
    selector: tuple[tuple[str, str], ...],
    tolerations: tuple[Toleration, ...],
    expected: dict[str, str],
) -> None:
    assert label_selector(selector, tolerations, from_ray(RECORDS, TAINTS)) == expected, name


def test_bundle_is_the_pods_admitted_resources() -> None:
    pod = PodSpec("p", ("true",), cpu_millis=1500, memory_bytes=2**30, gpus=2)
    assert bundle(pod) == {"CPU": 1.5, "GPU": 2.0, "memory": float(2**30)}
    assert bundle(PodSpec("q", ("true",))) == {"CPU": 0.001}  # a bundle is never empty


def test_taint_config_is_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "nodes.yaml"
    good.write_text("nodes:\n  w2:\n    taints: [{key: nvidia.com/gpu, value: present}]\n")
    assert load_taints(good) == {"w2": (Taint("nvidia.com/gpu", "present", "NoSchedule"),)}
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  w2:\n    taints: [{key: k, effect: Sometimes}]\n")
    with pytest.raises(RuntimeRequestError, match=r"nodes.w2.taints\[0\].effect"):
        load_taints(bad)
