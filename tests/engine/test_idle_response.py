"""What ``gpuaas get hoarding`` says of a holder acted on for idle GPUs (``idle_response``), by
the workload's state now, and how the rows combine flagged holders with those acted on. The
workload states come from a real core ``Cluster`` driven through ``evict_with_backoff``."""

from __future__ import annotations

import pytest

from gpuaas.core.cluster import Cluster
from gpuaas.engine.idle_response import IdleHistory, acted_state, hoarding_rows
from gpuaas.engine.views import WorkloadView, workload_views
from gpuaas.telemetry import HoardingAction, HoardingRow
from gpuaas.testing.builders import ClusterQueueBuilder, WorkloadBuilder, flavor, local_queue

NOW = 100.0


def views(*, instant: bool = True, evict: dict[str, int | None]) -> dict[str, WorkloadView]:
    """Workloads a, b, c admitted at 0; each in ``evict`` evicted at NOW with that limit."""
    c = Cluster(instant_evictions=instant)
    c.apply(flavor("gpu"), 0)
    c.apply(ClusterQueueBuilder("cq").group(("gpu", {"nvidia.com/gpu": "4"})).obj(), 0)
    c.apply(local_queue("lq", "cq"), 0)
    for name in ("a", "b", "c"):
        c.apply(WorkloadBuilder(name).request(nvidia_com_gpu="1").obj(), 0)
    c.schedule(0)
    for name, limit in evict.items():
        c.evict_with_backoff(
            f"default/{name}", "IdleGPU", "idle", NOW, limit=limit, base_seconds=60, max_seconds=600
        )
    return {w.key: w for w in workload_views(c)}


def history(name: str, state: str = "BackingOff", evictions: int = 1) -> IdleHistory:
    return IdleHistory(
        "default", name, "cq", 1, evictions, NOW, state, HoardingAction.EVICT, 0.5, NOW + 60
    )


@pytest.mark.parametrize(
    ("instant", "limit", "state", "at", "expected"),
    [
        pytest.param(True, 3, "BackingOff", NOW, "BackingOff", id="requeued-waiting"),
        pytest.param(True, 3, "BackingOff", NOW + 60, None, id="back-off-over"),
        pytest.param(True, 0, "Deactivated", NOW, "Deactivated", id="deactivated"),
        pytest.param(False, 3, "BackingOff", NOW, "Evicting", id="pods-still-stopping"),
        pytest.param(True, None, "Stopped", NOW, "Stopped", id="stopped-holds-no-quota"),
    ],
)
def test_acted_state(
    instant: bool, limit: int | None, state: str, at: float, expected: str | None
) -> None:
    v = views(instant=instant, evict={"a": limit})
    assert acted_state(history("a", state), v["default/a"], at) == expected


def test_a_stopped_workload_holding_quota_again_is_not_listed() -> None:
    v = views(evict={})
    assert acted_state(history("a", "Stopped"), v["default/a"], NOW) is None
    assert acted_state(history("a"), None, NOW) is None  # deleted


def test_rows_flagged_first_with_their_count_then_those_acted_on() -> None:
    v = views(evict={"b": 3, "c": 0})
    flagged = [
        HoardingRow("default", "a", "cq", 1, 0.0, NOW, 0.03, HoardingAction.EVICT, "Flagged")
    ]
    past = {
        "default/a": history("a", "Readmitted", evictions=2),  # flagged again
        "default/b": history("b", evictions=1),
        "default/c": history("c", "Deactivated", evictions=4),
    }
    rows = hoarding_rows(flagged, past, v, NOW)
    assert [(r.workload, r.state, r.idle_evictions) for r in rows] == [
        ("a", "Flagged", 2),
        ("b", "BackingOff", 1),
        ("c", "Deactivated", 4),
    ]
    assert rows[1].requeue_at == NOW + 60 and rows[2].requeue_at is None
