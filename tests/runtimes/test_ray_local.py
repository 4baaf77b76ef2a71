"""Seed 003 for real: admitted RayClusters start real local Ray clusters, preemption stops them.

A real ``gpuaas server`` (local runtime, 4 fake GPUs) gets seed 003's queues and team B's dev
RayCluster (its head and one worker: two Ray nodes keep the test short). Ray must come up with
exactly the admitted CPUs, memory and GPUs; a Ray driver connects and runs tasks, which leaves
Ray core workers in process groups of their own. Then team A's prod RayCluster (the seed's, with
two GPU workers) preempts it: every process of team B's Ray must be gone, its head port closed,
and team A's Ray up with 4 GPUs, each worker node pinned to its own two. ``gpuaas get raycluster``
shows both, as the seed's ``oc get rayclusters`` does. Needs the ``ray`` extra.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.main import build_app
from gpuaas.runtimes.ray_plan import ray_executable
from gpuaas.testing.ports import answers

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

SEED = Path(__file__).resolve().parents[2] / "examples" / "003-rayclusters"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
RAY = "/apis/ray.io/v1"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"
DEV, PROD = "team-b/raycluster-dev", "team-a/raycluster-prod"
DRIVER = """
import os, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=1)
def where():
    import time
    time.sleep(1)
    return ray.get_runtime_context().get_node_id()
print(len(set(ray.get([where.remote() for _ in range(4)]))))
"""


@pytest.fixture(autouse=True)
def _needs_ray(require_service: Callable[[str, bool, str], None]) -> None:
    installed = importlib.util.find_spec("ray") is not None and ray_executable().exists()
    require_service("Ray", installed, "install the extra: pip install 'gpuaas[ray]'")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "data", extra=("--runtime", "local", "--fake-gpus", "4"))
    try:
        yield srv.start()
    finally:
        srv.stop()


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def _create(c: httpx.Client, doc: dict[str, Any]) -> None:
    kind, meta = doc["kind"], doc["metadata"]
    base = {"Namespace": "/api/v1", "RayCluster": RAY}.get(kind, KUEUE)
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    ns = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
    r = c.post(f"{base}{ns}/{plural}", json=doc)
    assert r.status_code == 201, r.text


def _status(c: httpx.Client, key: str) -> dict[str, Any]:
    ns, name = key.split("/")
    r = c.get(f"{RAY}/namespaces/{ns}/rayclusters/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json()["status"])


def _until(what: Callable[[], Any], why: str, timeout: float = 240.0) -> Any:
    """Poll ``what`` until it gives something. Generous: three Ray nodes coming up on two cores
    of a VM in a slow phase took more than 90 s in CI (2026-12-07); it returns once ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {why}")


def _ready(c: httpx.Client, key: str) -> dict[str, Any] | None:
    status = _status(c, key)
    return status if status["state"] == "ready" else None


def _nodes(status: dict[str, Any]) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{status['endpoints']['dashboard']}/api/v0/nodes"
    rows = httpx.get(url, timeout=30).json()["data"]["result"]["result"]
    return [n for n in rows if n["state"] == "ALIVE"]


def _pods(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    for item in c.get(f"{GPUAAS}/runtime/pods").json()["items"]:
        if f"{item['namespace']}/{item['workload']}" == key and not item["stopping"]:
            return list(item["pods"])
    return []


def _session_processes(sessions: set[int]) -> dict[int, psutil.Process]:
    """Live processes of the pods' sessions (Ray's core workers included: they keep the sid)."""
    out = {}
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                out[proc.pid] = proc
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return out


def _env(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_rayclusters_run_for_real_and_preemption_stops_them(server: ServerProcess) -> None:
    dev = copy.deepcopy(_docs("team-b-ray-cluster-dev.yaml")[0])
    dev["spec"]["workerGroupSpecs"][0]["replicas"] = 1  # head + 1 worker: 4 CPUs, 12G
    prod = _docs("team-a-ray-cluster-prod.yaml")[0]  # the seed's: head + 2 GPU workers
    leftovers: dict[int, psutil.Process] = {}
    try:
        with server.client() as c:
            for doc in _docs("setup.yaml"):
                _create(c, doc)
            # 1. team B's RayCluster is admitted and Ray comes up with what was admitted
            _create(c, dev)
            status = _until(lambda: _ready(c, DEV), "team B's Ray cluster to be ready")
            assert (status["desiredWorkerReplicas"], status["availableWorkerReplicas"]) == (1, 1)
            assert (status["desiredCPU"], status["desiredMemory"]) == ("4", "12G")
            assert status["desiredGPU"] == "0"
            nodes = _until(lambda: len(_nodes(status)) == 2 and _nodes(status), "2 Ray nodes")
            totals = [n["resources_total"] for n in nodes]
            assert sorted(t["CPU"] for t in totals) == [2.0, 2.0]
            assert sorted(t["memory"] for t in totals) == [4e9, 8e9]
            assert all("GPU" not in t for t in totals)
            # 2. a Ray driver connects and runs tasks on both nodes
            gcs = f"127.0.0.1:{status['endpoints']['gcs-server']}"
            ran = subprocess.run(
                [sys.executable, "-c", DRIVER, gcs], capture_output=True, text=True, timeout=90
            )
            assert ran.returncode == 0, ran.stderr[-3000:]
            assert ran.stdout.split()[-1] in ("1", "2")
            sessions = {int(p["pid"]) for p in _pods(c, DEV)}
            dev_processes = _session_processes(sessions)
            assert len(dev_processes) > 10  # gcs, raylets, dashboard, agents, core workers...
            dev_gcs = int(status["endpoints"]["gcs-server"])
            # 3. team A's RayCluster preempts it: all of team B's Ray is gone, team A's is up
            _create(c, prod)
            _until(lambda: _status(c, DEV)["state"] == "suspended", "team B to be suspended")
            leftovers = {pid: p for pid, p in dev_processes.items() if p.is_running() and _alive(p)}
            assert not leftovers, [p.cmdline() for p in leftovers.values()]
            assert not answers(dev_gcs)
            status = _until(lambda: _ready(c, PROD), "team A's Ray cluster to be ready")
            assert (status["desiredWorkerReplicas"], status["availableWorkerReplicas"]) == (2, 2)
            assert (status["desiredCPU"], status["desiredMemory"], status["desiredGPU"]) == (
                "10",
                "24G",
                "4",
            )
            nodes = _until(lambda: len(_nodes(status)) == 3 and _nodes(status), "3 Ray nodes")
            totals = sorted((n["resources_total"] for n in nodes), key=lambda t: t["CPU"])
            assert [(t["CPU"], t.get("GPU", 0.0)) for t in totals] == [
                (2.0, 0.0),
                (4.0, 2.0),
                (4.0, 2.0),
            ]
            # each worker node sees its own two GPUs, as the runtime assigned them
            pinned = []
            for pod in _pods(c, PROD):
                raylets = [
                    p
                    for p in _session_processes({int(pod["pid"])}).values()
                    if p.name() == "raylet"
                ]
                assert len(raylets) == 1, pod
                visible = _env(raylets[0].pid)["CUDA_VISIBLE_DEVICES"]
                assert visible == ",".join(map(str, pod["gpus"])), (pod, visible)
                pinned += pod["gpus"]
            assert sorted(pinned) == [0, 1, 2, 3]
            # 4. `gpuaas get raycluster -A`, as the seed's `oc get rayclusters -A`
            env = {"GPUAAS_SERVER": server.url, "GPUAAS_TOKEN": server.admin_token,
                   "GPUAAS_CONFIG": "/nonexistent/gpuaas.json"}  # fmt: skip
            out = CliRunner().invoke(build_app(), ["get", "raycluster", "-A"], env=env)
            assert out.exit_code == 0, out.output
            lines = [line.split() for line in out.output.splitlines()]
            assert lines[0][:3] == ["NAMESPACE", "NAME", "DESIRED"] and "DASHBOARD" in lines[0]
            rows = {line[1]: line for line in lines[1:]}
            dashboard = f"http://127.0.0.1:{status['endpoints']['dashboard']}"
            assert rows["raycluster-prod"][2:8] == ["2", "2", "10", "24G", "4", "ready"]
            assert rows["raycluster-prod"][-1] == dashboard
            assert rows["raycluster-dev"][2:7] == ["1", "4", "12G", "0", "suspended"]
            prod_processes = _session_processes({int(p["pid"]) for p in _pods(c, PROD)})
        # 5. a graceful server stop stops team A's Ray whole
        server.stop()
        leftovers = {pid: p for pid, p in prod_processes.items() if _alive(p)}
        assert not leftovers, [p.cmdline() for p in leftovers.values()]
    finally:
        for proc in leftovers.values():  # never leave Ray running behind a failed test
            try:
                proc.kill()
            except psutil.Error:
                continue


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
