"""The telemetry bridge fed decisions directly, with its real counters and usage ledger.

Counters come from decision types, not from reason text: ``Reserve`` and ``Admit`` count with
their wait (from the last ``Requeue``), ``Evict`` counts its reason, and an ``Evict`` naming a
preemptor also counts the preemption against the preemptor's ClusterQueue. The ledger opens an
interval at ``Reserve`` (Kueue counts usage from reservation) and closes it at ``Release``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from telemetry_docs import cluster_queue, flavor, local_queue, namespace, priority_class, workload
from test_bridge_in_engine import T0, Clock, apply

from gpuaas.core.decisions import (
    Admit,
    CheckState,
    Evict,
    Finish,
    Pend,
    Release,
    Requeue,
    Reserve,
)
from gpuaas.engine.engine import Engine
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.inventory.gpus import parse_fake_gpus
from gpuaas.store import open_store

KEY = "team/w"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Engine, TelemetryBridge, Clock]]:
    clock = Clock()
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store, clock=clock)
    bridge = TelemetryBridge(gpus=parse_fake_gpus("4"), hostname="node-1").attach(e)
    apply(
        e,
        namespace("team"),
        flavor(),
        priority_class("low", 10),
        cluster_queue("cq", 4),
        local_queue("team", "lq", "cq"),
        workload("team", "w", queue="lq", gpus=2, priority=("low", 10)),
    )
    try:
        yield e, bridge, clock
    finally:
        e.close()
        store.close()


def test_evict_counts_its_reason_and_a_preemptor_counts_the_preemption(
    setup: tuple[Engine, TelemetryBridge, Clock],
) -> None:
    e, bridge, clock = setup
    now = clock.t
    bridge.on_decisions(e, [Evict(KEY, now, "cq", "IdleGPU", "idle")], now)
    preemption = Evict(
        KEY,
        now,
        "cq",
        "Preempted",
        "by team/p",
        preemptor="team/p",
        preemption_reason="InCohortReclamation",
        preemptor_cluster_queue="other-cq",
    )
    bridge.on_decisions(e, [preemption], now)
    counters = bridge.counters.values()
    assert counters.evicted == {("cq", "IdleGPU", "", "low"): 1, ("cq", "Preempted", "", "low"): 1}
    assert counters.preempted == {("other-cq", "InCohortReclamation"): 1}


def test_reserve_opens_and_release_closes_the_usage_interval(
    setup: tuple[Engine, TelemetryBridge, Clock],
) -> None:
    e, bridge, _ = setup
    (opened,) = bridge.ledger.intervals()
    assert opened.workload_key == KEY and opened.start == T0 and opened.end is None
    bridge.on_decisions(e, [Release(KEY, T0 + 3600, "cq")], T0 + 3600)
    (closed,) = bridge.ledger.intervals()
    assert closed.end == T0 + 3600
    # A reservation opens it again from the workload's admission (still held in the engine).
    bridge.on_decisions(e, [Reserve(KEY, T0 + 3600, "cq", (), 0.0)], T0 + 3600)
    assert [i.end for i in bridge.ledger.intervals()] == [T0 + 3600, None]


def test_wait_is_measured_from_the_last_requeue(
    setup: tuple[Engine, TelemetryBridge, Clock],
) -> None:
    e, bridge, _ = setup
    before = bridge.counters.values().admission_wait[("cq", "low")]
    assert (before.count, before.sum) == (1, 0.0)
    decisions = [
        Requeue(KEY, T0 + 100, "Preempted"),
        Reserve(KEY, T0 + 130, "cq", (), 130.0),
        Admit(KEY, T0 + 130, "cq", 130.0),
    ]
    bridge.on_decisions(e, decisions, T0 + 130)
    counters = bridge.counters.values()
    assert counters.admission_wait[("cq", "low")].sum == pytest.approx(30.0)
    assert counters.quota_reserved == {("cq", "low"): 2}
    assert counters.admitted == {("cq", "low"): 2}
    bridge.on_decisions(e, [Finish(KEY, T0 + 200, succeeded=True)], T0 + 200)
    assert bridge.counters.values().finished == {("cq", "low"): 1}


def test_other_decisions_count_nothing(setup: tuple[Engine, TelemetryBridge, Clock]) -> None:
    e, bridge, clock = setup
    before = bridge.counters.values()
    now = clock.t
    bridge.on_decisions(
        e,
        [Pend(KEY, now, "Pending", "waiting"), CheckState(KEY, now, "prov", "Ready", "")],
        now,
    )
    assert bridge.counters.values() == before
    assert [i.end for i in bridge.ledger.intervals()] == [None]
