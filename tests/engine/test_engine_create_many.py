"""``Engine.create_many``: several creates begun in order and waited for together (the server
hands it the creates of one event-loop step) answer and decide what one create per call does.

Each item gets its own answer or its own error (a name taken earlier in the same call, an
invalid document), the others are stored all the same, and the admissions decided afterwards
are those of the same creates made one by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.manifest_notebook import STOPPED_ANNOTATION
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import AlreadyExists, Invalid
from gpuaas.store import Ack, AppendChange, Write, open_store
from gpuaas.vocab.kinds import BY_KIND, NOTEBOOK

WL = BY_KIND["Workload"]
JOB = BY_KIND["Job"]
_VOLATILE = re.compile(
    r'"(uid|creationTimestamp|lastTransitionTime|time|resourceVersion)": "[^"]*"'
    r"|[0-9a-f]{8}-[0-9a-f-]{27}"
)  # what differs from one run to the next (rvs: the scheduler thread settles in between)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 0.25
        return self.t


SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
              "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": 3}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "lq", "namespace": "t"}, "spec": {"clusterQueue": "cq"}},
]  # fmt: skip


def workload(name: str, cpu: int = 1) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "t"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1"}}}]}}}}  # fmt: skip


def _engine(path: Path, *, scheduler: bool) -> Engine:
    engine = Engine(open_store(str(path)), clock=Clock())
    for doc in SETUP:
        engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
    if scheduler:
        engine.start_scheduler()
    return engine


def _plain(value: Any) -> str:
    return _VOLATILE.sub("<v>", json.dumps(value, sort_keys=True))


def _workloads(engine: Engine) -> str:
    docs, _ = engine.list_objects(WL)
    return _plain([(d["metadata"]["name"], d.get("status")) for d in docs])


@pytest.mark.parametrize("scheduler", [True, False])
def test_each_item_gets_its_own_answer_and_the_same_decisions(
    tmp_path: Path, scheduler: bool
) -> None:
    bad = workload("w-bad")
    bad["spec"]["podSets"] = "not a list"
    items = [workload("w0", 2), workload("w0"), bad, workload("w1"), workload("w2", 2)]
    many = _engine(tmp_path / "many.db", scheduler=scheduler)
    one = _engine(tmp_path / "one.db", scheduler=scheduler)
    try:
        got = many.create_many(WL, [("t", d) for d in items])
        expected: list[Any] = []
        for doc in items:
            try:
                expected.append(one.create(WL, "t", doc))
            except (AlreadyExists, Invalid) as exc:
                expected.append(exc)
        assert [type(a) for a in got] == [dict, AlreadyExists, Invalid, dict, dict]
        assert [type(a) for a in got] == [type(a) for a in expected]
        assert [str(a) for a in got[1:3]] == [str(a) for a in expected[1:3]]
        assert _plain([a for a in got if isinstance(a, dict)]) == _plain(
            [a for a in expected if isinstance(a, dict)]
        )
        for engine in (many, one):
            engine.settle()
        assert _workloads(many) == _workloads(one)
        assert '"clusterQueue": "cq"' in _workloads(many)  # w0 and w1 admitted, w2 waits
    finally:
        many.close()
        one.close()


def test_every_answered_item_is_stored(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "g.db", scheduler=True)
    items = [("t", workload(f"w{i}")) for i in range(20)] + [("t", workload("w3"))]
    got = engine.create_many(WL, items)
    jobs = engine.create_many(JOB, [("t", job("j0")), ("t", job("j1"))])
    engine.close()
    assert all(isinstance(a, dict) for a in got[:20] + jobs)
    assert isinstance(got[20], AlreadyExists)
    reopened = Engine(open_store(str(tmp_path / "g.db")), clock=Clock())
    try:
        names = {d["metadata"]["name"] for d in reopened.list_objects(WL)[0]}
        assert len(names) == 22 and names >= {f"w{i}" for i in range(20)}  # and the jobs' two
        assert {d["metadata"]["name"] for d in reopened.list_objects(JOB)[0]} == {"j0", "j1"}
    finally:
        reopened.close()


def notebook(name: str, *, stopped: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if stopped:
        meta["annotations"] = {STOPPED_ANNOTATION: "now"}
    container = {"name": name, "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": meta,
            "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip


def _submits(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[list[Write]]:
    """Every list of writes handed to the group commit from now on, in submission order."""
    seen: list[list[Write]] = []
    submit = engine.committer.submit

    def spy(
        writes: Sequence[Write], after: Callable[[], None] | None = None, *, waiting: bool = True
    ) -> Ack:
        seen.append(list(writes))
        return submit(writes, after, waiting=waiting)

    monkeypatch.setattr(engine.committer, "submit", spy)
    return seen


def _added(writes: list[Write]) -> list[str]:
    return [
        w.change.key.name
        for w in writes
        if isinstance(w, AppendChange) and w.change.type == "ADDED"
    ]


def test_arrivals_go_to_the_group_commit_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(tmp_path / "g.db", scheduler=True)
    try:
        seen = _submits(engine, monkeypatch)
        got = engine.create_many(WL, [("t", workload(f"w{i}")) for i in range(8)])
        assert all(isinstance(a, dict) for a in got)
        creates = [added for added in map(_added, seen) if added]
        assert creates == [[f"w{i}" for i in range(8)]]  # one item, in order
    finally:
        engine.close()


def test_a_create_that_settles_at_once_is_stored_after_the_arrivals_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped Notebook has no Workload and settles inside its create, catching up on the
    arrivals first: their own writes are submitted before the statuses that catch-up decides."""
    engine = _engine(tmp_path / "g.db", scheduler=True)
    try:
        seen = _submits(engine, monkeypatch)
        docs = [notebook("a"), notebook("b"), notebook("c", stopped=True), notebook("d")]
        got = engine.create_many(NOTEBOOK, [("t", d) for d in docs])
        assert all(isinstance(a, dict) for a in got)
        engine.settle()
        order = [
            (w.change.type, w.change.key.gk == WL.gk, w.change.key.name)
            for writes in seen
            for w in writes
            if isinstance(w, AppendChange)
        ]
        for name in "abd":  # each Workload is stored before its status
            added = order.index(("ADDED", True, name))
            assert added < order.index(("MODIFIED", True, name)), order
        assert [a for a in map(_added, seen) if a] == [
            ["a", "a", "b", "b"],  # each Notebook with its Workload
            ["c"],
            ["d", "d"],
        ]
    finally:
        engine.close()
