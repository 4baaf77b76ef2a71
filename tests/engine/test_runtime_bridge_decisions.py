"""The runtime bridge fed decisions directly, over a real engine and a real LocalRuntime.

It acts on decision types only: ``Reserve`` starts nothing (quota may wait for admission
checks), ``Admit`` starts the pods, ``Evict`` stops them without releasing quota while they live,
and an ``Evict`` of a workload with no pods confirms the stop at once. Decisions it has no use
for change nothing.
"""

from __future__ import annotations

import time

from test_runtime_bridge import Node, job

from gpuaas.core.decisions import Admit, CheckState, Evict, Pend, Requeue, Reserve
from gpuaas.core.state import Phase
from gpuaas.vocab.kinds import BY_KIND

JOB = BY_KIND["Job"]
SLEEP = "echo up; sleep 30"


def _running_without_pods(node: Node, key: str) -> None:
    """Admitted in the engine, its pods stopped behind the bridge's back (the test polls the
    runtime itself, so the bridge never hears of the stop and does not restart them)."""
    node.until(lambda: node.pods(key))
    node.bridge.runtime.stop(key, grace_seconds=0)
    deadline = time.monotonic() + 10
    while key in node.bridge.runs():
        assert time.monotonic() < deadline, "the pods did not stop"
        node.bridge.runtime.poll()
        time.sleep(0.02)
    assert node.phase(key) == Phase.ADMITTED


def test_reserve_starts_nothing_admit_starts_the_pods(node: Node) -> None:
    node.engine.create(JOB, "ns", job("j", SLEEP, gpus=1))
    _running_without_pods(node, "ns/j")
    now = node.engine.clock()
    node.bridge.on_decisions(node.engine, [Reserve("ns/j", now, "cq", (), 0.0)], now)
    assert "ns/j" not in node.bridge.runs()
    node.bridge.on_decisions(node.engine, [Admit("ns/j", now, "cq", 0.0)], now)
    assert node.pods("ns/j")


def test_evict_stops_the_pods_and_keeps_the_quota_while_they_live(node: Node) -> None:
    # The pod ignores SIGTERM (as its sleep inherits), so it lives through its grace period:
    # a pod that died of the SIGTERM could be reaped by the settle's own poll before the
    # test reads it (CI saw that once).
    node.engine.create(JOB, "ns", job("j", "trap '' TERM; echo up; sleep 30", gpus=1, grace=30))
    node.until(lambda: node.pods("ns/j"))
    now = node.engine.clock()
    node.bridge.on_decisions(node.engine, [Evict("ns/j", now, "cq", "Preempted", "test")], now)
    assert node.bridge.runs()["ns/j"].stopping
    assert node.phase("ns/j") == Phase.ADMITTED  # only the runtime's Stopped releases quota


def test_evict_of_a_workload_with_no_pods_confirms_the_stop(node: Node) -> None:
    node.engine.create(JOB, "ns", job("j", SLEEP, gpus=1))
    _running_without_pods(node, "ns/j")
    now = node.engine.clock()
    assert node.engine.evict("ns/j", "Test", "no pods to wait for", now)
    assert node.phase("ns/j") == Phase.EVICTING
    node.bridge.on_decisions(node.engine, [Evict("ns/j", now, "cq", "Test", "test")], now)
    assert node.phase("ns/j") == Phase.PENDING  # released and requeued, awaiting the settle


def test_other_decisions_change_nothing(node: Node) -> None:
    node.engine.create(JOB, "ns", job("j", SLEEP, gpus=1))
    _running_without_pods(node, "ns/j")
    now = node.engine.clock()
    ignored = [
        Pend("ns/j", now, "Pending", "waiting"),
        Requeue("ns/j", now, "Preempted"),
        CheckState("ns/j", now, "prov", "Pending", ""),
    ]
    node.bridge.on_decisions(node.engine, ignored, now)
    assert "ns/j" not in node.bridge.runs()
    assert node.phase("ns/j") == Phase.ADMITTED
