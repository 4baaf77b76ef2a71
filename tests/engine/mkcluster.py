"""A MultiKueue hub and worker servers on loopback, each a real ``gpuaas server`` process, set up
as Kueue's MultiKueue guide sets them up: the same ResourceFlavor, ClusterQueue and LocalQueue
names on every cluster, the MultiKueue AdmissionCheck on the hub's ClusterQueue only, and each
worker joined with ``gpuaas cluster join``. A plain module (``from mkcluster import ...``), shared
by the live tests (``bench/multicluster.py`` sets up its own, with room for 1,000 Jobs).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.api.testing import object_path as path_of
from gpuaas.cli.main import build_app

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
JsonDoc = dict[str, Any]


_CLIENTS: dict[str, httpx.Client] = {}


def client(srv: ServerProcess) -> httpx.Client:
    """One admin client per server address, closed by ``close_clients``."""
    c = _CLIENTS.get(srv.url)
    if c is None:
        c = _CLIENTS[srv.url] = srv.client()
    return c


def close_clients() -> None:
    for c in _CLIENTS.values():
        c.close()
    _CLIENTS.clear()


def queues(cpu: str, *, check: bool) -> list[JsonDoc]:
    cq: JsonDoc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    docs: list[JsonDoc] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "default-flavor"}},
    ]  # fmt: skip
    if check:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": "mk"},
                "spec": {
                    "controllerName": "kueue.x-k8s.io/multikueue",
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "MultiKueueConfig",
                        "name": "default",
                    },
                },
            }
        )
    docs.append(cq)
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        }
    )
    return docs


def apply(client: httpx.Client, docs: list[JsonDoc]) -> None:
    for doc in docs:
        r = client.post(path_of(doc), json=doc)
        assert r.status_code == 201, r.text


def job(name: str, cpu: str = "1", command: tuple[str, ...] = ("sleep", "3600")) -> JsonDoc:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": list(command),
                            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                        }
                    ],
                    "restartPolicy": "Never",
                }
            },
        },
    }


def join(
    hub: ServerProcess, worker: ServerProcess, name: str, tmp: Path, *labels: str
) -> tuple[int, str]:
    env = {
        "GPUAAS_SERVER": worker.url,
        "GPUAAS_TOKEN": worker.admin_token,
        "GPUAAS_CONFIG": str(tmp / "cli.json"),
    }
    args = ["cluster", "join", "--hub", hub.url, "--hub-token", hub.admin_token]
    args += ["--name", name, "--config", "default"]
    for label in labels:
        args += ["--label", label]
    result = CliRunner().invoke(build_app(), args, env=env)
    return result.exit_code, result.output


@contextlib.contextmanager
def hub_and_worker(tmp: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A hub (100 CPUs behind its MultiKueue check) and worker ``w1`` joined to it, running real
    processes (``--runtime local``, 4 CPUs, no GPU); the worker is stopped gracefully after (its
    pods, a Ray it started, end with it), the hub killed."""
    hub = ServerProcess(tmp / "hub")
    worker = ServerProcess(tmp / "w1", extra=("--runtime", "local", "--fake-gpus", "0"))
    try:
        hub.start()
        worker.start()
        apply(client(hub), queues("100", check=True))
        apply(client(worker), queues("4", check=False))
        code, out = join(hub, worker, "w1", tmp)
        assert code == 0, out
        yield hub, worker
    finally:
        close_clients()
        hub.kill()
        worker.stop()


def cli(hub: ServerProcess, tmp: Path, *args: str) -> tuple[int, str]:
    env = {
        "GPUAAS_SERVER": hub.url,
        "GPUAAS_TOKEN": hub.admin_token,
        "GPUAAS_CONFIG": str(tmp / "cli.json"),
    }
    result = CliRunner().invoke(build_app(), list(args), env=env)
    return result.exit_code, result.output


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            last = exc
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def workload(client: httpx.Client, name: str) -> JsonDoc:
    r = client.get(f"{KUEUE}/namespaces/default/workloads/{name}")
    return r.json() if r.status_code == 200 else {}


def copies(client: httpx.Client) -> dict[str, JsonDoc]:
    items = client.get(f"{KUEUE}/workloads").json()["items"]
    return {i["metadata"]["name"]: i for i in items}


def jobs(client: httpx.Client) -> set[str]:
    return {i["metadata"]["name"] for i in client.get("/apis/batch/v1/jobs").json()["items"]}


def condition(doc: JsonDoc, type_: str) -> JsonDoc:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}
