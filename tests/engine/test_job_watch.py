"""A watch of Jobs hears what Kubernetes' job controller would write: the engine with the local
runtime attached (real processes, SQLite), its change feed subscribed to as the API's watch is.

A Job's status is made when read; ``engine.job_watch`` stores it again, under a new
resourceVersion, whenever the workload or its pods change it, so ``kubectl get jobs -w`` and a
MultiKueue manager see a Job wait suspended, resume, run and complete.
"""

from __future__ import annotations

import json
import time
from typing import Any

from test_runtime_bridge import Node, job

from gpuaas.engine.runtime_bridge import RAY_RECORDS_SECONDS
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


RAYCLUSTER = BY_KIND["RayCluster"]


def raycluster(name: str, managed_by: str | None = None) -> dict[str, Any]:
    """A RayCluster whose head has a command (kept as it is: no Ray is started)."""
    container = {"name": "head", "image": "rayproject/ray", "command": ["sleep", "60"],
                 "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}
    spec: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": template}}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    meta = {"name": name, "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def test_a_watch_hears_a_raycluster_turn_ready_when_its_head_records_it(node: Node) -> None:
    """The head's Ray node record (its address, ports and readiness, which ``ray_pod`` writes
    once ``ray start`` is done) comes after its pod started, with no pod event: the runtime
    bridge reads the records of running Ray clusters and a change renders the status again."""
    seen: list[Change] = []
    node.engine.hub.subscribe(seen.append, lambda c: c.key.gk == RAYCLUSTER.gk)

    def last() -> dict[str, Any]:
        mine = [c for c in list(seen) if c.key.name == "rc"]
        return dict(mine[-1].doc.get("status") or {}) if mine else {}

    node.engine.create(RAYCLUSTER, "ns", raycluster("rc"))
    head = node.until(lambda: [p for p in node.pods("ns/rc") if p.phase == "Running"])[0]
    node.until(lambda: last().get("state") == "")  # admitted, not suspended, not ready
    published = len(seen)
    for _ in range(3):  # the records are read every half second: nothing new to tell
        node.engine.tick()
        node.engine.poll_observers()
        time.sleep(RAY_RECORDS_SECONDS)
    assert last().get("state") == "" and len(seen) == published
    record = {"pod": head.name, "run": "r1", "ready": True, "nodeIP": "127.0.0.1",
              "ports": {"gcs": 6379, "client": 10001, "dashboard": 8265}}  # fmt: skip
    records = node.bridge.runtime.workload_dir("ns/rc") / "ray"
    records.mkdir(parents=True, exist_ok=True)
    (records / "head.json").write_text(json.dumps(record))
    ready = node.until(lambda: last() if last().get("state") == "ready" else None)
    assert ready["endpoints"] == {"gcs-server": "6379", "client": "10001", "dashboard": "8265"}
    assert ready["head"] == {"podIP": "127.0.0.1", "podName": head.name}
    assert node.engine.get(RAYCLUSTER, "ns", "rc")["status"] == ready


def test_a_multikueue_managers_raycluster_keeps_its_stored_status(node: Node) -> None:
    """As a batch Job's: a dispatched RayCluster's status is its worker's, mirrored."""
    seen: list[Change] = []
    node.engine.hub.subscribe(seen.append, lambda c: c.key.gk == RAYCLUSTER.gk)
    node.engine.create(RAYCLUSTER, "ns", raycluster("remote-rc", managed_by=MANAGED_BY))
    JobChanges(node).after_settles(node, 3)
    assert [c.type for c in seen if c.key.name == "remote-rc"] == ["ADDED"]
    assert node.engine.get(RAYCLUSTER, "ns", "remote-rc").get("status") is None
    assert not node.pods("ns/remote-rc")
