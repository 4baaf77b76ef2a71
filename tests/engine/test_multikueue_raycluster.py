"""A RayCluster dispatched by MultiKueue, as Kueue's RayCluster adapter does it: a hub and one
worker that runs real processes (``--runtime local``), each a ``gpuaas server`` on loopback.

The hub's RayCluster gets ``managedBy`` and never runs; a copy of its workload and the RayCluster
itself (with the prebuilt-workload label, without ``managedBy``) go to the worker, which runs its
head; the worker's RayCluster status reaches the hub by the hub's watch of the worker's
RayClusters, whole, as Kueue's ``copyJobStatus`` copies it (the worker's copy of the workload
is owned by its RayCluster by then), including the change its head's Ray
record makes (``ready``, its endpoints) with no pod event at all; deleting the hub's RayCluster
deletes the worker's. The head's command is a plain ``sleep`` (no Ray is needed): the test
writes the record ``ray_pod`` writes once ``ray start`` is done, where the worker's local
runtime keeps it (``DATA/runtime/workloads/NS/NAME/ray/head.json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mkcluster import client, condition, hub_and_worker, wait_for, workload

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.multikueue import MANAGED_BY, ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL

pytestmark = pytest.mark.slow
RAY = "/apis/ray.io/v1/namespaces/default/rayclusters"
PODS = "/apis/gpuaas.dev/v1alpha1/runtime/pods"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with hub_and_worker(tmp_path_factory.mktemp("mkray")) as servers:
        yield servers


def raycluster(name: str) -> dict[str, Any]:
    container = {"name": "head", "image": "rayproject/ray", "command": ["sleep", "600"],
                 "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}
    meta = {"name": name, "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}  # fmt: skip
    spec = {"headGroupSpec": {"rayStartParams": {}, "template": template}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def _get(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.get(f"{RAY}/{name}")
    return dict(r.json()) if r.status_code == 200 else {}


def _running_head(c: httpx.Client, name: str) -> str | None:
    for item in c.get(PODS).json()["items"]:
        if item["workload"] == name and not item["stopping"]:
            running = [p["name"] for p in item["pods"] if p["phase"] == "Running"]
            return running[0] if running else None
    return None


def test_a_rayclusters_status_is_mirrored_and_its_delete_reaches_the_worker(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    hub, worker = pair
    h, w = client(hub), client(worker)
    r = h.post(RAY, json=raycluster("rc"))
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["managedBy"] == MANAGED_BY
    # The worker gets the RayCluster, labelled, without managedBy, and runs its head.
    remote = wait_for("the RayCluster on the worker", lambda: _get(w, "rc"))
    labels = remote["metadata"]["labels"]
    assert labels[PREBUILT_WORKLOAD_LABEL] == "rc" and ORIGIN_LABEL in labels
    assert "managedBy" not in remote["spec"]
    head = wait_for("the worker's head pod running", lambda: _running_head(w, "rc"))
    # Its copy is the RayCluster's now, as Kueue's EnsurePrebuiltWorkloadOwnership makes it.
    owners = workload(w, "rc")["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"], o["controller"]) for o in owners] == [
        ("RayCluster", "rc", remote["metadata"]["uid"], True)
    ]
    wl = wait_for(
        "the hub's workload Admitted",
        lambda: (d := workload(h, "rc")) and condition(d, "Admitted").get("status") == "True" and d,
    )
    assert wl["status"]["clusterName"] == "w1"
    # The hub shows the worker's status, whole: admitted, its head not a Ray node yet.
    started = wait_for(
        "the hub's RayCluster mirroring the worker's",
        lambda: (s := _get(h, "rc").get("status")) and s == _get(w, "rc").get("status") and s,
    )
    assert started["state"] == "" and started["desiredCPU"] == "1" and "head" not in started
    assert h.get(f"{RAY}/rc").json()["spec"]["managedBy"] == MANAGED_BY
    # The head's Ray record appears (ray start done): no pod changes, yet the worker's watch
    # hears the RayCluster turn ready, and the hub mirrors it.
    record = {"pod": head, "run": "r1", "ready": True, "nodeIP": "127.0.0.1",
              "ports": {"gcs": 6379, "client": 10001, "dashboard": 8265}}  # fmt: skip
    records = Path(worker.data_dir) / "runtime" / "workloads" / "default" / "rc" / "ray"
    records.mkdir(parents=True, exist_ok=True)
    (records / "head.json").write_text(json.dumps(record))
    ready = wait_for(
        "the hub's RayCluster ready",
        lambda: (s := _get(h, "rc").get("status") or {}).get("state") == "ready" and s,
        timeout=30,
    )
    assert ready["head"] == {"podIP": "127.0.0.1", "podName": head}
    assert ready["endpoints"]["dashboard"] == "8265"
    # Deleting it on the hub deletes it on the worker: its RayCluster, its copy, its pods.
    assert h.delete(f"{RAY}/rc").status_code == 200
    wait_for("the worker's RayCluster deleted", lambda: not _get(w, "rc"))
    wait_for("the worker's copy deleted", lambda: not workload(w, "rc"))
    wait_for("the worker's pods gone", lambda: _running_head(w, "rc") is None)


def rayjob(name: str) -> dict[str, Any]:
    """A RayJob whose head and submitter have commands: its submitter ends at once."""

    def template(pod: str, command: list[str]) -> dict[str, Any]:
        container = {"name": pod, "image": "rayproject/ray", "command": command,
                     "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
        return {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}

    head = {"rayStartParams": {}, "template": template("head", ["sleep", "2"])}
    spec = {
        "entrypoint": "python job.py",
        "shutdownAfterJobFinishes": True,
        "submitterPodTemplate": template("submitter", ["sleep", "1"]),
        "rayClusterSpec": {"headGroupSpec": head},
    }
    meta = {"name": name, "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}  # fmt: skip
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}


RAYJOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"


def test_a_rayjob_runs_on_the_worker_and_the_hub_keeps_its_last_status(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    hub, worker = pair
    h, w = client(hub), client(worker)
    r = h.post(RAYJOBS, json=rayjob("rj"))
    assert r.status_code == 201, r.text
    wait_for("the RayJob on the worker", lambda: w.get(f"{RAYJOBS}/rj").status_code == 200)

    def hub_status() -> dict[str, Any]:
        r = h.get(f"{RAYJOBS}/rj")
        return dict(r.json().get("status") or {}) if r.status_code == 200 else {}

    done = wait_for(
        "the hub's RayJob Complete, as on its worker",
        lambda: (s := hub_status()).get("jobDeploymentStatus") == "Complete" and s,
    )
    assert done["jobStatus"] == "SUCCEEDED" and "rayClusterStatus" in done
    assert condition(workload(h, "rj"), "Finished").get("reason") == "Succeeded"
    # The worker's copy and RayJob are removed once the hub's workload finished.
    wait_for("the worker's RayJob removed", lambda: w.get(f"{RAYJOBS}/rj").status_code == 404)
    assert hub_status() == done
