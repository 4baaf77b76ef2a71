"""What a MultiKueue pass reads of the manager (``hub.HubReader``): each workload is decoded
once per change, not on every pass (a full pass reads them all every second); a workload
woken by a worker's event and unchanged on the hub is not decoded again; what is kept has no
spec or managedFields, while a copy's body still gets the whole document; a workload gone is
forgotten at the next full pass; a full pass plans again only the workloads something
of which changed since a plan that changed nothing, and a pass woken by events only those
something of which changed since their last plan."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mkcluster import wait_for

from gpuaas.core import multikueue as plan_mk
from gpuaas.engine.engine import Engine
from gpuaas.engine.multikueue import remote, writes
from gpuaas.engine.multikueue.controller import MultiKueueController
from gpuaas.engine.multikueue.hub import HubReader
from gpuaas.engine.multikueue.operations import CREATE_COPY
from gpuaas.engine.multikueue.remote import RemoteClient, Target
from gpuaas.engine.multikueue.workers import Worker
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND, WORKLOAD

MK = "kueue.x-k8s.io/multikueue"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store)
    e.serve_checks(MK)  # stand in for the controller: the check is Active
    try:
        yield e
    finally:
        e.close()
        store.close()


def _create(e: Engine, kind: str, doc: dict[str, Any], ns: str | None = None) -> None:
    e.create(BY_KIND[kind], ns, doc)


def _setup(e: Engine, jobs: list[str]) -> None:
    _create(e, "Namespace", {"metadata": {"name": "ns"}})
    _create(e, "ResourceFlavor", {"metadata": {"name": "rf"}})
    params = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}
    _create(e, "AdmissionCheck", {"metadata": {"name": "mk"},
                                  "spec": {"controllerName": MK, "parameters": params}})  # fmt: skip
    groups = [{"coveredResources": ["cpu"],
               "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]  # fmt: skip
    spec = {"namespaceSelector": {}, "resourceGroups": groups, "admissionChecks": ["mk"]}
    _create(e, "ClusterQueue", {"metadata": {"name": "cq"}, "spec": spec})
    _create(e, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, "ns")
    containers = [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]
    for name in jobs:
        _create(e, "Job", {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                           "spec": {"template": {"spec": {"containers": containers}}}}, "ns")  # fmt: skip


def test_each_workload_is_decoded_once_per_change(engine: Engine) -> None:
    _setup(engine, ["a", "b"])
    reader = HubReader()
    hub = reader.read(engine, None)
    assert sorted(hub.workloads) == ["ns/a", "ns/b"] and reader.decoded == 2
    assert hub.check_of == {"ns/a": "mk", "ns/b": "mk"}
    again = reader.read(engine, None)  # the next full pass: nothing changed, nothing decoded
    assert reader.decoded == 2 and again.workloads == hub.workloads
    reader.read(engine, {"ns/a"})  # woken by a worker's event: the hub's side is as it was
    assert reader.decoded == 2
    assert writes.update_workload(engine, "ns/a", "mk", None, ("w1",), None, [])
    changed = reader.read(engine, None)
    assert reader.decoded == 3  # only the workload that changed
    assert changed.workloads["ns/a"]["status"]["nominatedClusterNames"] == ["w1"]
    doc = changed.workloads["ns/a"]
    assert "spec" not in doc and "managedFields" not in doc["metadata"]
    assert doc["metadata"]["ownerReferences"][0]["kind"] == "Job"
    full = HubReader.full_docs(engine, ["ns/a"])["ns/a"]
    assert full == engine.get(WORKLOAD, "ns", "a") and full["spec"]["podSets"]


def test_no_multikueue_check_no_walk_over_the_workloads(engine: Engine) -> None:
    """A server that dispatches nothing (its only check another controller's) does not walk
    its workloads on every full pass; once a MultiKueue check appears, the next pass does."""
    _create(engine, "AdmissionCheck", {"metadata": {"name": "other"},
                                       "spec": {"controllerName": "example.com/other"}})  # fmt: skip
    reader = HubReader()
    assert reader.read(engine, None).workloads == {} and reader.walked == 1  # checks unknown
    for _ in range(3):
        assert reader.read(engine, None).workloads == {}
    assert reader.walked == 1 and reader.checks_read == 1
    _setup(engine, ["a"])  # a MultiKueue check and a Job under it
    assert sorted(reader.read(engine, None).workloads) == ["ns/a"] and reader.walked == 2


def test_a_workload_gone_is_forgotten_at_the_next_full_pass(engine: Engine) -> None:
    _setup(engine, ["a", "b"])
    reader = HubReader()
    reader.read(engine, None)
    engine.delete(BY_KIND["Job"], "ns", "b")
    assert sorted(reader.read(engine, None).workloads) == ["ns/a"]
    assert list(reader._docs) == ["ns/a"]


def test_a_full_pass_plans_again_only_what_changed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(engine, ["a", "b"])
    planned: list[int] = []
    real = plan_mk.reconcile
    monkeypatch.setattr(plan_mk, "reconcile", lambda *a, **k: planned.append(1) or real(*a, **k))
    c = MultiKueueController()
    c.engine = engine
    try:
        c.sync_once(None)  # each planned: its check's Pending message written
        assert len(planned) == 2
        # Its own update foretold (the message as written), nothing else changed: skipped.
        c.sync_once(None)
        assert len(planned) == 2
        c.sync_once({"ns/a"})
        assert len(planned) == 2  # an event's pass too, while nothing of it changed
        assert writes.update_workload(engine, "ns/a", "mk", None, ("w1",), None, [])
        c.sync_once({"ns/a"})
        assert len(planned) == 3  # what it reads changed (its nomination): planned again
        assert writes.update_workload(engine, "ns/b", "mk", None, ("w1",), None, [])
        c.sync_once(None)
        assert len(planned) == 4  # only b: a's last plan wrote what a shows now
    finally:
        c.close()


def test_a_full_pass_skips_what_waits_on_a_worker_and_retries_a_failed_write(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload whose copy is on its way is not planned again by each full pass (at 1,000
    Jobs those plans were a third of all), until the create fails: then the next full pass
    plans it again and sends the copy anew."""
    _setup(engine, ["a"])
    _create(engine, "MultiKueueConfig", {"metadata": {"name": "cfg"}, "spec": {"clusters": ["w1"]}})
    monkeypatch.setattr(remote, "_READ", 0.5)  # the silent worker's answer: given up on then
    silent = socket.socket()  # connects (the backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    planned: list[str] = []
    real = plan_mk.reconcile
    monkeypatch.setattr(plan_mk, "reconcile", lambda *a, **k: planned.append("a") or real(*a, **k))
    c = MultiKueueController()
    c.engine = engine
    monkeypatch.setattr(c, "_load_workers", lambda _engine: None)  # no MultiKueueCluster here
    w = Worker("w1", time.time, c._touch, "hub")
    w.client = RemoteClient(Target(f"http://127.0.0.1:{silent.getsockname()[1]}", "", None))
    w.active = True
    c.workers["w1"] = w
    try:
        for _ in range(3):  # the check's Active, then the copy sent and the nomination written
            c.sync_once(None)
        assert c._in_flight.busy(CREATE_COPY, "w1", "ns/a")
        before = len(planned)
        c.sync_once(None)
        assert len(planned) == before  # nothing changed: the copy is still on its way
        wait_for("the create given up", lambda: not c._in_flight.busy(CREATE_COPY, "w1", "ns/a"))
        c.sync_once(None)
        assert len(planned) == before + 1  # it failed: planned again, and sent again
        assert c._in_flight.busy(CREATE_COPY, "w1", "ns/a")
    finally:
        c.close()
        silent.close()
