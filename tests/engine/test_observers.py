"""The engine's observer protocol and read model, with a real observer on a real engine.

An observer sees the core's decisions as types, in order; what it does through the engine's
actions inside a hook (evict, confirm_stopped, record_event) comes back to it in a further round
of the same settle, and its events land in the audit trail in the order things happened. The
views the engine hands out are values: frozen, read-only, and unchanged by later settles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.decisions import Admit, Decision, Delete, Evict, Release, Requeue, Reserve
from gpuaas.core.state import Event, Phase
from gpuaas.engine.engine import Engine
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Recorder:
    """Records every decision; on an Admit of ``evict_on_admit`` it evicts that workload, and on
    its Evict it says so in an event and confirms the stop, as a runtime with no pods would."""

    def __init__(self, evict_on_admit: str | None = None) -> None:
        self.rounds: list[list[Decision]] = []
        self.attached_at: float | None = None
        self.evict_on_admit = evict_on_admit

    def on_attach(self, engine: Engine, now: float) -> None:
        self.attached_at = now

    def on_tick(self, engine: Engine, now: float) -> None:
        pass

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None:
        self.rounds.append(list(decisions))
        for d in decisions:
            if isinstance(d, Admit) and d.workload == self.evict_on_admit:
                engine.evict(d.workload, "Test", "evicted by the observer", now)
            elif isinstance(d, Evict) and d.workload == self.evict_on_admit:
                engine.record_event(
                    Event(now, "Normal", "Stopped", f"Workload {d.workload}", "no pods",
                          workload=d.workload)
                )  # fmt: skip
                engine.confirm_stopped(d.workload, now)
                self.evict_on_admit = None

    def seen(self, key: str) -> list[type[Decision]]:
        return [type(d) for r in self.rounds for d in r if d.workload == key]


def _create(e: Engine, kind: str, doc: dict[str, Any], ns: str | None = None) -> None:
    e.create(BY_KIND[kind], ns, doc)


def _setup(e: Engine, cpu: int = 4) -> None:
    _create(e, "Namespace", {"metadata": {"name": "ns"}})
    _create(e, "ResourceFlavor", {"metadata": {"name": "rf"}})
    quotas = [{"name": "cpu", "nominalQuota": cpu}]
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": quotas}]}]
    _create(
        e,
        "ClusterQueue",
        {"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": groups}},
    )
    _create(e, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, "ns")


def _workload(name: str, cpu: int = 1) -> dict[str, Any]:
    requests = {"cpu": str(cpu)}
    containers = [{"name": "c", "resources": {"requests": requests}}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": containers}}}
            ],
        },
    }


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store, clock=Clock(), live_runtime=True)
    try:
        yield e
    finally:
        e.close()
        store.close()


def test_an_observer_sees_decision_types_in_order(engine: Engine) -> None:
    obs = Recorder()
    engine.add_observer(obs)
    assert obs.attached_at == 1000.0
    _setup(engine)
    _create(engine, "Workload", _workload("a"), "ns")
    assert obs.seen("ns/a") == [Reserve, Admit]
    reserve = next(d for r in obs.rounds for d in r if isinstance(d, Reserve))
    assert reserve.cluster_queue == "cq" and reserve.flavors == (("main", "cpu", "rf"),)
    engine.delete(BY_KIND["Workload"], "ns", "a")
    assert obs.seen("ns/a")[2:] == [Release, Delete]


def test_actions_in_a_hook_come_back_in_the_same_settle_and_the_trail_keeps_their_order(
    engine: Engine,
) -> None:
    obs = Recorder(evict_on_admit="ns/a")
    engine.add_observer(obs)
    _setup(engine)
    _create(engine, "Workload", _workload("a"), "ns")  # one request: one settle
    assert obs.seen("ns/a") == [Reserve, Admit, Evict, Release, Requeue, Reserve, Admit]
    w = engine.workload("ns/a")
    assert w is not None and w.phase == Phase.ADMITTED and w.admission_count == 2
    engine.committer.submit([]).result(timeout=10)
    reasons = [ev.reason for ev in engine.events(obj="Workload ns/a")]
    assert reasons.index("EvictedDueToTest") < reasons.index("Stopped") < reasons.index("Requeued")


def test_views_are_values(engine: Engine) -> None:
    _setup(engine, cpu=1)
    _create(engine, "Workload", _workload("a"), "ns")
    _create(engine, "Workload", _workload("b"), "ns")
    a, b = engine.workload("ns/a"), engine.workload("ns/b", why_pending=True)
    assert a is not None and b is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.phase = Phase.PENDING  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.usage[("rf", "cpu")] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        a.conditions["Admitted"] = a.conditions["Admitted"]  # type: ignore[index]
    assert b.phase == Phase.PENDING and b.why_pending
    engine.delete(BY_KIND["Workload"], "ns", "a")
    assert isinstance(engine.clock, Clock)
    engine.clock.t += 1.0
    engine.tick()  # after Kueue's 1 s requeue batch, b is admitted in its place
    assert a.phase == Phase.ADMITTED and a.usage == {("rf", "cpu"): 1000}  # unchanged
    assert b.phase == Phase.PENDING and b.conditions["QuotaReserved"].status == "False"
    now = engine.workload("ns/b")
    assert now is not None and now.phase == Phase.ADMITTED and now.why_pending is None


def test_a_cluster_view_builds_only_what_was_asked_for(engine: Engine) -> None:
    _setup(engine, cpu=1)
    _create(engine, "Workload", _workload("a"), "ns")
    _create(engine, "Workload", _workload("b"), "ns")
    bare = engine.view()
    assert bare.workloads == () and bare.local_queues == ()
    (cq,) = bare.cluster_queues
    assert (cq.name, cq.pending, cq.reserving, cq.admitted) == ("cq", 1, 1, 1)
    assert cq.usage_by_resource() == {"cpu": 1000}
    full = engine.view(workloads=True, why_pending=True, local_queues=True)
    assert [(w.key, w.position) for w in full.workloads] == [("ns/a", None), ("ns/b", 1)]
    assert full.workloads[1].why_pending and full.workloads[0].why_pending is None
    (lq,) = full.local_queues
    assert (lq.name, lq.cluster_queue, lq.pending_active + lq.pending_inadmissible) == (
        "lq",
        "cq",
        1,
    )
    assert (lq.reserving, lq.admitted, dict(lq.usage)) == (1, 1, {("rf", "cpu"): 1000})
    assert engine.view(workloads=True, namespaces={"other"}).workloads == ()
    assert engine.view().rv == full.rv


class Evictor:
    """Evicts ``key`` on its Admit and never confirms the stop: its pods are still stopping."""

    def __init__(self, key: str) -> None:
        self.key = key

    def on_attach(self, engine: Engine, now: float) -> None:
        pass

    def on_tick(self, engine: Engine, now: float) -> None:
        pass

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None:
        for d in decisions:
            if isinstance(d, Admit) and d.workload == self.key:
                engine.evict(d.workload, "Test", "evicted by the observer", now)


def test_a_queue_view_counts_a_workload_being_evicted_as_reserving_not_admitted(
    engine: Engine,
) -> None:
    """The admitted count comes from the core's index of evicting workloads, not from a pass
    over every holder: it must agree with the holders' phases before, during and after."""
    engine.add_observer(Evictor("ns/b"))
    _setup(engine, cpu=4)
    for name in ("a", "b", "c"):
        _create(engine, "Workload", _workload(name), "ns")

    def counts() -> tuple[int, int, int]:
        (cq,) = engine.view().cluster_queues
        holders = engine.workloads(phases=(Phase.ADMITTED, Phase.EVICTING))
        assert cq.admitted == sum(1 for w in holders if w.phase == Phase.ADMITTED)
        return cq.pending, cq.reserving, cq.admitted

    b = engine.workload("ns/b")
    assert b is not None and b.phase == Phase.EVICTING
    assert counts() == (0, 3, 2)
    engine.confirm_stopped("ns/b", engine.clock())
    engine.settle()
    assert counts() == (1, 2, 2)  # requeued: pending, and no longer holding quota
    engine.delete(BY_KIND["Workload"], "ns", "a")  # b is admitted again, and evicted again
    assert counts() == (0, 2, 1)
