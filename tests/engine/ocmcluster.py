"""A hub and three workers for seed 002's OCM placement scenarios, each a real ``gpuaas server``
on loopback: the workers get the kueue-addon chart's spoke queues and fake GPUs of two models,
and join the hub with ``gpuaas cluster join`` and their GPU label. A plain module shared by the
live tests (``from ocmcluster import ...``)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import yaml
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.api.testing import object_path as path_of
from gpuaas.cli.main import build_app

JsonDoc = dict[str, Any]
MANIFESTS = Path(__file__).resolve().parents[3] / "shared/reference/multicluster/manifests"
# name -> (fake GPUs, accelerator label): seed 002's labels (OCM's T4 clusters, GPUaaS-RHACM's L4)
WORKERS = {
    "cluster1": ("3:NVIDIA-L4", "nvidia-l4"),
    "cluster2": ("3:Tesla-T4", "nvidia-tesla-t4"),
    "cluster3": ("3:Tesla-T4", "nvidia-tesla-t4"),
}


def demo_docs(name: str) -> list[JsonDoc]:
    text = resources.files("gpuaas.demos").joinpath(f"002/{name}").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def seed_docs(rel: str) -> list[JsonDoc]:
    return [d for d in yaml.safe_load_all((MANIFESTS / rel).read_text()) if d]


def apply(client: httpx.Client, docs: list[JsonDoc]) -> list[JsonDoc]:
    """``kubectl apply`` (create, or replace what exists) and ``kubectl create`` for
    ``generateName``; returns what the server stored."""
    out = []
    for doc in docs:
        r = client.post(path_of(doc), json=doc)
        if r.status_code == 409:
            name = doc["metadata"]["name"]
            old = client.get(path_of(doc, name)).json()
            new = {**doc, "metadata": {**doc["metadata"],
                                       "resourceVersion": old["metadata"]["resourceVersion"]}}  # fmt: skip
            r = client.put(path_of(doc, name), json=new)
        assert r.status_code in (200, 201), r.text
        out.append(r.json())
    return out


@dataclass
class Clusters:
    hub: ServerProcess
    workers: dict[str, ServerProcess]
    tmp: Path

    def stop(self) -> None:
        for srv in (self.hub, *self.workers.values()):
            srv.stop()


def join(hub: ServerProcess, worker: ServerProcess, name: str, tmp: Path, label: str) -> str:
    env = {"GPUAAS_SERVER": worker.url, "GPUAAS_TOKEN": worker.admin_token,
           "GPUAAS_CONFIG": str(tmp / "cli.json")}  # fmt: skip
    args = ["cluster", "join", "--hub", hub.url, "--hub-token", hub.admin_token, "--name", name,
            "--label", f"accelerator={label}"]  # fmt: skip
    result = CliRunner().invoke(build_app(), args, env=env)
    assert result.exit_code == 0, result.output
    return result.output


def start(tmp: Path) -> Clusters:
    hub = ServerProcess(tmp / "hub").start()
    workers: dict[str, ServerProcess] = {}
    try:
        for name, (gpus, label) in WORKERS.items():
            srv = ServerProcess(tmp / name, extra=("--runtime", "local", "--fake-gpus", gpus))
            workers[name] = srv.start()
            with srv.client() as c:
                apply(c, demo_docs("addon-spoke.yaml"))
            join(hub, srv, name, tmp, label)
        with hub.client() as c:
            apply(c, demo_docs("addon-hub.yaml"))
    except BaseException:
        Clusters(hub, workers, tmp).stop()
        raise
    return Clusters(hub, workers, tmp)
