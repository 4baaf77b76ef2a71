"""waitForPodsReady through the engine and the local runtime: the bridge reports pods ready.

A real engine on SQLite with the real local runtime (fake GPUs) and Kueue's waitForPodsReady
configured; the engine's clock is the test's, so timeouts are crossed by moving it, not by
waiting. A Job whose processes run is PodsReady at once and never times out; a Job whose pods
cannot start (more GPUs than this node has, though quota admits it) is evicted with
PodsReadyTimeout after the timeout, and requeued with back-off (``status.requeueState``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_runtime_bridge import _setup, job

from gpuaas.core.config import RequeuingStrategy, SchedulerConfig, WaitForPodsReady
from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.inventory import parse_fake_gpus
from gpuaas.runtimes import LocalRuntime
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

JOB = BY_KIND["Job"]
WORKLOAD = BY_KIND["Workload"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Engine, RuntimeBridge, Clock]]:
    cfg = WaitForPodsReady(
        timeout_seconds=30,
        recovery_timeout_seconds=30,
        block_admission=False,
        requeuing_strategy=RequeuingStrategy(backoff_base_seconds=10),
    )
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    clock = Clock()
    engine = Engine(
        store, config=SchedulerConfig(wait_for_pods_ready=cfg), clock=clock, live_runtime=True
    )
    bridge = RuntimeBridge(LocalRuntime(tmp_path / "runtime", parse_fake_gpus("2")))
    bridge.attach(engine)
    _setup(engine)
    try:
        yield engine, bridge, clock
    finally:
        bridge.shutdown(grace_seconds=0)
        engine.close()
        store.close()


def _until(engine: Engine, what: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        engine.poll_observers()
        got = what()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError("timed out")


def _cond(engine: Engine, name: str, type_: str) -> tuple[str, str] | None:
    engine.committer.submit([]).result(timeout=10)
    doc = engine.get(WORKLOAD, "ns", name)
    for c in doc.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c["status"], c["reason"]
    return None


def test_running_pods_are_ready_and_never_time_out(
    setup: tuple[Engine, RuntimeBridge, Clock],
) -> None:
    engine, _, clock = setup
    engine.create(JOB, "ns", job("ok", "sleep 30", gpus=1))
    _until(engine, lambda: _cond(engine, "ok", "PodsReady") == ("True", "Started"))
    clock.now += 100
    engine.tick()
    assert engine.workload("ns/ok").phase == Phase.ADMITTED  # type: ignore[union-attr]


def test_pods_that_cannot_start_time_out_and_are_requeued_with_backoff(
    setup: tuple[Engine, RuntimeBridge, Clock],
) -> None:
    engine, bridge, clock = setup
    engine.create(JOB, "ns", job("big", "sleep 30", gpus=4))  # quota 4, this node has 2
    _until(engine, lambda: engine.workload("ns/big").phase == Phase.ADMITTED)  # type: ignore[union-attr]
    assert _cond(engine, "big", "PodsReady") == ("False", "WaitForStart")
    assert "ns/big" not in bridge.runs()  # pending: FailedScheduling
    clock.now += 29
    engine.tick()
    assert engine.workload("ns/big").phase == Phase.ADMITTED  # type: ignore[union-attr]
    clock.now += 1
    engine.tick()  # the timeout: evicted; no pod ran, so the quota is free at once
    st = engine.workload("ns/big")
    assert st is not None and st.phase == Phase.PENDING
    assert _cond(engine, "big", "Evicted") == ("True", "PodsReadyTimeout")
    assert _cond(engine, "big", "Requeued") == ("False", "PodsReadyTimeout")
    doc = engine.get(WORKLOAD, "ns", "big")
    assert doc["status"]["requeueState"]["count"] == 1
    clock.now += 10  # backoffBaseSeconds * 2^0
    engine.tick()
    assert _cond(engine, "big", "Requeued") == ("True", "BackoffFinished")
    assert engine.workload("ns/big").phase == Phase.ADMITTED  # type: ignore[union-attr]
