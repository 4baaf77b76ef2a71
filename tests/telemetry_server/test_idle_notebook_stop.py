"""An idle workbench on a real server is stopped as RHOAI's culler stops it: the idle detector
(GPU load read from the pod's processes) picks the Notebook's ``Stop`` (engine.notebook_stop),
which sets ``kubeflow-resource-stopped``; the GPU goes to the workbench queued behind it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

pytestmark = pytest.mark.slow
GPU = "nvidia.com/gpu"
NB = "/apis/kubeflow.org/v1/namespaces/ds/notebooks"
SETUP: list[dict[str, Any]] = [
    {"apiVersion": "gpuaas.dev/v1alpha1", "kind": "GpuaasConfiguration",
     "metadata": {"name": "default"},
     "spec": {"hoarding": [{"windowSeconds": 3, "action": "Evict"}],
              "telemetry": {"intervalSeconds": 1, "collector": "simulated"}}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ds"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU],
              "flavors": [{"name": "l4", "resources": [{"name": "cpu", "nominalQuota": 4},
                                                        {"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "q", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
]  # fmt: skip


def notebook(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": name, "namespace": "ds", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [
            {"name": name, "image": "x", "command": ["sleep", "300"],
             "resources": {"requests": {"cpu": "1", GPU: 1}}}]}}},
    }  # fmt: skip


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "data", extra=("--runtime", "local", "--fake-gpus", "1"))
    try:
        yield srv.start()
    finally:
        srv.stop()


def _until(check: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_idle_notebook_is_stopped_and_the_next_one_admitted(server: ServerProcess) -> None:
    with server.client() as c:
        for doc in SETUP:
            k = BY_KIND[doc["kind"]]
            ns = doc["metadata"].get("namespace")
            path = (
                f"{k.base_path()}/namespaces/{ns}/{k.plural}"
                if ns
                else f"{k.base_path()}/{k.plural}"
            )
            assert c.post(path, json=doc).status_code == 201, doc
        assert c.post(NB, json=notebook("idle")).status_code == 201
        assert c.post(NB, json=notebook("next")).status_code == 201

        def annotations(name: str) -> dict[str, str]:
            out: dict[str, str] = c.get(f"{NB}/{name}").json()["metadata"].get("annotations", {})
            return out

        _until(lambda: "kubeflow-resource-stopped" in annotations("idle"), "the idle stop")
        assert c.get("/apis/kueue.x-k8s.io/v1beta1/namespaces/ds/workloads/idle").status_code == 404

        def next_ready() -> bool:
            st = c.get(f"{NB}/next").json().get("status") or {}
            return bool(st.get("readyReplicas"))

        _until(next_ready, "the queued workbench to run")
        events = httpx.get(
            f"{server.url}/api/v1/namespaces/ds/events",
            headers={"Authorization": f"Bearer {server.admin_token}"},
        ).json()["items"]
        assert any(e["reason"] == "IdleStopped" for e in events), [e["reason"] for e in events]
        for name in ("idle", "next"):
            c.delete(f"{NB}/{name}")
