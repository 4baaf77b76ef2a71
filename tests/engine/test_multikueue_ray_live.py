"""Seeds 002 and 003 together, for real: a RayCluster sent by a MultiKueue hub to a worker that
runs it on a real local Ray, its ``ready`` status (which the head's Ray node record makes, after
``ray start``) mirrored on the hub, and its delete on the hub stopping the worker's Ray.

A hub and one worker, each a ``gpuaas server`` on loopback (the worker with ``--runtime local``);
the RayCluster is a head with 1 CPU and no command, so the worker starts ``ray start --head``.
Needs the ``ray`` extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mkcluster import client, condition, hub_and_worker, wait_for, workload

from gpuaas.api.testing import ServerProcess
from gpuaas.runtimes.ray_plan import ray_executable
from gpuaas.testing.ports import answers

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240)]
RAY = "/apis/ray.io/v1/namespaces/default/rayclusters"


@pytest.fixture(autouse=True)
def _needs_ray(require_service: Callable[[str, bool, str], None]) -> None:
    installed = importlib.util.find_spec("ray") is not None and ray_executable().exists()
    require_service("Ray", installed, "install the extra: pip install 'gpuaas[ray]'")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with hub_and_worker(tmp_path) as servers:
        yield servers


def _raycluster() -> dict[str, Any]:
    head = {"name": "ray-head", "image": "rayproject/ray",
            "resources": {"requests": {"cpu": "1", "memory": "2G"}}}  # fmt: skip
    template = {"spec": {"terminationGracePeriodSeconds": 5, "containers": [head]}}
    meta = {"name": "rc", "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}  # fmt: skip
    spec = {"headGroupSpec": {"rayStartParams": {}, "template": template}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def _status(c: httpx.Client) -> dict[str, Any]:
    r = c.get(f"{RAY}/rc")
    return dict(r.json().get("status") or {}) if r.status_code == 200 else {}


def test_a_raycluster_runs_on_its_worker_and_the_hub_sees_it_ready(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    hub, worker = pair
    h, w = client(hub), client(worker)
    assert h.post(RAY, json=_raycluster()).status_code == 201
    ready = wait_for(
        "the hub's RayCluster ready, as its worker's",
        lambda: (s := _status(h)).get("state") == "ready" and s,
        timeout=150,
    )
    assert ready == _status(w)  # the worker's status, whole
    assert ready["desiredCPU"] == "1" and ready["head"]["podName"]
    gcs = int(ready["endpoints"]["gcs-server"])
    assert answers(gcs)  # a real Ray head listens where the hub says
    wl = workload(h, "rc")
    assert condition(wl, "Admitted")["status"] == "True" and wl["status"]["clusterName"] == "w1"
    # Deleting it on the hub deletes it on the worker, whose Ray stops.
    assert h.delete(f"{RAY}/rc").status_code == 200
    wait_for("the worker's RayCluster gone", lambda: w.get(f"{RAY}/rc").status_code == 404)
    wait_for("the Ray head stopped", lambda: not answers(gcs), timeout=60)
