"""A watch of Jobs hears what Kubernetes' job controller would write: the engine with the local
runtime attached (real processes, SQLite), its change feed subscribed to as the API's watch is.

A Job's status is made when read; ``engine.job_watch`` stores it again, under a new
resourceVersion, whenever the workload or its pods change it, so ``kubectl get jobs -w`` and a
MultiKueue manager see a Job wait suspended, resume, run and complete.
"""

from __future__ import annotations

from typing import Any

from test_runtime_bridge import Node, job

from gpuaas.store import Change
from gpuaas.vocab.kinds import BY_KIND
from gpuaas.vocab.multikueue import MANAGED_BY

JOB = BY_KIND["Job"]


class JobChanges:
    """Every change to a Job the engine publishes, as a watch subscriber gets them."""

    def __init__(self, node: Node) -> None:
        self.seen: list[Change] = []
        self.sub = node.engine.hub.subscribe(self.seen.append, lambda c: c.key.gk == JOB.gk)

    def of(self, name: str) -> list[Change]:
        return [c for c in list(self.seen) if c.key.name == name]

    def last_status(self, name: str) -> dict[str, Any] | None:
        seen = self.of(name)
        return dict(seen[-1].doc.get("status") or {}) if seen else None

    def after_settles(self, node: Node, times: int) -> None:
        """Let the engine tick and poll its runtime ``times`` times, then wait for what that
        published: deliveries come in order, on the watch hub's thread, so once a new Job's
        ADDED has come, every change before it has."""
        for _ in range(times):
            node.engine.tick()
            node.engine.poll_observers()
        node.engine.create(JOB, "ns", job("sentinel", "sleep 30", cpu="0"))
        node.until(lambda: self.of("sentinel"))


def _cond(status: dict[str, Any] | None, type_: str) -> str | None:
    for c in (status or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def test_a_watch_hears_a_job_resume_run_and_complete(node: Node) -> None:
    changes = JobChanges(node)
    node.engine.create(JOB, "ns", job("j", "sleep 0.3"))
    node.until(lambda: _cond(changes.last_status("j"), "Complete") == "True")
    seen = changes.of("j")
    assert [c.type for c in seen[:1]] == ["ADDED"] and seen[0].doc.get("status") is None
    modified = [c for c in seen if c.type == "MODIFIED"]
    statuses = [c.doc["status"] for c in modified]
    running = [s for s in statuses if s.get("active") == 1 and s.get("ready") == 1]
    assert running and _cond(running[0], "Suspended") == "False" and running[0].get("startTime")
    last = statuses[-1]
    assert _cond(last, "Complete") == "True" and last.get("succeeded") == 1
    assert last.get("active") == 0 and last.get("completionTime")
    rvs = [int(c.doc["metadata"]["resourceVersion"]) for c in seen]
    assert rvs == sorted(set(rvs))  # a new resourceVersion for each
    # What the watch showed last is what a read shows, with the same resourceVersion.
    now = node.engine.get(JOB, "ns", "j")
    assert now["status"] == last and now["metadata"]["resourceVersion"] == str(rvs[-1])


def test_a_job_waiting_for_quota_is_seen_suspended_then_resumed(node: Node) -> None:
    changes = JobChanges(node)
    node.engine.create(JOB, "ns", job("big", "sleep 30", cpu="4"))
    node.until(lambda: node.pods("ns/big"))
    node.engine.create(JOB, "ns", job("next", "sleep 30", cpu="1"))
    waiting = node.until(lambda: changes.last_status("next"))
    assert _cond(waiting, "Suspended") == "True" and waiting["active"] == 0
    node.engine.delete(JOB, "ns", "big")
    node.until(lambda: (changes.last_status("next") or {}).get("ready") == 1)
    resumed = changes.last_status("next") or {}
    assert _cond(resumed, "Suspended") == "False" and resumed["active"] == 1


def test_no_change_is_published_when_nothing_changed(node: Node) -> None:
    before = JobChanges(node)
    node.engine.create(JOB, "ns", job("quiet", "sleep 30"))
    node.until(lambda: (before.last_status("quiet") or {}).get("ready"))
    changes = JobChanges(node)
    changes.after_settles(node, 5)
    assert changes.of("quiet") == []


def test_after_a_restart_an_unchanged_job_is_not_published_again(node: Node) -> None:
    first = JobChanges(node)
    node.engine.create(JOB, "ns", job("done", "true"))
    node.until(lambda: _cond(first.last_status("done"), "Complete") == "True")
    before = node.engine.get(JOB, "ns", "done")
    node.restart()
    changes = JobChanges(node)
    changes.after_settles(node, 3)
    assert changes.of("done") == []
    after = node.engine.get(JOB, "ns", "done")
    assert after["status"] == before["status"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_a_multikueue_managers_job_keeps_its_stored_status(node: Node) -> None:
    """Its status is its worker's, written by the controller that mirrors it: never rendered."""
    doc = job("remote", "sleep 30")
    doc["spec"]["managedBy"] = MANAGED_BY
    changes = JobChanges(node)
    node.engine.create(JOB, "ns", doc)
    changes.after_settles(node, 3)
    assert [c.type for c in changes.of("remote")] == ["ADDED"]
    assert node.engine.get(JOB, "ns", "remote").get("status") is None
