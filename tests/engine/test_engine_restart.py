"""The engine shell in-process on SQLite: restart rebuilds the same admissions and pending order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import AlreadyExists, Invalid, NotFound
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _setup(e: Engine) -> None:
    e.create(BY_KIND["Namespace"], None, {"metadata": {"name": "ns"}})
    e.create(BY_KIND["ResourceFlavor"], None, {"metadata": {"name": "rf"}})
    e.create(BY_KIND["WorkloadPriorityClass"], None, {"metadata": {"name": "hi"}, "value": 10})
    e.create(
        BY_KIND["ClusterQueue"],
        None,
        {
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 2}]}
                        ],
                    }
                ],
            },
        },
    )
    e.create(
        BY_KIND["LocalQueue"], "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}
    )


def _wl(name: str, priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "lq",
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}],
    }  # fmt: skip
    if priority is not None:
        spec |= {"priorityClassName": "hi", "priority": priority}
    return {"metadata": {"name": name}, "spec": spec}


def _state(e: Engine) -> tuple[dict[str, Phase], list[str], dict[str, Any]]:
    """Phases, pending order in ``cq`` and admissions, from the engine's views."""
    view = e.view(workloads=True)
    pending = sorted(
        (w for w in view.workloads if w.position is not None), key=lambda w: w.position or 0
    )
    return (
        {w.key: w.phase for w in view.workloads},
        [w.key for w in pending],
        {w.key: w.admission for w in view.workloads},
    )


def test_restart_rebuilds_the_same_state(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db'}"
    clock = Clock()
    e = Engine(open_store(url), clock=clock)
    _setup(e)
    wl = BY_KIND["Workload"]
    for name in ("a", "b", "c", "d"):
        e.create(wl, "ns", _wl(name))
    e.create(wl, "ns", _wl("e", priority=10))  # pending, but first in line
    with pytest.raises(AlreadyExists):
        e.create(wl, "ns", _wl("a"))
    with pytest.raises(Invalid):
        e.create(wl, "ns", {"metadata": {"name": "x"}, "spec": {"podSets": "no"}})
    with pytest.raises(NotFound):
        e.get(wl, "ns", "zz")
    phases, order, admissions = _state(e)
    assert [k for k, p in phases.items() if p == Phase.ADMITTED] == ["ns/a", "ns/b"]
    assert order == ["ns/e", "ns/c", "ns/d"]
    e.close()
    e.store.close()

    e2 = Engine(open_store(url), clock=clock)
    assert _state(e2) == (phases, order, admissions)
    cq = e2.view().cluster_queue("cq")
    assert cq is not None and cq.usage == {("rf", "cpu"): 2000}
    e2.delete(wl, "ns", "a")
    e2.tick()  # a second later: Kueue's requeue batch brings the pending workloads back
    phases = {w.key: w.phase for w in e2.workloads()}
    assert phases["ns/e"] == Phase.ADMITTED  # priority first, after restart
    assert phases["ns/c"] == Phase.PENDING
    e2.close()
    e2.store.close()


def test_time_run_before_an_eviction_counts_after_a_restart(tmp_path: Path) -> None:
    """maximumExecutionTimeSeconds: the seconds a workload ran before it was preempted are kept
    in status.accumulatedPastExecutionTimeSeconds, so after a restart its deadline still counts
    them (it is deactivated that much earlier than a fresh admission would be)."""
    url = f"sqlite:///{tmp_path / 'db'}"
    clock = Clock()
    e = Engine(open_store(url), clock=clock)
    e.create(BY_KIND["Namespace"], None, {"metadata": {"name": "ns"}})
    e.create(BY_KIND["ResourceFlavor"], None, {"metadata": {"name": "rf"}})
    e.create(BY_KIND["WorkloadPriorityClass"], None, {"metadata": {"name": "hi"}, "value": 10})
    e.create(BY_KIND["ClusterQueue"], None, {"metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}})  # fmt: skip
    e.create(
        BY_KIND["LocalQueue"], "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}
    )
    wl = BY_KIND["Workload"]
    limited = _wl("limited")
    limited["spec"]["maximumExecutionTimeSeconds"] = 100
    e.create(wl, "ns", limited)
    clock.t += 20  # it runs 20 s (and the clock's own ticks) before it is preempted
    e.create(wl, "ns", _wl("urgent", priority=10))
    e.delete(wl, "ns", "urgent")
    e.tick()
    status = e.get(wl, "ns", "limited")["status"]
    past = status["accumulatedPastExecutionTimeSeconds"]
    assert 20 <= past < 30
    assert {w.key: w.phase for w in e.workloads()}["ns/limited"] == Phase.ADMITTED
    e.close()
    e.store.close()

    e2 = Engine(open_store(url), clock=clock)
    st = e2._cluster.workloads["ns/limited"]
    assert st.past_exec_seconds == past
    since = st.conditions["Admitted"].last_transition_time
    assert e2._cluster.next_wakeup() == since + 100 - past
    clock.t = since + 100 - past
    e2.tick()
    assert e2._cluster.workloads["ns/limited"].phase == Phase.INACTIVE
    e2.close()
    e2.store.close()


def test_a_jobs_time_limit_is_on_its_workload_and_deactivates_it(tmp_path: Path) -> None:
    """The kueue.x-k8s.io/max-exec-time-seconds label becomes the derived Workload's
    spec.maximumExecutionTimeSeconds (as Kueue's job framework writes it); when it runs out the
    Workload is deactivated and the waiting Job is admitted, stored, and so after a restart."""
    url = f"sqlite:///{tmp_path / 'db'}"
    clock = Clock()
    e = Engine(open_store(url), clock=clock)
    _setup(e)
    job = BY_KIND["Job"]

    def body(name: str, limit: str | None) -> dict[str, Any]:
        labels = {"kueue.x-k8s.io/queue-name": "lq"}
        if limit is not None:
            labels["kueue.x-k8s.io/max-exec-time-seconds"] = limit
        return {"metadata": {"name": name, "labels": labels}, "spec": {"parallelism": 2,
                "suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox",
                     "resources": {"requests": {"cpu": "1"}}}]}}}}  # fmt: skip

    e.create(job, "ns", body("limited", "60"))
    e.create(job, "ns", body("next", None))
    derived = e.get(BY_KIND["Workload"], "ns", "limited")
    assert derived["spec"]["maximumExecutionTimeSeconds"] == 60
    phases = {w.key: w.phase for w in e.workloads()}
    assert phases == {"ns/limited": Phase.ADMITTED, "ns/next": Phase.PENDING}
    clock.t += 60
    e.tick()
    e.tick()  # a second later: Kueue's requeue batch brings the waiting Job back
    phases = {w.key: w.phase for w in e.workloads()}
    assert phases == {"ns/limited": Phase.INACTIVE, "ns/next": Phase.ADMITTED}
    e.close()
    e.store.close()

    e2 = Engine(open_store(url), clock=clock)
    assert {w.key: w.phase for w in e2.workloads()} == phases
    e2.close()
    e2.store.close()
