"""Idle actions without thrash, in a real Engine (SQLite) on a virtual clock.

An idle holder under an ``Evict`` rule is requeued with Kueue's growing back-off (30 s, then
60 s here), judged afresh after each readmission, and deactivated (``spec.active=false``, Evicted
reason Deactivated) on the idle finding after ``backoffLimitCount`` requeues; deactivation
survives a restart and reactivating starts the count again. The owner-kind registry sends an
idle workload to its kind's ``Stop`` when one is registered, and to the eviction otherwise.
Everything is counted on the virtual clock; nothing waits for wall time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from telemetry_docs import cluster_queue, configuration, flavor, local_queue, namespace, workload

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.idle_actions import IdleAction, IdleActions
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.views import WorkloadView
from gpuaas.inventory.gpus import parse_fake_gpus
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND, WORKLOAD

T0 = 1_700_000_000.0
WINDOW, INTERVAL, BASE, LIMIT = 60.0, 15.0, 30.0, 2
CONFIG = configuration(
    {
        "hoarding": [
            {
                "windowSeconds": WINDOW,
                "action": "Evict",
                "backoffLimitCount": LIMIT,
                "backoffBaseSeconds": BASE,
                "backoffMaxSeconds": 600,
            }
        ],
        "telemetry": {"intervalSeconds": INTERVAL, "collector": "simulated"},
    }
)


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def apply(e: Engine, *docs: dict[str, Any]) -> None:
    for d in docs:
        e.create(BY_KIND[d["kind"]], d["metadata"].get("namespace"), d)


def setup(e: Engine) -> None:
    apply(e, CONFIG, namespace("team"), flavor(), cluster_queue("cq", 2))
    apply(e, local_queue("team", "lq", "cq"))
    apply(e, workload("team", "idler", queue="lq", gpus=1, profile="idle"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gpuaas.db'}"


@pytest.fixture
def engine(db: str, clock: Clock) -> Iterator[Engine]:
    store = open_store(db)
    e = Engine(store, clock=clock)
    try:
        yield e
    finally:
        e.close()
        store.close()


def view(e: Engine, key: str = "team/idler") -> WorkloadView:
    w = e.workload(key)
    assert w is not None
    return w


def run(e: Engine, clock: Clock, seconds: float) -> None:
    end = clock.t + seconds
    while clock.t + INTERVAL <= end:
        clock.t += INTERVAL
        e.tick()


def event_times(e: Engine, reason: str) -> list[float]:
    e.committer.submit([]).result(timeout=30)
    return [ev.time for ev in e.events(namespace="team") if ev.reason == reason]


def test_evict_backs_off_growing_then_deactivates_after_the_limit(
    engine: Engine, clock: Clock, db: str
) -> None:
    e = engine
    bridge = TelemetryBridge(gpus=parse_fake_gpus("2"), hostname="n").attach(e)
    setup(e)
    e.tick()  # the first sample: the idle stretch starts
    run(e, clock, 1200)

    evictions = event_times(e, "EvictedDueToIdleGPU")
    reserved = event_times(e, "QuotaReserved")
    # LIMIT idle evictions requeued, then the next idle finding deactivates
    assert len(evictions) == LIMIT
    # each readmission waits its back-off (quota was free all along): 30 s, then 60 s
    waits = [min(r for r in reserved if r > ev) - ev for ev in evictions]
    assert waits == [BASE, 2 * BASE]
    # each readmission is judged afresh: a whole window from its first sample after it
    readmitted = [min(r for r in reserved if r > ev) for ev in evictions]
    next_findings = [*evictions[1:], event_times(e, "EvictedDueToDeactivated")[0]]
    for admitted_at, found_at in zip(readmitted, next_findings, strict=True):
        assert found_at - admitted_at >= WINDOW + INTERVAL  # its sample at admission is too early

    w = view(e)
    assert w.phase == Phase.INACTIVE and not w.workload.active
    assert w.requeue_state_count == 0  # Kueue clears requeueState when it deactivates
    evicted = w.conditions["Evicted"]
    assert (evicted.status, evicted.reason) == ("True", "Deactivated")
    assert evicted.message.startswith(
        "The workload is deactivated due to exceeding the maximum number of idle-GPU evictions "
        f"(backoffLimitCount {LIMIT}): idle eviction {LIMIT + 1}; "
    )
    doc = e.get(WORKLOAD, "team", "idler")
    assert doc["spec"]["active"] is False and "requeueState" not in doc["status"]
    assert int(doc["metadata"]["generation"]) == 2
    (row,) = bridge.offenders(clock.t)
    assert (row.workload, row.state, row.idle_evictions) == ("idler", "Deactivated", LIMIT + 1)
    # deactivated: never admitted again, however long it waits
    admissions = view(e).admission_count
    run(e, clock, 3600)
    assert view(e).admission_count == admissions and view(e).phase == Phase.INACTIVE
    assert bridge.counters.values().evicted == {
        ("cq", "IdleGPU", "", ""): LIMIT,
        ("cq", "Deactivated", "", ""): 1,
    }
    e.committer.submit([]).result(timeout=30)
    bridge.close()

    # a restart keeps it deactivated (spec.active=false is stored)
    e.close()
    store = open_store(db)
    again = Engine(store, clock=clock)
    try:
        assert view(again).phase == Phase.INACTIVE
        # reactivating (spec.active=true) queues it again, its back-off count back at 0
        again.patch(WORKLOAD, "team", "idler", {"spec": {"active": True}})
        w = view(again)
        assert w.phase == Phase.ADMITTED and w.requeue_state_count == 0
    finally:
        again.close()
        store.close()


def test_requeue_state_count_survives_a_restart(engine: Engine, clock: Clock, db: str) -> None:
    e = engine
    TelemetryBridge(gpus=parse_fake_gpus("2"), hostname="n").attach(e)
    setup(e)
    e.tick()
    run(e, clock, WINDOW + INTERVAL)
    assert view(e).requeue_state_count == 1 and view(e).phase == Phase.PENDING
    e.committer.submit([]).result(timeout=30)
    e.close()
    store = open_store(db)
    again = Engine(store, clock=clock)
    try:
        assert view(again).requeue_state_count == 1
    finally:
        again.close()
        store.close()


@pytest.mark.parametrize(
    ("defaults", "stop_registered", "expected"),
    [
        pytest.param({}, False, (IdleAction.EVICT, False), id="job-evicted"),
        pytest.param(None, False, (IdleAction.EVICT, False), id="notebook-no-stop-falls-back"),
        pytest.param(None, True, (IdleAction.STOP, True), id="notebook-stopped"),
        pytest.param({"Notebook": IdleAction.EVICT}, True, (IdleAction.EVICT, False), id="set"),
    ],
)
def test_registry_resolves_by_owner_kind(
    defaults: dict[str, IdleAction] | None, stop_registered: bool, expected: tuple[Any, bool]
) -> None:
    actions = IdleActions() if defaults is None else IdleActions(defaults)
    kind = "Notebook" if defaults is None or defaults else "Job"
    if stop_registered:
        actions.register_stop("Notebook", lambda engine, w, message, now: True)
    action, handler = actions.resolve(kind)
    assert (action, handler is not None) == expected


def test_a_registered_stop_replaces_the_eviction(engine: Engine, clock: Clock) -> None:
    e = engine
    stopped: list[tuple[str, str]] = []

    def stop(engine: Engine, w: WorkloadView, message: str, now: float) -> bool:
        stopped.append((w.key, message))
        return engine.finish_now(w.key, now)  # what a kind's stop ends in: its GPUs released

    actions = IdleActions({"Workload": IdleAction.STOP})
    actions.register_stop("Workload", stop)
    bridge = TelemetryBridge(gpus=parse_fake_gpus("2"), hostname="n", idle_actions=actions)
    bridge.attach(e)
    setup(e)
    e.tick()
    run(e, clock, WINDOW)
    assert [key for key, _ in stopped] == ["team/idler"]
    assert stopped[0][1].startswith("evicted: 1 idle GPU(s) held for 60s")
    w = view(e)
    assert w.phase == Phase.FINISHED and w.requeue_state_count == 0
    assert event_times(e, "EvictedDueToIdleGPU") == []
    (row,) = bridge.offenders(clock.t)
    assert (row.state, row.idle_evictions) == ("Stopped", 1)


def test_a_stop_that_declines_falls_back_to_the_eviction(engine: Engine, clock: Clock) -> None:
    e = engine
    actions = IdleActions({"Workload": IdleAction.STOP})
    actions.register_stop("Workload", lambda engine, w, message, now: False)
    TelemetryBridge(gpus=parse_fake_gpus("2"), hostname="n", idle_actions=actions).attach(e)
    setup(e)
    e.tick()
    run(e, clock, WINDOW)
    assert len(event_times(e, "EvictedDueToIdleGPU")) == 1
    assert view(e).requeue_state_count == 1


def test_a_deactivated_job_stays_deactivated_after_a_restart(
    engine: Engine, clock: Clock, db: str
) -> None:
    e = engine
    config = configuration(
        {
            "hoarding": [{"windowSeconds": WINDOW, "action": "Evict", "backoffLimitCount": 0}],
            "telemetry": {"intervalSeconds": INTERVAL, "collector": "simulated"},
        }
    )
    TelemetryBridge(gpus=parse_fake_gpus("2"), hostname="n").attach(e)
    apply(e, config, namespace("team"), flavor(), cluster_queue("cq", 2))
    apply(e, local_queue("team", "lq", "cq"))
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "trainer",
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"gpuaas.dev/simulated-gpu-profile": "idle"},
        },
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    apply(e, job)
    e.tick()
    run(e, clock, WINDOW)
    assert view(e, "team/trainer").phase == Phase.INACTIVE  # limit 0: the first finding
    assert e.get(WORKLOAD, "team", "trainer")["spec"]["active"] is False
    e.committer.submit([]).result(timeout=30)
    e.close()
    store = open_store(db)
    again = Engine(store, clock=clock)
    try:
        assert view(again, "team/trainer").phase == Phase.INACTIVE
    finally:
        again.close()
        store.close()
