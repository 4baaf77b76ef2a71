"""What the hub reads of a worker becomes free and idle GPUs as the add-on counts them
(``scores.measure``): schedulable nodes' allocatable GPUs minus the requests of pods not
Succeeded or Failed, per node and in all; idle GPUs from DCGM's utilization gauge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuaas.engine.multikueue.scores import measure, pods_of


def node(name: str, gpus: str, *, unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "8", "memory": "32Gi"}}}  # fmt: skip


def pod(on: str, gpus: int, phase: str = "Running", *, limits_only: bool = False) -> dict[str, Any]:
    res = {"limits" if limits_only else "requests": {"nvidia.com/gpu": str(gpus)}}
    return {"spec": {"nodeName": on, "containers": [{"name": "c", "resources": res}]},
            "status": {"phase": phase}}  # fmt: skip


METRICS = """# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="u0",device="nvidia0",modelName="Tesla-T4",Hostname="h",DCGM_FI_DRIVER_VERSION="",namespace="",pod="",workload="",cluster_queue=""} 0.0
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="u1",device="nvidia1",modelName="Tesla-T4",Hostname="h",DCGM_FI_DRIVER_VERSION="",namespace="a",pod="p",workload="w",cluster_queue="q"} 2.0
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="u2",device="nvidia2",modelName="Tesla-T4",Hostname="h",DCGM_FI_DRIVER_VERSION="",namespace="a",pod="p2",workload="w2",cluster_queue="q"} 97.0
"""


@pytest.mark.parametrize(
    ("nodes", "pods", "want"),
    [
        ([node("n", "3")], [], (3, 3, 3)),
        ([node("n", "3")], [pod("n", 1)], (3, 2, 2)),
        ([node("n", "3")], [pod("n", 1, "Succeeded"), pod("n", 2, "Failed")], (3, 3, 3)),
        ([node("n", "3")], [pod("n", 1, "Pending")], (3, 2, 2)),
        ([node("n", "3")], [pod("n", 2, limits_only=True)], (3, 1, 1)),
        ([node("a", "2"), node("b", "4")], [pod("b", 3)], (6, 3, 2)),
        ([node("a", "2"), node("b", "4", unschedulable=True)], [], (2, 2, 2)),
    ],
    ids=[
        "idle",
        "one used",
        "terminated pods free",
        "pending pods hold",
        "limits only",
        "per node",
        "unschedulable node",
    ],
)
def test_free_gpus(nodes: list[Any], pods: list[Any], want: tuple[int, int, int]) -> None:
    # As the hub reads them: a PodList of whole pods, decoded into what is counted only.
    whole = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "labels": {}},
              "spec": {**p["spec"], "restartPolicy": "Never", "containers": [
                  {**c, "image": "busybox", "command": ["sleep", "1"]}
                  for c in p["spec"]["containers"]]},
              "status": {**p["status"], "startTime": "2026-12-07T00:00:00Z"}}
             for i, p in enumerate(pods)]  # fmt: skip
    listed = pods_of(json.dumps({"kind": "PodList", "items": whole}).encode())
    for got in (measure(nodes, pods, None), measure(nodes, listed, None)):
        assert (got.allocatable, got.free, got.node_free) == want
        assert got.idle is None


def test_a_pod_list_with_nulls_reads_as_no_pods_or_no_requests() -> None:
    assert pods_of(b'{"kind": "PodList", "items": null}') == []
    assert pods_of(b'{"items": [{"spec": {"containers": null}, "status": null}]}') == [{"spec": {}}]
    got = measure([node("n", "2")], pods_of(b'{"items": [{"spec": {"nodeName": "n"}}]}'), None)
    assert got.free == 2


def test_idle_gpus_and_model_from_dcgm() -> None:
    got = measure([node("n", "3")], [pod("n", 2)], METRICS)
    assert got.idle == 2  # the free one and the held one at 2 %
    assert got.model == "Tesla-T4"
