"""Admission-check controllers in the engine: one module plus one registry line, on a real engine.

A controller registered under its AdmissionCheck's ``controllerName`` makes that check Active and
sees every workload that reserves quota with the check Pending (``engine.checks``); it answers
through ``engine.set_check_state``, and the core does what Kueue's workload controller does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.state import Phase
from gpuaas.engine import checks
from gpuaas.engine.checks import CheckDispatcher
from gpuaas.engine.engine import Engine
from gpuaas.engine.views import WorkloadView
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

CONTROLLER = "example.com/budget"


class Budget:
    """Approves a workload whose name starts with ``ok``, asks the rest to retry in 30 s."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_reserved(self, engine: Engine, workload: WorkloadView, check: str, now: float) -> None:
        self.seen.append((workload.key, check))
        if workload.name.startswith("ok"):
            engine.set_check_state(workload.key, check, "Ready", "within budget", now)
        else:
            engine.set_check_state(workload.key, check, "Retry", "over budget", now, 30)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    checks.register(CONTROLLER, Budget)  # the one line a new controller needs
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store, clock=Clock())
    try:
        yield e
    finally:
        checks.REGISTRY.pop(CONTROLLER, None)
        e.close()
        store.close()


def _create(e: Engine, kind: str, doc: dict[str, Any], ns: str | None = None) -> None:
    e.create(BY_KIND[kind], ns, doc)


def _setup(e: Engine) -> None:
    _create(e, "Namespace", {"metadata": {"name": "ns"}})
    _create(e, "ResourceFlavor", {"metadata": {"name": "rf"}})
    _create(
        e,
        "AdmissionCheck",
        {"metadata": {"name": "budget"}, "spec": {"controllerName": CONTROLLER}},
    )
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
        }
    ]
    spec = {"namespaceSelector": {}, "resourceGroups": groups, "admissionChecks": ["budget"]}
    _create(e, "ClusterQueue", {"metadata": {"name": "cq"}, "spec": spec})
    _create(e, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, "ns")


def _workload(name: str) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]
    pod_sets = [{"name": "main", "count": 1, "template": {"spec": {"containers": containers}}}]
    return {"metadata": {"name": name}, "spec": {"queueName": "lq", "podSets": pod_sets}}


def test_without_its_controller_the_check_is_inactive(engine: Engine) -> None:
    _setup(engine)
    _create(engine, "Workload", _workload("ok-a"), "ns")
    w = engine.workload("ns/ok-a")
    assert w is not None and w.phase == Phase.PENDING
    assert "references inactive AdmissionCheck(s): budget" in engine.explain("ns", "ok-a")["reason"]


def test_a_registered_controller_decides_its_checks(engine: Engine) -> None:
    dispatcher = CheckDispatcher.from_registry([CONTROLLER])
    engine.add_observer(dispatcher)
    _setup(engine)
    _create(engine, "Workload", _workload("ok-a"), "ns")
    a = engine.workload("ns/ok-a")
    assert a is not None and a.phase == Phase.ADMITTED and not a.awaiting_checks
    assert a.admission_checks == (("budget", "Ready", "within budget"),)
    assert a.conditions["Admitted"].status == "True"
    # Retry: evicted, quota released, kept out of its queue for 30 s, then back.
    engine.delete(BY_KIND["Workload"], "ns", "ok-a")
    _create(engine, "Workload", _workload("big"), "ns")
    big = engine.workload("ns/big")
    assert big is not None and big.phase == Phase.PENDING
    assert big.conditions["Evicted"].reason == "AdmissionCheck"
    assert engine.explain("ns", "big")["admissionChecks"][0]["state"] == "Pending"
    budget = dispatcher.controllers[CONTROLLER]
    assert isinstance(budget, Budget) and budget.seen == [
        ("ns/ok-a", "budget"),
        ("ns/big", "budget"),
    ]
    assert isinstance(engine.clock, Clock)
    engine.clock.t += 31
    engine.tick()
    assert budget.seen[-1] == ("ns/big", "budget")  # reserved again, asked again
    assert len(budget.seen) == 3


def test_check_states_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gpuaas.db'}"
    store = open_store(url)
    e = Engine(store, clock=Clock())
    _setup(e)
    active = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
    e.update_admission_check_status("budget", {"status": active})  # an external controller
    _create(e, "Workload", _workload("a"), "ns")
    e.close()
    store.close()

    store = open_store(url)
    e2 = Engine(store, clock=Clock())
    try:
        a = e2.workload("ns/a")
        assert a is not None and a.phase == Phase.ADMITTED and a.awaiting_checks
        assert a.admission_checks == (("budget", "Pending", ""),)
        ready = {"admissionChecks": [{"name": "budget", "state": "Ready"}]}
        doc = e2.update_check_states("ns", "a", {"status": ready})
        assert [c["state"] for c in doc["status"]["admissionChecks"]] == ["Ready"]
        a = e2.workload("ns/a")
        assert a is not None and a.conditions["Admitted"].status == "True"
    finally:
        e2.close()
        store.close()


def test_a_rejected_check_writes_spec_active_false_which_survives_a_restart(
    tmp_path: Path,
) -> None:
    """Kueue's workload controller deactivates a workload whose check is Rejected by writing
    ``spec.active=false``: the stored Workload says so, and a restarted engine keeps it inactive
    instead of queueing it again."""
    url = f"sqlite:///{tmp_path / 'gpuaas.db'}"
    store = open_store(url)
    e = Engine(store, clock=Clock())
    _setup(e)
    active = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
    e.update_admission_check_status("budget", {"status": active})
    _create(e, "Workload", _workload("a"), "ns")
    rejected = {"admissionChecks": [{"name": "budget", "state": "Rejected", "message": "no"}]}
    e.update_check_states("ns", "a", {"status": rejected})
    a = e.workload("ns/a")
    assert a is not None and a.phase == Phase.INACTIVE
    assert e.get(BY_KIND["Workload"], "ns", "a")["spec"]["active"] is False
    e.close()
    store.close()

    store = open_store(url)
    e2 = Engine(store, clock=Clock())
    try:
        a = e2.workload("ns/a")
        assert a is not None and a.phase == Phase.INACTIVE
        assert e2.get(BY_KIND["Workload"], "ns", "a")["spec"]["active"] is False
    finally:
        e2.close()
        store.close()
