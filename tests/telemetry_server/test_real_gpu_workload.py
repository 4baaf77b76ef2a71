"""On a machine with an NVIDIA GPU: a real Job runs a CUDA load on the GPU the local runtime
pinned it to, and ``/metrics`` shows that GPU busy and held by that Job's workload.

This is the telemetry promise end to end (per-GPU utilization mapped to workloads, so idle and
hoarded GPUs show up): the server's GPUs come from NVML (no ``--fake-gpus``), the collector is
NVML's (``auto``), the pod is a real process whose ``CUDA_VISIBLE_DEVICES`` the runtime set, and
the load is a matrix product in PyTorch or CuPy (whichever this interpreter has). Without a GPU it
skips (``GPUAAS_REQUIRE_GPU=1`` makes it mandatory, as on the device machine); without either
library it skips too, saying so, since the load needs one.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_server import post, wait_for
from prometheus_client.parser import text_string_to_metric_families
from telemetry_docs import cluster_queue, flavor, local_queue, namespace

from gpuaas.api.testing import ServerProcess

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

LOAD_SECONDS = 60
TORCH_LOAD = f"""
import os, time, torch
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
x = torch.randn(8192, 8192, device="cuda")
end = time.time() + {LOAD_SECONDS}
while time.time() < end:
    (x @ x).sum().item()
"""
CUPY_LOAD = f"""
import os, time, cupy
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
x = cupy.random.random((8192, 8192), dtype=cupy.float32)
end = time.time() + {LOAD_SECONDS}
while time.time() < end:
    float((x @ x).sum())
"""


def _gpu_count() -> tuple[int, str]:
    from gpuaas.inventory.gpus import read_nvml_gpus

    gpus, reason = read_nvml_gpus()
    return len(gpus), reason or ""


def _load() -> str | None:
    if importlib.util.find_spec("torch") is not None:
        return TORCH_LOAD
    if importlib.util.find_spec("cupy") is not None:
        return CUPY_LOAD
    return None


def _series(c: httpx.Client, name: str) -> list[tuple[dict[str, str], float]]:
    """Each GPU's (labels, value) of the DCGM gauge ``name`` as /metrics shows them now."""
    text = c.get("/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return [(s.labels, s.value) for s in family.samples]
    return []


def _of(series: list[tuple[dict[str, str], float]], uuid: str) -> float | None:
    return next((value for labels, value in series if labels["UUID"] == uuid), None)


def test_a_jobs_cuda_load_shows_on_its_pinned_gpu(tmp_path: Path) -> None:
    count, reason = _gpu_count()
    if count == 0:
        if os.environ.get("GPUAAS_REQUIRE_GPU") == "1":
            pytest.fail(f"GPUAAS_REQUIRE_GPU=1 but NVML lists no GPU: {reason}")
        pytest.skip(f"no NVIDIA GPU with NVML: {reason or 'NVML lists no GPU'}")
    load = _load()
    if load is None:
        pytest.skip("neither torch nor cupy in this interpreter: nothing to load the GPU with")
    extra = ("--runtime", "local", "--telemetry-interval", "0.5", "--tick", "0.2")
    srv = ServerProcess(tmp_path / "data", extra=extra).start()
    try:
        with srv.client() as c:
            for doc in (
                namespace("gpu-team"),
                flavor(),
                cluster_queue("gpu-cq", 1),
                local_queue("gpu-team", "gpu-lq", "gpu-cq"),
            ):
                r = post(c, doc)
                assert r.status_code == 201, r.text
            container = {
                "name": "burn",
                "image": "local",
                "command": [sys.executable, "-c", load],
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}},
            }
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "burn",
                    "namespace": "gpu-team",
                    "labels": {"kueue.x-k8s.io/queue-name": "gpu-lq"},
                },
                "spec": {
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}
                },
            }
            r = post(c, job)
            assert r.status_code == 201, r.text
            path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/gpu-team/workloads"
            items = wait_for(lambda: c.get(path).json()["items"], "the Job's Workload")
            (wl,) = [w["metadata"]["name"] for w in items]
            seen: list[tuple[dict[str, str], float]] = []
            busy: tuple[dict[str, str], float] | None = None
            deadline = time.monotonic() + LOAD_SECONDS - 5
            while time.monotonic() < deadline and busy is None:
                seen = _series(c, "DCGM_FI_DEV_GPU_UTIL")
                busy = next(
                    (
                        (labels, value)
                        for labels, value in seen
                        if labels.get("namespace") == "gpu-team"
                        and labels.get("workload") == wl
                        and value >= 20.0
                    ),
                    None,
                )
                time.sleep(0.5)
            assert busy is not None, f"no GPU busy and held by {wl} in /metrics: {seen}"
            labels, value = busy
            print(f"GPU {labels['gpu']} {labels['modelName']} {labels['UUID']}: {value}% "
                  f"held by {labels['namespace']}/{labels['workload']} ({labels.get('pod')})")  # fmt: skip
            assert labels["UUID"].startswith(("GPU-", "MIG-")) and "fake" not in labels["UUID"]
            # the other GPUs (if any) are not shown as this workload's
            others = [lb for lb, _ in seen if lb["UUID"] != labels["UUID"]]
            assert all(lb.get("workload", "") != labels["workload"] for lb in others)
            # its memory (an 8192 x 8192 float32 operand and product, and the CUDA context) and,
            # where NVML has GPM, its SMs' activity show on the same GPU
            fb_mib = _of(_series(c, "DCGM_FI_DEV_FB_USED"), labels["UUID"])
            assert fb_mib is not None and fb_mib >= 512, fb_mib
            uuid = labels["UUID"]

            def sm_reading() -> tuple[float | None] | None:
                value = _of(_series(c, "DCGM_FI_PROF_SM_ACTIVE"), uuid)
                return (value,) if value is None or value > 0.1 else None

            (sm_active,) = wait_for(sm_reading, "SM activity above 0.1 (or no GPM reading)")
            print(f"  framebuffer used {fb_mib:.0f} MiB, SM active {sm_active}")
            c.delete("/apis/batch/v1/namespaces/gpu-team/jobs/burn")
    finally:
        srv.stop()
