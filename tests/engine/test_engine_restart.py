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
    phases = {k: st.phase for k, st in e.cluster.workloads.items()}
    order = [w.key for w in e.cluster.pending_in("cq")]
    admissions = {k: st.admission for k, st in e.cluster.workloads.items()}
    assert [k for k, p in phases.items() if p == Phase.ADMITTED] == ["ns/a", "ns/b"]
    assert order == ["ns/e", "ns/c", "ns/d"]
    e.close()
    e.store.close()

    e2 = Engine(open_store(url), clock=clock)
    assert {k: st.phase for k, st in e2.cluster.workloads.items()} == phases
    assert [w.key for w in e2.cluster.pending_in("cq")] == order
    assert {k: st.admission for k, st in e2.cluster.workloads.items()} == admissions
    assert e2.cluster.cluster_queue_usage("cq") == {("rf", "cpu"): 2000}
    e2.delete(wl, "ns", "a")
    assert e2.cluster.workloads["ns/e"].phase == Phase.ADMITTED  # priority first, after restart
    assert e2.cluster.workloads["ns/c"].phase == Phase.PENDING
    e2.close()
    e2.store.close()
