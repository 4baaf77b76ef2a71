"""Kueue's requeueBatchPeriod on a live clock: released workloads return 1 s after the release.

Kueue (v0.17+) ``Manager.QueueAssociatedInadmissibleWorkloadsAfter`` ->
``workqueueRequeuer.notifyClusterQueue`` -> ``AddAfter(..., requeueBatchPeriod)``. Scenarios
settle the same order at one instant (batch 0, see tests/scenarios/kueue/199 and 208); a server
builds its Cluster with ``requeue_batch_seconds=1.0``.
"""

from __future__ import annotations

import pytest

from gpuaas.core.cluster import Cluster
from gpuaas.core.decisions import Reserve
from gpuaas.testing.builders import ClusterQueueBuilder as CQ
from gpuaas.testing.builders import WorkloadBuilder as WL
from gpuaas.testing.builders import flavor, local_queue


def _setup(batch: float) -> Cluster:
    c = Cluster(requeue_batch_seconds=batch)
    for o in (flavor("default"), CQ("cq").group(("default", {"cpu": "4"})).obj()):
        c.apply(o, 0)
    c.apply(local_queue("lq", "cq"), 0)
    c.apply(WL("x").queue("lq").request(cpu="4").obj(), 0)
    c.apply(WL("early").queue("lq").request(cpu="3").obj(), 1)
    c.schedule(1)
    c.finish("default/x", 5)
    return c


def _reserved(decisions: list[object]) -> list[str]:
    return [d.workload for d in decisions if isinstance(d, Reserve)]


@pytest.mark.parametrize(
    ("batch", "at_release", "wakeup", "later"),
    [
        (1.0, [], 6.0, ["default/early"]),  # the server: back 1 s after the release
        (0.0, ["default/early"], None, []),  # scenarios: at the same instant, after the heap
    ],
)
def test_released_workloads_return_after_the_batch(
    batch: float, at_release: list[str], wakeup: float | None, later: list[str]
) -> None:
    c = _setup(batch)
    assert _reserved(c.schedule(5)) == at_release
    assert c.next_wakeup() == wakeup
    assert _reserved(c.schedule(6)) == later


def test_a_waiting_batch_keeps_its_time() -> None:
    c = _setup(1.0)
    c.schedule(5)
    c.apply(WL("y").queue("lq").request(cpu="1").obj(), 5.5)
    c.schedule(5.5)  # y takes 1 cpu; the batch due at 6 is not pushed back
    c.finish("default/y", 5.7)
    c.schedule(5.7)
    assert c.next_wakeup() == 6.0
    assert _reserved(c.schedule(6)) == ["default/early"]
