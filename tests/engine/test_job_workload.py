"""Writes to a job's own Workload, in-process on SQLite (engine.job_workload): ``spec.active``
set on it stops and restarts the job's admission, as ``kueuectl stop workload`` does in Kueue, and
the job's own updates leave it as set, across a restart too; any other change is refused with
the job named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

NS, RF, CQ, LQ, WL, JOB = (BY_KIND[k] for k in ("Namespace", "ResourceFlavor", "ClusterQueue",
                                               "LocalQueue", "Workload", "Job"))  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _job(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq",
                                                  **(labels or {})}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1"}}}]}}}}  # fmt: skip


def _open(path: Path) -> Engine:
    return Engine(open_store(f"sqlite:///{path}"), clock=Clock())


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = _open(tmp_path / "db")
    e.create(NS, None, {"metadata": {"name": "t"}})
    e.create(RF, None, {"metadata": {"name": "rf"}})
    e.create(CQ, None, {"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
             "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}})  # fmt: skip
    e.create(LQ, "t", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    e.create(JOB, "t", _job("j"))
    try:
        yield e
    finally:
        e.close()


def _later(e: Engine, seconds: float = 2.0) -> None:
    e.clock.t += seconds  # type: ignore[attr-defined]
    e.tick()


def test_spec_active_on_a_jobs_workload_stops_and_restarts_it(engine: Engine) -> None:
    assert engine.workload("t/j").phase == Phase.ADMITTED
    uid = engine.get(WL, "t", "j")["metadata"]["uid"]
    engine.create(JOB, "t", _job("waiting"))  # waits for j's cpu
    doc = engine.patch(WL, "t", "j", {"spec": {"active": False}})
    assert doc["spec"]["active"] is False and doc["metadata"]["uid"] == uid
    _later(engine)
    assert engine.workload("t/j").phase == Phase.INACTIVE
    assert engine.workload("t/waiting").phase == Phase.ADMITTED  # the quota j gave back
    # the job's own update (a label) leaves its Workload inactive
    engine.replace(JOB, "t", "j", {**engine.get(JOB, "t", "j"), "metadata": {
        **engine.get(JOB, "t", "j")["metadata"], "labels": {
            "kueue.x-k8s.io/queue-name": "lq", "team": "a"}}})  # fmt: skip
    _later(engine)
    assert engine.workload("t/j").phase == Phase.INACTIVE
    assert engine.get(WL, "t", "j")["spec"]["active"] is False
    engine.patch(WL, "t", "j", {"spec": {"active": True}})
    _later(engine)
    assert engine.workload("t/j").phase == Phase.PENDING  # queued again, behind nothing
    engine.delete(JOB, "t", "waiting")
    _later(engine)
    assert engine.workload("t/j").phase == Phase.ADMITTED


def test_a_jobs_workload_deactivated_stays_so_after_a_restart(tmp_path: Path) -> None:
    e = _open(tmp_path / "r.db")
    e.create(NS, None, {"metadata": {"name": "t"}})
    e.create(LQ, "t", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    e.create(JOB, "t", _job("j"))
    e.patch(WL, "t", "j", {"spec": {"active": False}})
    e.close()
    again = _open(tmp_path / "r.db")
    try:
        assert again.workload("t/j").phase == Phase.INACTIVE
        assert again.get(WL, "t", "j")["spec"]["active"] is False
    finally:
        again.close()


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"queueName": "other"}},
        {
            "spec": {
                "podSets": [
                    {
                        "name": "main",
                        "count": 2,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "c", "resources": {"requests": {"cpu": "1"}}}
                                ]
                            }
                        },
                    }
                ]
            }
        },
    ],
)
def test_other_changes_to_a_jobs_workload_are_refused_naming_the_job(
    engine: Engine, patch: dict[str, Any]
) -> None:
    before = engine.get(WL, "t", "j")
    with pytest.raises(Invalid, match=r"Workload t/j is owned by its Job; only spec.active"):
        engine.patch(WL, "t", "j", patch)
    assert engine.get(WL, "t", "j") == before
    assert engine.workload("t/j").phase == Phase.ADMITTED


def test_labels_on_a_jobs_workload_change_without_touching_its_admission(engine: Engine) -> None:
    doc = engine.patch(WL, "t", "j", {"metadata": {"labels": {"note": "x"}}})
    assert doc["metadata"]["labels"]["note"] == "x"
    assert engine.workload("t/j").phase == Phase.ADMITTED
