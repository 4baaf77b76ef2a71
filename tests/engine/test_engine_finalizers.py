"""Finalizers in the engine, in-process on SQLite: Kueue's ``resource-in-use`` keeps a deleted
ResourceFlavor, ClusterQueue or AdmissionCheck Terminating while it is in use, a terminating
ClusterQueue admits nothing new, and all of it survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid, NotFound
from gpuaas.engine.finalizers import RESOURCE_IN_USE
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

NS, RF, CQ, LQ, WL, AC = (BY_KIND[k] for k in ("Namespace", "ResourceFlavor", "ClusterQueue",
                                              "LocalQueue", "Workload", "AdmissionCheck"))  # fmt: skip


def _cq(name: str, flavor: str = "rf", checks: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 2}]}]}],
    }  # fmt: skip
    if checks:
        spec["admissionChecks"] = list(checks)
    return {"metadata": {"name": name}, "spec": spec}


def _wl(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"queueName": "lq", "podSets": [
        {"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    e = Engine(store)
    e.create(NS, None, {"metadata": {"name": "ns"}})
    e.create(RF, None, {"metadata": {"name": "rf"}})
    e.create(CQ, None, _cq("cq"))
    e.create(LQ, "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    try:
        yield e
    finally:
        e.close()
        store.close()


def _active(e: Engine, name: str) -> tuple[str, str]:
    conditions = e.get(CQ, None, name)["status"]["conditions"]
    active = next(c for c in conditions if c["type"] == "Active")
    if active["reason"] == "Terminating":  # Kueue's words (pkg/cache/scheduler/clusterqueue.go)
        assert active["message"] == "Can't admit new workloads; clusterQueue is terminating"
    return active["status"], active["reason"]


def _meta(e: Engine, kind: Any, name: str, ns: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = e.get(kind, ns, name)["metadata"]
    return meta


def test_kueue_objects_get_the_finalizer_and_keep_it(engine: Engine) -> None:
    assert _meta(engine, RF, "rf")["finalizers"] == [RESOURCE_IN_USE]
    doc = engine.get(CQ, None, "cq")
    doc["metadata"]["finalizers"] = []
    engine.replace(CQ, None, "cq", doc)  # Kueue's controller puts it back
    assert _meta(engine, CQ, "cq")["finalizers"] == [RESOURCE_IN_USE]
    assert "finalizers" not in _meta(engine, LQ, "lq", "ns")


def test_a_flavor_in_use_stays_terminating_until_its_queue_goes(engine: Engine) -> None:
    engine.delete(RF, None, "rf")
    meta = _meta(engine, RF, "rf")
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0
    assert _active(engine, "cq")[0] == "True"  # the flavor is still in the cache, as in Kueue
    engine.delete(CQ, None, "cq")  # no workloads: gone at once, and so is the flavor
    with pytest.raises(NotFound):
        engine.get(CQ, None, "cq")
    with pytest.raises(NotFound):
        engine.get(RF, None, "rf")


def test_a_terminating_cluster_queue_admits_nothing_new(engine: Engine) -> None:
    engine.create(WL, "ns", _wl("first"))
    assert engine.workload("ns/first").phase == Phase.ADMITTED
    engine.delete(CQ, None, "cq")
    assert _meta(engine, CQ, "cq")["deletionTimestamp"]
    assert _active(engine, "cq") == ("False", "Terminating")
    engine.create(WL, "ns", _wl("second"))
    assert engine.workload("ns/second").phase != Phase.ADMITTED
    doc = engine.get(CQ, None, "cq")  # an update keeps it terminating, as in Kubernetes
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 3
    engine.replace(CQ, None, "cq", doc)
    assert _meta(engine, CQ, "cq")["deletionTimestamp"]
    assert _active(engine, "cq") == ("False", "Terminating")
    assert engine.workload("ns/second").phase != Phase.ADMITTED
    engine.delete(WL, "ns", "first")
    engine.tick()
    with pytest.raises(NotFound):
        engine.get(CQ, None, "cq")


def test_an_admission_check_named_by_a_queue_stays(engine: Engine) -> None:
    engine.create(AC, None, {"metadata": {"name": "ac"}, "spec": {"controllerName": "x.io/c"}})
    engine.create(CQ, None, _cq("checked", checks=("ac",)))
    engine.delete(AC, None, "ac")
    assert _meta(engine, AC, "ac")["deletionTimestamp"]
    engine.delete(CQ, None, "checked")
    engine.tick()
    with pytest.raises(NotFound):
        engine.get(AC, None, "ac")


def test_no_new_finalizer_on_a_terminating_object_and_removing_the_last_deletes(
    engine: Engine,
) -> None:
    doc = engine.get(LQ, "ns", "lq")
    doc["metadata"]["finalizers"] = ["example.com/hold"]
    engine.replace(LQ, "ns", "lq", doc)
    engine.delete(LQ, "ns", "lq")
    doc = engine.get(LQ, "ns", "lq")
    assert doc["metadata"]["deletionTimestamp"]
    doc["metadata"]["finalizers"] = ["example.com/hold", "example.com/more"]
    with pytest.raises(Invalid, match="no new finalizers"):
        engine.replace(LQ, "ns", "lq", doc)
    doc["metadata"]["finalizers"] = []
    engine.replace(LQ, "ns", "lq", doc)
    with pytest.raises(NotFound):
        engine.get(LQ, "ns", "lq")


def test_a_terminating_cluster_queue_is_terminating_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db'}"
    store = open_store(url)
    e = Engine(store)
    e.create(NS, None, {"metadata": {"name": "ns"}})
    e.create(RF, None, {"metadata": {"name": "rf"}})
    e.create(CQ, None, _cq("cq"))
    e.create(LQ, "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    e.create(WL, "ns", _wl("first"))
    e.delete(CQ, None, "cq")
    e.close()
    store.close()
    store = open_store(url)
    e = Engine(store)
    try:
        assert e.workload("ns/first").phase == Phase.ADMITTED
        assert _active(e, "cq") == ("False", "Terminating")
        e.delete(WL, "ns", "first")
        e.tick()
        with pytest.raises(NotFound):
            e.get(CQ, None, "cq")
    finally:
        e.close()
        store.close()
