"""Creates acknowledged before they are scheduled decide exactly what synchronous creates decide.

With the scheduler thread started (the server's mode) a Workload create returns once stored and
its admission is decided later, each arrival at the instant it arrived. For any sequence of
creates (priorities, sizes, queues) and later changes (a quota cut, a delete), the workloads end
in the same phases on the same flavors, with the same conditions and events, as with an engine
that schedules inside every create. Reads settle first, so a read right after a create already
sees its admission.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.engine.engine import Engine
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

WL = BY_KIND["Workload"]
CQ = BY_KIND["ClusterQueue"]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 0.25  # every request at its own instant
        return self.t


def cluster_queue(quota: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "a", "resources": [{"name": "cpu", "nominalQuota": quota}]},
                        {"name": "b", "resources": [{"name": "cpu", "nominalQuota": 2}]},
                    ],
                }
            ],
        },
    }


def setup_docs(quota: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "b"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
         "metadata": {"name": "high"}, "value": 100},
        cluster_queue(quota),
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
         "metadata": {"name": "lq", "namespace": "t"}, "spec": {"clusterQueue": "cq"}},
    ]  # fmt: skip


def workload(name: str, cpu: int, high: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]
                    }
                },
            }
        ],
    }
    if high:
        spec["priorityClassName"] = "high"
        spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "t"},
        "spec": spec,
    }


# A step: ("create", cpu, high) | ("quota", n) | ("delete", index of an earlier create)
Step = tuple[str, int, bool]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("quota"), st.integers(0, 8), st.just(False)),
        st.tuples(st.just("delete"), st.integers(0, 20), st.just(False)),
    ),
    min_size=1,
    max_size=25,
)


UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _plain(value: Any) -> Any:
    """Every uid (new for every create: a preemptor's uid in a message) as one placeholder."""
    return UID.sub("<uid>", json.dumps(value, sort_keys=True))


def _outcome(engine: Engine) -> tuple[Any, ...]:
    docs, _ = engine.list_objects(WL)
    statuses = tuple(
        (
            d["metadata"]["name"],
            _conditions(d.get("status", {})),
            d.get("status", {}).get("admission"),
        )
        for d in docs
    )
    events = tuple((e.reason, e.object, e.message) for e in engine.events())
    return _plain(statuses), _plain(events)


def _conditions(status: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (c["type"], c["status"], c["reason"], c["message"]) for c in status.get("conditions", [])
    )


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(tmp: Path, seq: list[Step], background: bool) -> tuple[Any, ...]:
    engine = Engine(open_store(str(_fresh(tmp) / "g.db")), clock=Clock())
    try:
        for doc in setup_docs(4):
            engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
        if background:
            engine.start_scheduler()
        created: list[str] = []
        for i, (op, n, high) in enumerate(seq):
            if op == "create":
                name = f"w{i}"
                engine.create(WL, "t", workload(name, n, high))
                created.append(name)
            elif op == "quota":
                engine.replace(CQ, None, "cq", copy.deepcopy(cluster_queue(n)))
            elif created:
                name = created.pop(n % len(created))
                engine.delete(WL, "t", name)
        return _outcome(engine)
    finally:
        engine.close()


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seq=steps)
def test_acknowledged_creates_decide_what_synchronous_creates_decide(
    tmp: Path, seq: list[Step]
) -> None:
    n = len(list(tmp.iterdir()))
    sync = _run(tmp / f"sync-{n}", seq, background=False)
    deferred = _run(tmp / f"bg-{n}", seq, background=True)
    assert deferred == sync


def test_a_read_right_after_a_create_sees_its_admission(tmp_path: Path) -> None:
    engine = Engine(open_store(str(tmp_path / "g.db")), clock=Clock())
    try:
        for doc in setup_docs(4):
            engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
        engine.start_scheduler()
        out = engine.create(WL, "t", workload("w", 2, False))
        assert "admission" not in out.get("status", {})  # acknowledged before it is decided
        got = engine.get(WL, "t", "w")
        assert got["status"]["admission"]["clusterQueue"] == "cq"
        view = engine.workload("t/w")
        assert view is not None and view.admission is not None
    finally:
        engine.close()


def test_settle_decides_every_acknowledged_create(tmp_path: Path) -> None:
    engine = Engine(open_store(str(tmp_path / "g.db")), clock=Clock())
    try:
        for doc in setup_docs(3):
            engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
        engine.start_scheduler()
        for i in range(20):
            engine.create(WL, "t", workload(f"w{i}", 1, False))
        engine.settle()
        admitted = [w.key for w in engine.workloads() if w.admission is not None]
        # 3 CPUs on flavor a, then 2 on flavor b: the first five in creation order
        assert admitted == [f"t/w{i}" for i in range(5)]
    finally:
        engine.close()


def test_close_right_after_a_create_stops_the_scheduler_thread(tmp_path: Path) -> None:
    """A close() that lands while the scheduler thread gathers arrivals (right after the create
    that woke it) still stops the thread: its wake-up must not be cleared unseen."""
    for i in range(10):
        engine = Engine(open_store(str(tmp_path / f"g{i}.db")), clock=Clock())
        for doc in setup_docs(4):
            engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
        before = set(threading.enumerate())
        engine.start_scheduler()
        (thread,) = [t for t in threading.enumerate() if t not in before]
        engine.create(WL, "t", workload("w", 1, False))
        engine.close()
        assert not thread.is_alive(), f"round {i}: the scheduler thread outlived close()"


@pytest.mark.parametrize("background", [False, True])
def test_the_records_held_are_deflated_once_stored(tmp_path: Path, background: bool) -> None:
    """Records are built as plain JSON under the lock and deflated on the group committer's
    thread once stored (``store.compact_held``): what the engine holds for good stays small."""
    engine = Engine(open_store(str(tmp_path / "g.db")), clock=Clock())
    for doc in setup_docs(3):
        engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
    if background:
        engine.start_scheduler()
    for i in range(30):
        engine.create(WL, "t", workload(f"w{i}", 1, False))
    for i in range(3):  # a Job's own record gets no status write, its Workload does
        engine.create(BY_KIND["Job"], "t", _job(f"j{i}"))
    engine.settle()
    engine.close()  # the committer's thread has run its hook for every batch
    held = [r for r in engine.objects.values() if r.key.gk in (WL.gk, BY_KIND["Job"].gk)]
    assert len(held) == 36 and all("status" in r.doc for r in held if r.key.gk == WL.gk)
    assert all(r.size * 2 < len(r.doc_json) for r in held)


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"],
                                     "resources": {"requests": {"cpu": "1"}}}]}}}}  # fmt: skip
