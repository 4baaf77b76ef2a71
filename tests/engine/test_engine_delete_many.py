"""``Engine.delete_many``: the deletes of one event-loop step, made together, answer and decide
what the same deletes made one by one do.

Each item gets its own answer or error (missing, deleted earlier in the same call, a Workload its
Job owns), an object with finalizers only turns Terminating, the quota the deletes free admits
what waits exactly as one delete after another does, and what the call stores reaches the group
commit in resourceVersion order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid, NotFound
from gpuaas.store import Ack, AppendChange, Write, open_store
from gpuaas.vocab.kinds import BY_KIND

WL, JOB, CQ, RF = (BY_KIND[k] for k in ("Workload", "Job", "ClusterQueue", "ResourceFlavor"))
_VOLATILE = re.compile(
    r'"(uid|creationTimestamp|lastTransitionTime|time|resourceVersion|deletionTimestamp)": '
    r'"[^"]*"|[0-9a-f]{8}-[0-9a-f-]{27}'
)


class Clock:
    """Still until moved: both engines of a comparison read the same instants however many
    times they read it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
              "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "lq", "namespace": "t"}, "spec": {"clusterQueue": "cq"}},
]  # fmt: skip


def workload(name: str, cpu: int = 1, finalizers: Sequence[str] = ()) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}
    meta: dict[str, Any] = {"name": name, "namespace": "t"}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def job(name: str, cpu: int = 1) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": str(cpu)}}}]}}}}  # fmt: skip


def _engine(path: Path, *, scheduler: bool) -> Engine:
    engine = Engine(open_store(str(path)), clock=Clock())
    engine.clock.t = 1000.0  # type: ignore[attr-defined]
    for doc in SETUP:
        engine.create(BY_KIND[doc["kind"]], doc["metadata"].get("namespace"), doc)
    # Admitted: w-big (2), w1, w-final (finalizer) = 4 of 4. Waiting, in order: w-next (2), w-last.
    for doc in (workload("w-big", 2), workload("w1"), workload("w-final", 1, ["example.com/keep"]),
                workload("w-next", 2), workload("w-last")):  # fmt: skip
        engine.create(WL, "t", doc)
    engine.create(JOB, "t", job("j0"))  # its Workload j0 is the Job's
    if scheduler:
        engine.start_scheduler()
    engine.settle()
    return engine


def _plain(value: Any) -> str:
    return _VOLATILE.sub("<v>", json.dumps(value, sort_keys=True))


def _state(engine: Engine) -> str:
    engine.settle()
    docs, _ = engine.list_objects(WL)
    return _plain(sorted((d["metadata"]["name"], d["metadata"].get("deletionTimestamp") is not None,
                          d.get("status")) for d in docs))  # fmt: skip


def _admitted(engine: Engine) -> list[str]:
    docs, _ = engine.list_objects(WL)
    return sorted(d["metadata"]["name"] for d in docs if (d.get("status") or {}).get("admission"))


def _one_by_one(engine: Engine, items: Sequence[tuple[str | None, str]]) -> list[Any]:
    out: list[Any] = []
    for namespace, name in items:
        try:
            out.append(engine.delete(WL, namespace, name))
        except (NotFound, Invalid) as exc:
            out.append(exc)
    return out


ITEMS: list[tuple[str | None, str]] = [
    ("t", "w-big"), ("t", "missing"), ("t", "w-final"), ("t", "w-big"), ("t", "w1"),
]  # fmt: skip


@pytest.mark.parametrize("scheduler", [True, False])
def test_each_item_gets_the_answer_and_the_decisions_of_one_delete_after_another(
    tmp_path: Path, scheduler: bool
) -> None:
    many = _engine(tmp_path / "many.db", scheduler=scheduler)
    one = _engine(tmp_path / "one.db", scheduler=scheduler)
    try:
        before = _state(many)
        assert before == _state(one)
        assert _admitted(many) == ["w-big", "w-final", "w1"]
        got = many.delete_many(WL, ITEMS)
        want = _one_by_one(one, ITEMS)
        assert [type(a) for a in got] == [dict, NotFound, dict, NotFound, dict]
        assert [type(a) for a in got] == [type(a) for a in want]
        assert [str(a) for a in got if isinstance(a, Exception)] == [
            str(a) for a in want if isinstance(a, Exception)
        ]
        assert _plain([a for a in got if isinstance(a, dict)]) == _plain(
            [a for a in want if isinstance(a, dict)]
        )
        assert got[2]["metadata"].get("deletionTimestamp")  # finalizer: Terminating, still there
        for engine in (many, one):  # Kueue requeues what waits 1 s after quota is freed
            engine.clock.t += 2  # type: ignore[attr-defined]
            engine.tick()
        after = _state(many)
        assert after == _state(one)
        # w-big and w1 freed 3 cpu: w-next (2) and w-last (1) are admitted, as one by one
        assert _admitted(many) == ["w-final", "w-last", "w-next"]
        assert {d["metadata"]["name"] for d in many.list_objects(WL)[0]} == {
            "j0",
            "w-final",
            "w-last",
            "w-next",
        }
    finally:
        many.close()
        one.close()


@pytest.mark.parametrize("many", [True, False])
def test_a_jobs_own_workload_deleted_is_made_anew_for_the_job(tmp_path: Path, many: bool) -> None:
    """Kueue's job reconciler (handleJobWithNoWorkload): the Job stays, its admitted Workload
    goes (its quota freed) and a new one with a new uid and creation time queues afresh and is
    admitted in the room; a finished Job gets none."""
    engine = _engine(tmp_path / "j.db", scheduler=False)
    try:
        engine.delete_many(WL, [("t", "w-big"), ("t", "w-next")])  # room for j0 and w-last
        engine.clock.t += 2  # type: ignore[attr-defined]
        engine.tick()
        assert _admitted(engine) == ["j0", "w-final", "w-last", "w1"]
        old = engine.get(WL, "t", "j0")
        engine.clock.t += 5  # type: ignore[attr-defined]
        items = [("t", "j0"), ("t", "w1")]
        got = engine.delete_many(WL, items) if many else [engine.delete(WL, *i) for i in items]
        assert all(isinstance(a, dict) for a in got)
        assert got[0]["metadata"]["uid"] == old["metadata"]["uid"]  # type: ignore[index]
        new = engine.get(WL, "t", "j0")
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert new["metadata"]["creationTimestamp"] > old["metadata"]["creationTimestamp"]
        assert engine.get(JOB, "t", "j0")["metadata"]["name"] == "j0"
        engine.clock.t += 2  # type: ignore[attr-defined]
        engine.tick()
        assert _admitted(engine) == ["j0", "w-final", "w-last"]  # the new one, in the room freed
        engine.finish("t", "j0")
        engine.delete(WL, "t", "j0")  # finished: the Job gets no new Workload
        with pytest.raises(NotFound):
            engine.get(WL, "t", "j0")
    finally:
        engine.close()


def test_the_deletes_are_stored_and_stay_deleted_after_a_restart(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "g.db", scheduler=True)
    got = engine.delete_many(WL, [("t", "w-big"), ("t", "w1"), ("t", "w-last")])
    jobs = engine.delete_many(JOB, [("t", "j0")])
    engine.close()
    assert all(isinstance(a, dict) for a in got + jobs)
    reopened = Engine(open_store(str(tmp_path / "g.db")), clock=Clock())
    try:
        names = {d["metadata"]["name"] for d in reopened.list_objects(WL)[0]}
        assert names == {"w-final", "w-next"}  # j0 went with its Job
        assert [d["metadata"]["name"] for d in reopened.list_objects(JOB)[0]] == []
    finally:
        reopened.close()


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


def _changes(writes: list[Write]) -> list[tuple[int, str, str]]:
    return [(w.change.rv, w.change.type, w.change.key.name) for w in writes
            if isinstance(w, AppendChange)]  # fmt: skip


def test_plain_deletes_share_a_commit_and_everything_is_submitted_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deletes around one with a finalizer: those before it are submitted before it is marked,
    those after it with the rest, so the store and the watches get resourceVersions in order."""
    engine = _engine(tmp_path / "g.db", scheduler=True)
    try:
        seen = _submits(engine, monkeypatch)
        got = engine.delete_many(WL, [("t", "w-big"), ("t", "w-final"), ("t", "w1"),
                                      ("t", "w-last")])  # fmt: skip
        assert all(isinstance(a, dict) for a in got)
        changes = [c for writes in seen for c in _changes(writes)]
        rvs = [rv for rv, _, _ in changes]
        assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
        deleted = [[n for _, t, n in _changes(w) if t == "DELETED"] for w in seen]
        assert [d for d in deleted if d] == [["w-big"], ["w1", "w-last"]]
        marked = [n for _, t, n in changes if t == "MODIFIED" and n == "w-final"]
        assert marked and changes.index(next(c for c in changes if c[2] == "w-final")) > 0
    finally:
        engine.close()
