"""The live feed's rows and patches: kept from the committed changes alone, they show what a
whole read shows, and a patch applied to the summary before gives the summary after.

The engine runs in-process; the feed is told each committed change from the store's change log
(as the watch hub would tell it), so every step is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.api.auth import Principal
from gpuaas.api.dashboard_patch import CHANGED, REMOVED, apply_patch, patch
from gpuaas.api.dashboard_rows import LiveRows
from gpuaas.api.dashboard_view import SummaryParts, UsageHistory, build_summary
from gpuaas.engine.engine import Engine
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

ADMIN = Principal("admin", True, frozenset())
TEAM = Principal("team", False, frozenset({"ns"}))
SHOWN = ("workloads", "localQueues", "totals", "clusterQueues", "resourceVersion", "gpus")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def workload(name: str, cpu: int = 1, gpus: int = 0) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": str(gpus)} if gpus else {"cpu": str(cpu)}
    containers = [{"name": "c", "resources": {"requests": requests}}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name},
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
    groups = [{"coveredResources": ["cpu", "nvidia.com/gpu"],
               "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 3},
                                                        {"name": "nvidia.com/gpu",
                                                         "nominalQuota": 2}]}]}]  # fmt: skip
    for ns in ("ns", "other"):
        e.create(BY_KIND["Namespace"], None, {"metadata": {"name": ns}})
    e.create(BY_KIND["ResourceFlavor"], None, {"metadata": {"name": "rf"}})
    spec = {"namespaceSelector": {}, "resourceGroups": groups}
    e.create(BY_KIND["ClusterQueue"], None, {"metadata": {"name": "cq"}, "spec": spec})
    for ns in ("ns", "other"):
        e.create(
            BY_KIND["LocalQueue"], ns, {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}
        )
    try:
        yield e
    finally:
        e.close()
        store.close()


def create(e: Engine, name: str, ns: str = "ns") -> None:
    e.create(BY_KIND["Workload"], ns, workload(name))


def delete(e: Engine, name: str) -> None:
    e.delete(BY_KIND["Workload"], "ns", name)


def evict(e: Engine, name: str) -> None:
    e.evict(f"ns/{name}", "Test", "evicted by the test", e.clock())
    e.tick()  # as an observer's hook would have it persisted by the settle it runs in


def stopped(e: Engine, name: str) -> None:
    e.confirm_stopped(f"ns/{name}", e.clock())
    e.tick()


def later(e: Engine) -> None:
    assert isinstance(e.clock, Clock)
    e.clock.t += 2.0  # past Kueue's requeue batch
    e.tick()


def create_all(e: Engine, *names: str) -> None:
    for name in names:
        create(e, name)


def both(*steps: Callable[[], None]) -> None:
    for step in steps:
        step()


STEPS: dict[str, Callable[[Engine], None]] = {
    "two more admitted, one pending": lambda e: create_all(e, "c", "d", "e"),
    "another namespace's": lambda e: create(e, "x", "other"),
    "one holding GPUs admitted, another waiting for them": lambda e: both(
        lambda: e.create(BY_KIND["Workload"], "ns", workload("g", gpus=2)),
        lambda: e.create(BY_KIND["Workload"], "ns", workload("h", gpus=1)),
    ),
    "the GPUs' holder evicted": lambda e: evict(e, "g"),
    "its GPUs freed, the waiting one admitted": lambda e: both(
        lambda: stopped(e, "g"), lambda: later(e)
    ),
    "an admitted one evicting": lambda e: evict(e, "a"),
    "its pods gone: pending again": lambda e: stopped(e, "a"),
    "an admitted one deleted, the next admitted": lambda e: both(
        lambda: delete(e, "b"), lambda: later(e)
    ),
    "a pending one deleted": lambda e: delete(e, "e"),
    "deleted and created again": lambda e: both(lambda: delete(e, "c"), lambda: create(e, "c")),
    "nothing": lambda e: None,
}


def told(e: Engine, live: LiveRows, rv: int, principal: Principal) -> int:
    """Tell ``live`` every change committed after ``rv`` that ``principal`` may see."""
    e.committer.submit([]).result(timeout=10)
    for c in e.store.changes_since(rv):
        if principal.admin or c.key.namespace in principal.namespaces or not c.key.namespace:
            live.changed(c)
        rv = c.rv
    return rv


@pytest.mark.parametrize("principal", [ADMIN, TEAM], ids=["admin", "namespace token"])
def test_rows_kept_from_changes_show_what_a_whole_read_shows(
    engine: Engine, principal: Principal
) -> None:
    history = UsageHistory()
    live = LiveRows(SummaryParts(engine, principal, history))
    create(engine, "a")
    create(engine, "b")
    rv = told(engine, live, 0, principal)
    shown, first = live.update()
    assert first is None and [w["key"] for w in shown["workloads"]] == ["ns/a", "ns/b"]
    for name, step in STEPS.items():
        step(engine)
        rv = told(engine, live, rv, principal)
        before = shown
        shown, p = live.update()
        whole = build_summary(engine, principal, history)
        for field in SHOWN:
            if field != "clusterQueues":  # (its sparklines are sampled at each call)
                assert shown[field] == whole[field], (name, field)
        assert p is not None, name
        patched = apply_patch(before, p)
        assert patched["workloads"] == shown["workloads"], name
        assert {k: v for k, v in patched.items() if k != "workloads"} == {
            k: v for k, v in shown.items() if k != "workloads"
        }
        old = {w["key"]: w for w in before["workloads"]}
        assert all(old.get(w["key"]) != w or w["key"] in p[REMOVED] for w in p[CHANGED]), name
    assert [w["key"] for w in shown["workloads"]][-1] == "ns/c"  # created again: goes last
    if not principal.admin:
        assert all(w["namespace"] == "ns" for w in shown["workloads"])


def test_a_patch_says_only_what_changed() -> None:
    before = {"resourceVersion": "1", "workloads": [{"key": "a", "state": "Pending"}]}
    after = {"resourceVersion": "2", "workloads": [{"key": "a", "state": "Admitted"}]}
    p = patch(after, [after["workloads"][0]], [])
    assert p == {"resourceVersion": "2", CHANGED: [{"key": "a", "state": "Admitted"}], REMOVED: []}
    assert apply_patch(before, p) == after
    gone = apply_patch(after, patch({"resourceVersion": "3", "workloads": []}, [], ["a"]))
    assert gone == {"resourceVersion": "3", "workloads": []}
