"""Crash test: 20 times, SIGKILL the server while 8 clients submit workloads; after every restart
nothing acknowledged is lost and no ClusterQueue is over its quota."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuaas.api.testing import ServerProcess

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
NOMINAL_CPU = 10


def _setup(c: httpx.Client) -> None:
    docs: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "crash"}}),
        (f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta1",
                                       "kind": "ResourceFlavor", "metadata": {"name": "rf"}}),
        (f"{KUEUE}/clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "rf", "resources": [
                    {"name": "cpu", "nominalQuota": NOMINAL_CPU}]}]}]}}),
        (f"{KUEUE}/namespaces/crash/localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "crash"}, "spec": {"clusterQueue": "cq"}}),
    ]  # fmt: skip
    for path, doc in docs:
        assert c.post(path, json=doc).status_code == 201


def _wl(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "crash"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    }  # fmt: skip


CYCLES = 20


def _check(c: httpx.Client, acked: list[str]) -> None:
    """Every acknowledged write is there, and the ClusterQueue is full but never over."""
    items = c.get(f"{KUEUE}/namespaces/crash/workloads").json()["items"]
    stored = {w["metadata"]["name"] for w in items}
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} acknowledged workloads lost"
    admitted = [
        w for w in items
        if any(x["type"] == "Admitted" and x["status"] == "True"
               for x in w.get("status", {}).get("conditions", []))
    ]  # fmt: skip
    assert len(admitted) == min(NOMINAL_CPU, len(items))
    summary = c.get("/apis/gpuaas.dev/v1alpha1/clusterqueuestatus").json()["items"]
    (res,) = summary[0]["resources"]
    assert res["usage"] <= res["nominal"] == NOMINAL_CPU * 1000


def _submit_until_killed(srv: ServerProcess, cycle: int, acked: list[str], kill_after: int) -> None:
    """8 clients create workloads; the server is SIGKILLed once ``kill_after`` were acknowledged
    in this cycle (a write in flight then is neither acknowledged nor required)."""
    lock = threading.Lock()
    killed = threading.Event()
    count = [0]

    def client(i: int) -> None:
        with srv.client() as c:
            for j in range(200):
                if killed.is_set():
                    return
                name = f"w-{cycle}-{i}-{j}"
                try:
                    r = c.post(f"{KUEUE}/namespaces/crash/workloads", json=_wl(name))
                except httpx.HTTPError:
                    return  # the server is gone: this one was never acknowledged
                if r.status_code == 201:
                    with lock:
                        acked.append(name)
                        count[0] += 1
                        if count[0] >= kill_after and not killed.is_set():
                            killed.set()
                            srv.kill()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert killed.is_set(), f"cycle {cycle}: the server was not killed mid-run"


@pytest.mark.slow
@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_during_submissions_loses_nothing_acknowledged(tmp_path: Path, db: str) -> None:
    """20 cycles of: restart, check, submit from 8 clients, SIGKILL mid-run."""
    from gpuaas.store.testing import drop_schema, postgres_schema_url

    url = postgres_schema_url() if db == "postgres" else None
    rng = random.Random(17)
    acked: list[str] = []
    servers: list[ServerProcess] = []
    try:
        for cycle in range(CYCLES + 1):
            srv = ServerProcess(tmp_path / "data", url)
            servers.append(srv)
            srv.start()
            with srv.client() as c:
                if cycle == 0:
                    _setup(c)
                _check(c, acked)
            if cycle == CYCLES:
                break
            _submit_until_killed(srv, cycle, acked, kill_after=rng.randint(5, 60))
    finally:
        for srv in servers:
            srv.kill()
        if url is not None:
            drop_schema(url)
