"""Images whose entrypoint is known run on the host with args alone: the Kubernetes perf-tests
sleep image of Kueue's samples and seed 002's Jobs (``args: ["600s"]``) runs as ``sleep 600s``;
any other image with args alone still runs the args (its entrypoint is unknown here)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Admission, PodSetAssignment
from gpuaas.runtimes.podspecs import build_run_plan


def _job(image: str, args: list[str]) -> dict[str, Any]:
    container = {"name": "c", "image": image, "args": args,
                 "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("image", "args", "argv"),
    [
        ("gcr.io/k8s-staging-perf-tests/sleep:v0.1.0", ["600s"], ["sleep", "600s"]),
        ("gcr.io/k8s-staging-perf-tests/sleep:v0.0.3", ["30s"], ["sleep", "30s"]),
        ("busybox:1.36", ["sleep", "5"], ["sleep", "5"]),
    ],
)
def test_known_entrypoints(image: str, args: list[str], argv: list[str]) -> None:
    wl = Workload("ns", "j", "lq", [PodSet("main", 1, {"cpu": 1000})], kind="Job")
    adm = Admission("cq", [PodSetAssignment("main", {"cpu": "f"}, 1, {})])
    [pod] = build_run_plan(wl, adm, _job(image, args)).pods
    assert pod.argv == argv
