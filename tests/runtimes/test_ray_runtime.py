"""Many nodes: admitted workloads run on a three-node Ray cluster, flavors matched to node labels.

A Ray cluster on this machine (``testing.ray_cluster``): a head with no GPU and two workers
labelled as seed 001's node types, ``g6.4xlarge`` with 1 GPU and ``g6.12xlarge`` with 4, each on
its own ports, with Ray's health checks shortened so a dead node is seen in seconds. A real
``gpuaas server --runtime ray --ray-address ...`` runs seed 001's queue; both node types are busy
at once, each pod on the node its flavor names with ``GPUAAS_NODE`` and ``CUDA_VISIBLE_DEVICES``
from Ray; a prod Job preempts a dev Job on the 4-GPU node (SIGTERM, then the prod pod starts on the
freed GPUs); the server is killed and its successor re-adopts the pods; a worker's raylet is killed
and its pod fails and waits, Pending, for a node that can take it. The runtime alone shows
all-or-nothing placement and the backoffLimit. A RayCluster becomes a Ray cluster of its own whose
head and worker are pods on two nodes, and a RayJob's submitter runs its entrypoint there, then
ends the cluster. Needs the ``ray`` extra (Ray 2.49 or later).
"""

from __future__ import annotations

import copy
import importlib.util
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from ray_manifests import JOB_SCRIPT, TASKS_ON_EVERY_NODE, raycluster
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.main import build_app
from gpuaas.cli.node import table
from gpuaas.runtimes.base import EventKind, PodSpec
from gpuaas.testing.ray_cluster import MARKER_ENV, LocalRayCluster, RayNodeSpec

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

SEED = Path(__file__).resolve().parents[2] / "examples" / "001-gpu-pool"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"
TYPE = "node.kubernetes.io/instance-type"
NS = "private-ai"
L4_1_IP, L4_4_IP = "127.0.0.2", "127.0.0.3"  # the GPU nodes' IPs: "other machines"
POD_SCRIPT = (
    'echo "node=$GPUAAS_NODE cuda=$CUDA_VISIBLE_DEVICES pod=$GPUAAS_POD '
    'restart=$GPUAAS_RESTART_COUNT"; trap "echo term; exit 0" TERM; sleep 300 & wait'
)


def _ray_installed() -> bool:
    if importlib.util.find_spec("ray") is None:
        return False
    import ray

    major, minor = (int(x) for x in ray.__version__.split(".")[:2])
    return (major, minor) >= (2, 49)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRayCluster | None]:
    """Seed 001's two node types and a head, started once for this module. The two GPU nodes
    listen on loopback aliases of their own (127.0.0.2, 127.0.0.3), as other machines would
    have IPs of their own: a RayCluster's pods must find each other at those IPs."""
    if not _ray_installed():
        yield None  # _needs_ray skips (or fails) each test
        return
    nodes = [
        RayNodeSpec("head", {}, num_gpus=0, num_cpus=1),
        RayNodeSpec("l4-1", {TYPE: "g6.4xlarge"}, num_gpus=1, num_cpus=2, node_ip=L4_1_IP),
        RayNodeSpec("l4-4", {TYPE: "g6.12xlarge"}, num_gpus=4, num_cpus=2, node_ip=L4_4_IP),
    ]
    ray_cluster = LocalRayCluster(tmp_path_factory.mktemp("ray"), nodes)
    try:
        yield ray_cluster.start()
    finally:
        ray_cluster.stop()
        left = ray_cluster.processes()
        assert not left, f"Ray processes left running: {[p.cmdline() for p in left]}"


@pytest.fixture(autouse=True)
def _needs_ray(require_service: Callable[[str, bool, str], None]) -> None:
    require_service("Ray 2.49+", _ray_installed(), "install the extra: pip install 'gpuaas[ray]'")


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """Replaces the folder's check: the Ray nodes are children of this test process while the
    module's cluster lives; the cluster's own stop removes them and every pod it ran."""
    yield


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def _setup() -> list[dict[str, Any]]:
    """Seed 001's namespace, flavors, queues; the ClusterQueue may preempt lower priorities."""
    docs = copy.deepcopy(_docs("setup.yaml"))
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            doc["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    for name, value in (("dev", 100), ("prod", 1000)):
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    return docs


def _job(name: str, gpus: int, priority: str = "dev") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "kueue.x-k8s.io/queue-name": "private-ai-queue",
                "kueue.x-k8s.io/priority-class": priority,
            },
        },
        "spec": {
            "backoffLimit": 2,
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["/bin/sh", "-c", POD_SCRIPT],
                            "resources": {
                                "requests": {
                                    "cpu": "1",
                                    "memory": "256Mi",
                                    "nvidia.com/gpu": gpus,
                                }
                            },
                        }
                    ],
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "restartPolicy": "Never",
                }
            },
        },
    }


def _create(c: httpx.Client, doc: dict[str, Any]) -> None:
    kind, meta = doc["kind"], doc["metadata"]
    base = {"Namespace": "/api/v1", "Job": "/apis/batch/v1"}.get(kind, KUEUE)
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    ns = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
    r = c.post(f"{base}{ns}/{plural}", json=doc)
    assert r.status_code == 201, r.text


def _until(what: Callable[[], Any], why: str, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {why}")


def _pods(c: httpx.Client, name: str) -> list[dict[str, Any]]:
    for item in c.get(f"{GPUAAS}/runtime/pods").json()["items"]:
        if item["workload"] == name and not item["stopping"]:
            return list(item["pods"])
    return []


def _running(c: httpx.Client, name: str) -> list[dict[str, Any]]:
    pods = _pods(c, name)
    return pods if pods and all(p["phase"] == "Running" for p in pods) else []


def _log(c: httpx.Client, name: str) -> str:
    r = c.get(f"{GPUAAS}/namespaces/{NS}/workloads/{name}/logs")
    return r.text if r.status_code == 200 else ""


def _started_line(c: httpx.Client, name: str) -> str:
    return next((line for line in _log(c, name).splitlines() if line.startswith("node=")), "")


def _pod_processes(cluster: LocalRayCluster, pod: str) -> list[psutil.Process]:
    return [p for p in cluster.processes() if _environ(p).get("GPUAAS_POD") == pod]


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return dict(proc.environ())
    except psutil.Error:
        return {}


def _server(tmp: Path, cluster: LocalRayCluster, *more: str) -> ServerProcess:
    extra = ("--runtime", "ray", "--ray-address", cluster.address, *more)
    return ServerProcess(tmp / "data", extra=extra)


def _kueue_config(tmp: Path) -> Path:
    """Kueue's waitForPodsReady: a generous start timeout (Ray places pods in seconds here), a
    short recovery timeout, and a short back-off so the requeue is seen within the test."""
    path = tmp / "kueue-config.yaml"
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "waitForPodsReady": {
            "enable": True,
            "timeout": "180s",
            "recoveryTimeout": "8s",
            "blockAdmission": False,
            "requeuingStrategy": {"backoffBaseSeconds": 4, "backoffMaxSeconds": 60},
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _workload(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.get(f"{KUEUE}/namespaces/{NS}/workloads/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _condition(wl: dict[str, Any], type_: str) -> tuple[str, str] | None:
    for cond in wl.get("status", {}).get("conditions", []):
        if cond["type"] == type_:
            return cond["status"], cond["reason"]
    return None


def test_seed001_flavors_run_on_their_nodes_and_prod_preempts_dev(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    server = _server(tmp_path, cluster).start()
    try:
        with server.client() as c:
            for doc in _setup():
                _create(c, doc)
            # 1. both node types busy at once: each pod on the node its flavor names
            _create(c, _job("notebook", 1))
            _create(c, _job("fine-tune", 4))
            for name in ("notebook", "fine-tune"):
                _until(lambda n=name: _running(c, n), f"{name}'s pod to run")  # type: ignore[misc]
            assert _until(lambda: _started_line(c, "notebook"), "notebook's output") == (
                "node=l4-1 cuda=0 pod=notebook-0 restart=0"
            )
            assert _until(lambda: _started_line(c, "fine-tune"), "fine-tune's output") == (
                "node=l4-4 cuda=0,1,2,3 pod=fine-tune-0 restart=0"
            )
            # gpuaas node list: every Ray node, its labels, and who holds its GPUs
            nodes = {n["name"]: n for n in c.get(f"{GPUAAS}/nodes").json()["items"]}
            assert sorted(nodes) == ["head", "l4-1", "l4-4"]
            assert nodes["l4-4"]["labels"][TYPE] == "g6.12xlarge"
            assert nodes["l4-4"]["capacity"]["nvidia.com/gpu"] == 4
            assert nodes["l4-4"]["gpusInUse"] == {
                f"{NS}/fine-tune/fine-tune-0": ["0", "1", "2", "3"]
            }
            assert nodes["l4-1"]["gpusInUse"] == {f"{NS}/notebook/notebook-0": ["0"]}
            listing = table(list(nodes.values()))
            assert "l4-4" in listing and "4/4" in listing and "1/1" in listing
            (victim,) = _pod_processes(cluster, "fine-tune-0")[:1]
            assert _environ(victim)[MARKER_ENV] == cluster.token
            # 2. prod preempts dev on the 4-GPU node: SIGTERM, gone, then prod starts there
            _create(c, _job("prod-train", 4, "prod"))
            _until(lambda: _running(c, "prod-train"), "prod's pod to run")
            assert "term" in _log(c, "fine-tune").splitlines()
            assert not _pod_processes(cluster, "fine-tune-0")
            assert _until(lambda: _started_line(c, "prod-train"), "prod's output") == (
                "node=l4-4 cuda=0,1,2,3 pod=prod-train-0 restart=0"
            )
            assert _running(c, "notebook")  # the other node is untouched
            assert not _pods(c, "fine-tune")  # requeued: no node has 4 GPUs free
    finally:
        server.stop()
    # a graceful server stop stops every pod, on every node
    assert not [p for p in cluster.processes() if "GPUAAS_POD" in _environ(p)]


def test_pods_survive_a_server_crash_and_a_dead_node_fails_its_pods(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    """With Kueue's waitForPodsReady configured, the replacement no node can take ends as Kueue
    has it: the workload is evicted with PodsReadyTimeout once its recovery timeout ran out and
    requeued after a back-off (requeueState)."""
    config = ("--kueue-config", str(_kueue_config(tmp_path)))
    server = _server(tmp_path, cluster, *config).start()
    try:
        with server.client() as c:
            for doc in _setup():
                _create(c, doc)
            _create(c, _job("notebook", 1))
            _create(c, _job("fine-tune", 4))
            before = {
                name: _until(lambda n=name: _running(c, n), name)[0]["pid"]  # type: ignore[misc]
                for name in ("notebook", "fine-tune")
            }
            _until(
                lambda: _condition(_workload(c, "fine-tune"), "PodsReady") == ("True", "Started"),
                "fine-tune PodsReady",
            )
        # 1. the server crashes; its successor re-adopts the same processes
        server.kill()
        server = _server(tmp_path, cluster, *config).start()
        with server.client() as c:
            after = {
                name: _until(lambda n=name: _running(c, n), name)[0]["pid"]  # type: ignore[misc]
                for name in ("notebook", "fine-tune")
            }
            assert after == before
            assert "node=l4-1" in _log(c, "notebook")
            # 2. the 1-GPU node dies: its pod fails, and its replacement waits, Pending
            cluster.kill_raylet("l4-1")
            pending = _until(
                lambda: [p for p in _pods(c, "notebook") if p["restarts"] == 1], "a retry"
            )
            assert pending[0]["phase"] == "Pending"  # no other g6.4xlarge node
            assert "lost" in _log(c, "notebook")
            # Ray kills a dying worker's children; the pod's guard kills the rest of the pod
            _until(lambda: not _pod_processes(cluster, "notebook-0"), "the dead node's pod gone")
            # the other node's pod runs on: the same process, never restarted
            (survivor,) = _running(c, "fine-tune")
            assert (survivor["pid"], survivor["restarts"]) == (after["fine-tune"], 0), _log(
                c, "fine-tune"
            )
            # 3. waitForPodsReady: the notebook waits for recovery, times out, is evicted and
            #    requeued with back-off; re-admitted, its pod waits Pending again
            evicted = _until(
                lambda: (
                    (w := _workload(c, "notebook"))
                    and _condition(w, "Evicted") == ("True", "PodsReadyTimeout")
                    and w
                ),
                "the PodsReady timeout",
            )
            assert evicted["status"]["requeueState"]["count"] >= 1
            assert _condition(_workload(c, "fine-tune"), "PodsReady") == ("True", "Started")
            _until(
                lambda: (
                    _condition(_workload(c, "notebook"), "Requeued") == ("True", "BackoffFinished")
                ),
                "the back-off to end",
            )
            _until(lambda: _pods(c, "notebook"), "the notebook re-admitted")
            assert _running(c, "fine-tune")  # never evicted: its pods were ready
    finally:
        server.stop()
    assert not [p for p in cluster.processes() if "GPUAAS_POD" in _environ(p)]
    cluster.restart_node("l4-1")  # the module's cluster whole again for the tests after this


def test_runtime_places_all_or_nothing_and_retries_within_backoff_limit(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    from gpuaas.runtimes.ray_runtime import RayRuntime

    runtime = RayRuntime(tmp_path / "rt", cluster.address)
    events: list[Any] = []

    def drain(kind: EventKind, key: str) -> Any:
        def seen() -> Any:
            events.extend(runtime.poll())
            return next((e for e in events if e.kind == kind and e.workload == key), None)

        return _until(seen, f"{kind} of {key}")

    try:
        # 1. two pods of 3 GPUs: no node has 6, and the group is placed whole or not at all
        big = [PodSpec(f"big-{i}", ("/bin/sh", "-c", POD_SCRIPT), gpus=3) for i in range(2)]
        runtime.start("ns/big", big)
        time.sleep(2)
        events.extend(runtime.poll())
        assert [p.phase for p in runtime.running()["ns/big"].pods] == ["Pending", "Pending"]
        assert not any(e.kind == EventKind.STARTED for e in events)
        runtime.stop("ns/big")
        drain(EventKind.STOPPED, "ns/big")
        # 2. a failing pod is retried within the backoffLimit, then the workload fails
        failing = [PodSpec("bad-0", ("/bin/sh", "-c", "echo attempt; exit 3"))]
        runtime.start("ns/bad", failing, backoff_limit=1)
        failed = drain(EventKind.FAILED, "ns/bad")
        assert "1 failure(s)" in failed.message or "2 failure(s)" in failed.message
        assert [e.exit_code for e in events if e.kind == EventKind.POD_FAILED] == [3, 3]
        assert list(runtime.logs("ns/bad")) == ["attempt", "attempt"]
    finally:
        runtime.shutdown(grace_seconds=0)


def test_losing_the_ray_head_degrades_the_runtime_and_it_joins_again(tmp_path: Path) -> None:
    """The head holds the cluster's state (GCS). Without it Ray's workers give up after Ray's
    reconnect timeout (``RAY_gcs_rpc_server_reconnect_timeout_s``: 10 s in the test cluster, 60 s
    by default), their raylets exit and every pod ends with its actor. The server stays up: its
    Ray driver runs in a child process (``ray_driver``), the runtime is degraded (nodes shown not
    alive) while the head is away, and once a head answers at the same address again the server
    joins it, finds its placement groups gone and runs its admitted workload anew there."""
    nodes = [
        RayNodeSpec("head", {}, num_gpus=0, num_cpus=1),
        RayNodeSpec("l4-4", {TYPE: "g6.12xlarge"}, num_gpus=4, num_cpus=2),
    ]
    clusters = [LocalRayCluster(tmp_path / "ray", nodes).start()]
    server = _server(tmp_path, clusters[0])
    try:
        server.start()
        with server.client() as c:
            for doc in _setup():
                _create(c, doc)
            _create(c, _job("fine-tune", 4))
            _until(lambda: _running(c, "fine-tune"), "fine-tune's pod to run")
            clusters[0].kill_node("head")
            _until(lambda: not _pod_processes(clusters[0], "fine-tune-0"), "the pod to end", 60)
            # 1. degraded, not gone: the server answers, its nodes are shown not alive
            nodes_seen = c.get(f"{GPUAAS}/nodes").json()["items"]
            assert nodes_seen and not any(n["alive"] for n in nodes_seen)
            assert server.proc is not None and server.proc.poll() is None
            # 2. a head at the same address again (a new cluster): the workload runs anew there
            port = clusters[0].gcs_port
            clusters[0].stop()
            clusters.append(LocalRayCluster(tmp_path / "ray2", nodes, gcs_port=port).start())
            _until(lambda: _running(c, "fine-tune"), "fine-tune's pod to run again", 120)
            line = _until(
                lambda: [x for x in _log(c, "fine-tune").splitlines() if x.startswith("node=")],
                "its output",
            )[-1]
            assert line == "node=l4-4 cuda=0,1,2,3 pod=fine-tune-0 restart=1"
            assert all(n["alive"] for n in c.get(f"{GPUAAS}/nodes").json()["items"])
    finally:
        server.stop()
        for cluster in clusters:
            cluster.stop()
    assert not [p for cluster in clusters for p in cluster.processes()]


RAY = "/apis/ray.io/v1"


def _ray_status(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.get(f"{RAY}/namespaces/{NS}/rayclusters/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json().get("status") or {})


def _workload_processes(cluster: LocalRayCluster, name: str) -> list[psutil.Process]:
    return [p for p in cluster.processes() if _environ(p).get("GPUAAS_WORKLOAD") == f"{NS}/{name}"]


def test_a_raycluster_is_a_ray_cluster_of_its_own_placed_on_the_nodes(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    """As KubeRay makes one from pods: the RayCluster's head and worker are pods Ray placed on
    two nodes (by their flavors), each running ``ray start`` with its own ports and temp dir;
    the head listens on its node's IP and the worker joins it there, both found through the
    outer Ray (no file of theirs under the server's data dir: other machines share none); the
    worker's Ray node has the 4 GPUs Ray assigned its pod; a driver runs tasks on both;
    preemption stops all of it, and the preemptor runs on the freed GPUs."""
    import subprocess
    import sys

    server = _server(tmp_path, cluster).start()
    try:
        with server.client() as c:
            for doc in _setup():
                _create(c, doc)
            r = c.post(f"{RAY}/namespaces/{NS}/rayclusters", json=raycluster("rc", NS))
            assert r.status_code == 201, r.text
            status = _until(
                lambda: (s := _ray_status(c, "rc")).get("state") == "ready" and s,
                "the RayCluster's own Ray to be ready",
                360,  # two `ray start`s one after the other: minutes on a busy 2-core machine
            )
            # its pods run on the nodes their flavors name, with GPUAAS_NODE and the GPUs
            raylets = [p for p in _workload_processes(cluster, "rc") if p.name() == "raylet"]
            pods = {_environ(p)["GPUAAS_POD"]: _environ(p) for p in raylets}
            assert sorted((e["GPUAAS_NODE"], e["CUDA_VISIBLE_DEVICES"]) for e in pods.values()) == [
                ("l4-1", ""),
                ("l4-4", "0,1,2,3"),
            ]
            # the head (CPU: l4-1) listens on its node's IP; the worker (l4-4) joined it there
            assert status["head"]["podIP"] == L4_1_IP, status
            gcs = f"{L4_1_IP}:{status['endpoints']['gcs-server']}"
            args = {_environ(p)["GPUAAS_NODE"]: " ".join(p.cmdline()) for p in raylets}
            assert f"--node_ip_address={L4_1_IP}" in args["l4-1"], args["l4-1"]
            assert f"--node_ip_address={L4_4_IP}" in args["l4-4"], args["l4-4"]
            assert gcs in args["l4-4"], args["l4-4"]
            env = {"GPUAAS_SERVER": server.url, "GPUAAS_TOKEN": server.admin_token,
                   "GPUAAS_CONFIG": "/nonexistent/gpuaas.json"}  # fmt: skip
            listing = CliRunner().invoke(build_app(), ["get", "raycluster", "-n", NS], env=env)
            dashboard = f"http://{L4_1_IP}:{status['endpoints']['dashboard']}"
            assert dashboard in listing.output, listing.output
            assert not list(tmp_path.rglob("head.json"))  # met through Ray, not a shared dir
            ran = subprocess.run(
                [sys.executable, "-c", TASKS_ON_EVERY_NODE, gcs],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert ran.returncode == 0, ran.stderr[-3000:]
            assert ran.stdout.split() == ["l4-1", "l4-4"], ran.stdout  # tasks on both nodes
            before = _workload_processes(cluster, "rc")
            assert len(before) > 6  # gcs, raylets, agents, core workers, launchers...
            # preemption: a prod Job takes the 4 GPUs; all of the RayCluster's Ray goes
            _create(c, _job("prod-rc", 4, "prod"))
            _until(lambda: _running(c, "prod-rc"), "prod's pod to run", 120)
            assert not [p for p in before if _alive(p)]
            assert not _workload_processes(cluster, "rc")
            _until(lambda: _ray_status(c, "rc").get("state") == "suspended", "rc suspended")
            assert _until(lambda: _started_line(c, "prod-rc"), "prod's output") == (
                "node=l4-4 cuda=0,1,2,3 pod=prod-rc-0 restart=0"
            )
    finally:
        server.stop()
    assert not [p for p in cluster.processes() if "GPUAAS_POD" in _environ(p)]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_rayjob_runs_its_entrypoint_on_its_own_cluster_and_ends_it(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    """A RayJob (K8sJobMode) is its cluster's pods plus a submitter pod: the submitter waits for
    the head's dashboard and ``ray job submit``s the entrypoint, whose GPU task runs on the node
    Ray gave the head's pod and its GPUs; once it succeeded the cluster shuts down and the
    workload finishes, Succeeded, with nothing left running. The RayJob's status says what
    KubeRay's would: the Ray job's id and status as its cluster reports them (relayed from the
    submitter's node through the outer Ray), then Complete."""
    import sys

    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    job = raycluster("rj", NS)
    # one Ray node only (a head with the 4 GPUs): five raylets at once are too many here
    head = job["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
    head["requests"]["nvidia.com/gpu"] = head["limits"]["nvidia.com/gpu"] = 4
    job["spec"]["workerGroupSpecs"] = []
    job["kind"] = "RayJob"
    job["spec"] = {
        "entrypoint": f"{sys.executable} {script}",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": job["spec"],
    }
    server = _server(tmp_path, cluster).start()
    try:
        with server.client() as c:
            for doc in _setup():
                _create(c, doc)
            r = c.post(f"{RAY}/namespaces/{NS}/rayjobs", json=job)
            assert r.status_code == 201, r.text
            seen: list[tuple[str, str, str]] = []  # (deployment status, job status, job id)

            def finished_seeing_status() -> tuple[str, str] | None:
                status = c.get(f"{RAY}/namespaces/{NS}/rayjobs/rj").json().get("status") or {}
                step = (status.get("jobDeploymentStatus", ""), status.get("jobStatus", ""),
                        status.get("jobId", ""))  # fmt: skip
                if not seen or seen[-1] != step:
                    seen.append(step)
                return _condition(_workload(c, "rj"), "Finished")

            try:
                finished = _until(finished_seeing_status, "the RayJob to finish", 240)
            except AssertionError as exc:  # say how far it got
                raise AssertionError(
                    f"{exc}; statuses seen: {seen}; log: {_log(c, 'rj')[-3000:]}"
                ) from exc
            log = _log(c, "rj")
            assert finished == ("True", "Succeeded"), log[-3000:]
            assert "job ran on l4-4" in log, log[-3000:]
            assert not _workload_processes(cluster, "rj")
            # Initializing while its cluster starts, Running with the Ray job's own id and
            # status once submitted, Complete at the end
            assert "Initializing" in [s[0] for s in seen], seen
            running = [s for s in seen if s[0] == "Running"]
            assert running and all(s[2].startswith("raysubmit_") for s in running), seen
            assert {s[1] for s in running} <= {"PENDING", "RUNNING", "SUCCEEDED"}, seen
            status = c.get(f"{RAY}/namespaces/{NS}/rayjobs/rj").json()["status"]
            assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    finally:
        server.stop()
    assert not [p for p in cluster.processes() if "GPUAAS_POD" in _environ(p)]
