"""The workloads table flags a workload the hoarding detector marked (condition GPUIdle)."""

from __future__ import annotations

from gpuaas.api.dashboard_view import workload_rows
from gpuaas.core.cluster import Cluster
from gpuaas.engine.views import workload_views
from gpuaas.testing.builders import ClusterQueueBuilder, WorkloadBuilder, flavor, local_queue


def _cluster() -> Cluster:
    c = Cluster()
    c.apply(flavor("gpu"), 0)
    c.apply(ClusterQueueBuilder("cq").group(("gpu", {"nvidia.com/gpu": "4"})).obj(), 0)
    c.apply(local_queue("lq", "cq"), 0)
    c.apply(WorkloadBuilder("idle").request(nvidia_com_gpu="2").obj(), 0)
    c.apply(WorkloadBuilder("busy").request(nvidia_com_gpu="2").obj(), 0)
    c.schedule(0)
    return c


def test_idle_gpu_condition_becomes_a_badge_field() -> None:
    c = _cluster()
    c.workloads["default/idle"].set_condition(
        "GPUIdle", "True", "GPUIdle", "2 GPU(s) under 5% for 1800s", 1800
    )
    rows = {r["key"]: r for r in workload_rows(workload_views(c))}
    assert rows["default/idle"]["idleGpu"] == "2 GPU(s) under 5% for 1800s"
    assert rows["default/busy"]["idleGpu"] is None


def test_cleared_flag_shows_no_badge() -> None:
    c = _cluster()
    wl = c.workloads["default/idle"]
    wl.set_condition("GPUIdle", "True", "GPUIdle", "idle", 1800)
    wl.set_condition("GPUIdle", "False", "GPUActive", "utilization recovered", 1900)
    rows = {r["key"]: r for r in workload_rows(workload_views(c))}
    assert rows["default/idle"]["idleGpu"] is None
