"""The engine with the local runtime attached, in-process on SQLite, with real processes.

Admitted Jobs really run (logs, GPU pinning, env); a preemption stops the victim's processes and
the preemptor starts only once they are gone (quota waits for the stop); exits finish workloads;
deletion stops pods; a restart re-adopts live pods and requeues workloads whose pods died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.inventory import detect_node, parse_fake_gpus
from gpuaas.runtimes import LocalRuntime
from gpuaas.runtimes.podstate import volatile_records
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

JOB = BY_KIND["Job"]
MK_ORIGIN = "kueue.x-k8s.io/multikueue-origin"


class Node:
    """One engine + bridge + runtime over a data dir; ``restart`` drops them without stopping."""

    def __init__(self, root: Path, gpus: str = "4") -> None:
        self.root, self.gpus = root, gpus
        self.engine: Engine
        self.bridge: RuntimeBridge
        self.adopted: list[str] = []
        self._open()

    def _open(self) -> None:
        self.store = open_store(f"sqlite:///{self.root / 'gpuaas.db'}")
        self.engine = Engine(self.store, live_runtime=True)
        self.bridge = RuntimeBridge(LocalRuntime(self.root / "runtime", parse_fake_gpus(self.gpus)))
        self.adopted = self.bridge.attach(self.engine)

    def crash(self) -> None:
        """The server dies: its pods keep running, nobody watches them. Its pod launcher reads
        the end of its input and exits, as when the server's process is gone."""
        launcher = getattr(self.bridge.runtime, "_launcher", None)
        if launcher is not None:
            launcher.close()
        self.engine.close()
        self.store.close()

    def restart(self) -> None:
        self.crash()
        self._open()

    def close(self) -> None:
        self.bridge.shutdown(grace_seconds=0)
        self.engine.close()
        self.store.close()

    def phase(self, key: str) -> Phase | None:
        st = self.engine.workload(key)
        return None if st is None else st.phase

    def pods(self, key: str) -> list[Any]:
        run = self.bridge.runs().get(key)
        return list(run.pods) if run else []

    def until(self, what: Callable[[], object], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.engine.poll_observers()
            got = what()
            if got:
                return got
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s; events: {self.reasons()}")

    def reasons(self, key: str | None = None) -> list[str]:
        self.engine.committer.submit([]).result(timeout=10)  # what was decided is stored
        return [
            e.reason for e in self.engine.events() if key is None or e.object == f"Workload {key}"
        ]

    def logs(self, key: str) -> list[str]:
        return list(self.bridge.logs(key, None, follow=False))


def _setup(e: Engine) -> None:
    e.create(BY_KIND["Namespace"], None, {"metadata": {"name": "ns"}})
    e.create(BY_KIND["ResourceFlavor"], None, {"metadata": {"name": "rf"}})
    for name, value in (("low", 10), ("high", 1000)):
        e.create(
            BY_KIND["WorkloadPriorityClass"], None, {"metadata": {"name": name}, "value": value}
        )
    quotas = [{"name": "cpu", "nominalQuota": 4}, {"name": "nvidia.com/gpu", "nominalQuota": 4}]
    e.create(
        BY_KIND["ClusterQueue"],
        None,
        {
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        "flavors": [{"name": "rf", "resources": quotas}],
                    }
                ],
            },
        },
    )
    e.create(
        BY_KIND["LocalQueue"], "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}
    )


def job(
    name: str,
    script: str,
    *,
    gpus: int = 0,
    cpu: str = "1",
    priority: str = "low",
    grace: float = 1,
    backoff: int | None = None,
) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": grace,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", script],
                        "resources": {"requests": requests},
                    }
                ],
            }
        }
    }
    if backoff is not None:
        spec["backoffLimit"] = backoff
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/priority-class": priority,
            },
        },
        "spec": spec,
    }


ECHO_ENV = 'echo "hi $GPUAAS_WORKLOAD gpus=$CUDA_VISIBLE_DEVICES"; sleep 30'


def test_admitted_job_runs_pinned_with_logs(node: Node) -> None:
    node.engine.create(JOB, "ns", job("a", ECHO_ENV, gpus=2))
    assert node.phase("ns/a") == Phase.ADMITTED
    pods = node.until(lambda: node.pods("ns/a"))
    assert pods[0].gpus == (0, 1) and psutil.pid_exists(pods[0].pid)
    assert node.until(lambda: node.logs("ns/a")) == ["hi ns/a gpus=0,1"]
    assert "Started" in node.reasons("ns/a")


def _bare_workload(name: str, labels: dict[str, str]) -> dict[str, Any]:
    containers = [{"name": "main", "command": ["sh", "-c", ECHO_ENV],
                   "resources": {"requests": {"cpu": "1"}}}]  # fmt: skip
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": containers}}}]},
    }  # fmt: skip


def test_a_bare_workload_runs_its_pods_and_a_multikueue_copy_waits_for_its_job(
    node: Node,
) -> None:
    """A Workload with a command and no job runs here; a MultiKueue worker's copy (the origin
    label) runs nothing until its Job comes, then runs that Job's pods."""
    workload = BY_KIND["Workload"]
    node.engine.create(workload, "ns", _bare_workload("bare", {}))
    node.engine.create(workload, "ns", _bare_workload("copy", {MK_ORIGIN: "hub"}))
    assert node.phase("ns/bare") == Phase.ADMITTED and node.phase("ns/copy") == Phase.ADMITTED
    assert node.until(lambda: node.logs("ns/bare")) == ["hi ns/bare gpus="]
    node.engine.tick()
    assert node.pods("ns/copy") == []
    prebuilt = job("copy", 'echo "from the job"; sleep 30')
    prebuilt["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "copy"
    node.engine.create(JOB, "ns", prebuilt)
    assert node.until(lambda: node.logs("ns/copy")) == ["from the job"]


def test_preemption_stops_the_victim_before_the_preemptor_starts(node: Node) -> None:
    # The victim takes 0.4 s to exit after SIGTERM: the quota must stay held until then.
    victim_script = 'trap "echo term; sleep 0.4; exit 0" TERM; echo hi; sleep 30 & wait'
    node.engine.create(JOB, "ns", job("dev", victim_script, gpus=4, cpu="3"))
    victim = node.until(lambda: node.pods("ns/dev"))[0]
    node.until(lambda: node.logs("ns/dev") == ["hi"])

    node.engine.create(JOB, "ns", job("prod", ECHO_ENV, gpus=2, cpu="2", priority="high"))
    assert node.phase("ns/dev") == Phase.EVICTING
    assert node.phase("ns/prod") == Phase.PENDING  # quota not released while dev's pods live
    assert psutil.pid_exists(victim.pid)
    prod = node.until(lambda: node.pods("ns/prod"))[0]
    assert not psutil.pid_exists(victim.pid)
    assert node.logs("ns/dev") == ["hi", "term"]
    assert node.phase("ns/dev") == Phase.PENDING and node.phase("ns/prod") == Phase.ADMITTED
    assert prod.gpus == (0, 1)
    dev_reasons = node.reasons("ns/dev")
    assert dev_reasons.index("Preempted") < dev_reasons.index("Stopped")
    assert dev_reasons.index("Stopped") < dev_reasons.index("Requeued")
    node.reasons()
    trail = [(e.object, e.reason) for e in node.engine.events()]
    assert trail.index(("Workload ns/dev", "Stopped")) < trail.index(
        ("Workload ns/prod", "Started")
    )


@pytest.mark.parametrize(
    ("script", "backoff", "outcome", "runs"),
    [
        ("echo ok", None, "Succeeded", 1),
        ("echo try; exit 3", 1, "Failed", 2),
        ("echo try; exit 3", 0, "Failed", 1),
    ],
    ids=["exit 0 succeeds", "exit 3 retried once then fails", "backoffLimit 0"],
)
def test_exits_finish_the_workload(
    node: Node, script: str, backoff: int | None, outcome: str, runs: int
) -> None:
    node.engine.create(JOB, "ns", job("j", script, backoff=backoff))
    node.until(lambda: node.phase("ns/j") == Phase.FINISHED)
    st = node.engine.workload("ns/j")
    assert st is not None and st.conditions["Finished"].reason == outcome
    cq = node.engine.view().cluster_queue("cq")
    assert cq is not None and cq.usage == {}
    assert len(node.logs("ns/j")) == runs


def test_finishing_admits_the_next_workload(node: Node) -> None:
    node.engine.create(JOB, "ns", job("first", "sleep 0.3", gpus=4))
    node.engine.create(JOB, "ns", job("second", "echo second; sleep 30", gpus=4))
    assert node.phase("ns/second") == Phase.PENDING
    node.until(lambda: node.pods("ns/second"))
    assert node.phase("ns/first") == Phase.FINISHED
    assert node.until(lambda: node.logs("ns/second")) == ["second"]


def test_deleting_a_job_stops_its_pods_and_forgets_them(node: Node) -> None:
    node.engine.create(JOB, "ns", job("a", "sleep 30"))
    pid = node.until(lambda: node.pods("ns/a"))[0].pid
    node.engine.delete(JOB, "ns", "a")
    node.until(lambda: not node.pods("ns/a"))
    assert not psutil.pid_exists(pid)
    node.until(lambda: not (node.root / "runtime" / "workloads" / "ns" / "a").exists(), 2)


def test_pods_wait_for_gpus_the_node_lacks(tmp_path: Path) -> None:
    n = Node(tmp_path, gpus="1")
    try:
        _setup(n.engine)
        n.engine.create(JOB, "ns", job("big", "sleep 30", gpus=2))
        n.until(lambda: "FailedScheduling" in n.reasons("ns/big"))
        assert n.phase("ns/big") == Phase.ADMITTED and n.pods("ns/big") == []
    finally:
        n.close()


def test_restart_readopts_live_pods_and_requeues_lost_ones(node: Node) -> None:
    script = "echo run $GPUAAS_RESTART_COUNT retry $GPUAAS_POD_RETRY; sleep 30"
    for name in ("live", "killed", "lost"):
        node.engine.create(JOB, "ns", job(name, script))
    pods = {k: node.until(lambda k=k: node.pods(f"ns/{k}"))[0] for k in ("live", "killed", "lost")}
    node.until(lambda: node.logs("ns/lost") == ["run 0 retry 0"])
    node.crash()
    # While no server runs, two pods die; the records of one are lost with it.
    for name in ("killed", "lost"):
        os.killpg(pods[name].pid, signal.SIGKILL)
        with contextlib.suppress(psutil.NoSuchProcess):  # reaped by its launcher meanwhile
            psutil.Process(pods[name].pid).wait(5)
    records = volatile_records(node.root / "runtime") / "workloads" / "ns" / "lost"
    assert list(records.rglob("*.json")), "the pod records are not where the runtime keeps them"
    for path in sorted(records.rglob("*.json")):
        path.unlink()
    node._open()
    assert node.adopted == ["ns/killed", "ns/live"]
    assert node.pods("ns/live")[0].pid == pods["live"].pid  # the same process, not a second one
    assert node.phase("ns/live") == Phase.ADMITTED
    # killed: a pod failure, retried within the Job's backoffLimit, as Kubernetes would
    node.until(lambda: node.logs("ns/killed") == ["run 0 retry 0", "run 0 retry 1"])
    assert "PodFailed" in node.reasons("ns/killed")
    # lost: nothing knows its pods any more, so the workload is requeued and runs anew
    assert {"EvictedDueToPodsLost", "Requeued"} <= set(node.reasons("ns/lost"))
    new = node.until(lambda: node.pods("ns/lost"))[0]
    assert new.pid != pods["lost"].pid and node.phase("ns/lost") == Phase.ADMITTED
    # every process of the pod is the same leader's descendant (a leader forked by the pod
    # launcher has the launcher's environment, its command the pod's)
    running = [p for p in psutil.process_iter(["environ"]) if _workload(p) == "ns/live"]
    leader = pods["live"].pid
    assert {p.pid for p in running} - {leader} == {c.pid for c in _kids(leader)} != set()


def _kids(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _workload(p: psutil.Process) -> str | None:
    try:
        env = p.info.get("environ") or {}
    except psutil.Error:
        return None
    return env.get("GPUAAS_WORKLOAD")


def test_restart_stops_pods_of_workloads_that_are_gone(node: Node) -> None:
    node.engine.create(JOB, "ns", job("a", "sleep 30"))
    pid = node.until(lambda: node.pods("ns/a"))[0].pid
    node.crash()
    store = open_store(f"sqlite:///{node.root / 'gpuaas.db'}")
    engine = Engine(store)  # an admission-only server deletes the job meanwhile
    engine.delete(JOB, "ns", "a")
    engine.close()
    store.close()
    node._open()
    assert node.adopted == ["ns/a"]
    node.until(lambda: not node.pods("ns/a"))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_attach_needs_a_live_runtime_engine(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    engine = Engine(store)
    runtime = LocalRuntime(tmp_path / "rt")
    try:
        with pytest.raises(ValueError, match="live_runtime"):
            RuntimeBridge(runtime).attach(engine)
    finally:
        runtime.shutdown(grace_seconds=0)  # its pod launcher goes with it, not at some GC
        engine.close()
        store.close()


def test_min_runtime_protects_a_young_workload(node: Node) -> None:
    cq = node.engine.get(BY_KIND["ClusterQueue"], None, "cq")
    cq["metadata"]["annotations"] = {"gpuaas.dev/min-runtime-seconds": "1"}
    node.engine.replace(BY_KIND["ClusterQueue"], None, "cq", cq)
    node.engine.create(JOB, "ns", job("young", "sleep 30", gpus=4))
    node.until(lambda: node.pods("ns/young"))
    node.engine.create(JOB, "ns", job("prod", "sleep 30", gpus=4, priority="high"))
    assert node.phase("ns/young") == Phase.ADMITTED  # too young to be preempted
    assert node.phase("ns/prod") == Phase.PENDING

    def tick_until_preempted() -> bool:
        node.engine.tick()  # the once-a-second scheduling pass retries the pending preemptor
        return node.phase("ns/young") != Phase.ADMITTED

    node.until(tick_until_preempted, timeout=5)
    node.until(lambda: node.pods("ns/prod"))


def test_flavor_for_another_node_keeps_pods_pending(tmp_path: Path) -> None:
    """A flavor whose nodeLabels this node lacks: admitted (quota is quota), but no pod runs."""
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    engine = Engine(store, live_runtime=True)
    node = detect_node("2", None)
    bridge = RuntimeBridge(LocalRuntime(tmp_path / "runtime", node.gpus), node)
    bridge.attach(engine)
    try:
        _setup(engine)
        rf = engine.get(BY_KIND["ResourceFlavor"], None, "rf")
        rf["spec"] = {"nodeLabels": {"node.kubernetes.io/instance-type": "g6.12xlarge"}}
        engine.replace(BY_KIND["ResourceFlavor"], None, "rf", rf)
        engine.create(JOB, "ns", job("elsewhere", "sleep 30"))
        engine.poll_observers()
        w = engine.workload("ns/elsewhere")
        assert w is not None and w.phase == Phase.ADMITTED
        assert "ns/elsewhere" not in bridge.runs()
        engine.committer.submit([]).result(timeout=10)
        messages = [e.message for e in engine.events() if e.reason == "FailedScheduling"]
        assert any("instance-type=g6.12xlarge" in m for m in messages), messages
    finally:
        bridge.shutdown(grace_seconds=0)
        engine.close()
        store.close()


def rayjob(name: str, script: str, deadline: int | None = None) -> dict[str, Any]:
    """A RayJob whose head and submitter have commands (kept as they are, no Ray started)."""

    def template(pod: str) -> dict[str, Any]:
        container = {"name": pod, "image": "rayproject/ray", "command": ["sh", "-c", script],
                     "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
        return {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}

    spec: dict[str, Any] = {
        "entrypoint": "python job.py",
        "shutdownAfterJobFinishes": True,
        "submitterPodTemplate": template("submitter"),
        "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": template("head")}},
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    meta = {"name": name, "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}


RAYJOB = BY_KIND["RayJob"]


def test_a_rayjob_past_its_active_deadline_fails_and_its_pods_stop(node: Node) -> None:
    """KubeRay's spec.activeDeadlineSeconds: once the RayJob has run that long since it was
    admitted, it fails (DeadlineExceeded), its pods are stopped and its quota released; a
    RayJob with no deadline runs on."""
    node.engine.create(RAYJOB, "ns", rayjob("late", "echo up; sleep 60", deadline=2))
    node.engine.create(RAYJOB, "ns", rayjob("free", "echo up; sleep 60"))
    assert node.engine.get(RAYJOB, "ns", "late")["status"]["jobDeploymentStatus"] == "Initializing"
    pids = [p.pid for p in node.until(lambda: node.pods("ns/late"))]
    node.until(lambda: node.phase("ns/late") == Phase.FINISHED, timeout=30)
    assert "DeadlineExceeded" in node.reasons("ns/late")
    status = node.engine.get(RAYJOB, "ns", "late")["status"]
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", "DeadlineExceeded")
    node.until(lambda: not node.pods("ns/late") and not any(map(psutil.pid_exists, pids)))
    assert node.phase("ns/free") == Phase.ADMITTED and node.pods("ns/free")


def test_a_rayjob_deadline_must_be_a_positive_whole_number(node: Node) -> None:
    with pytest.raises(
        Invalid, match=r"RayJob ns/bad: spec\.activeDeadlineSeconds: must be greater"
    ):
        node.engine.create(RAYJOB, "ns", rayjob("bad", "sleep 1", deadline=0))
