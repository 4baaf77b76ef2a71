"""``gpuaas demo 001`` end to end: real JupyterLabs, a queued workbench admitted on a freed GPU.

Needs the ``workbench`` extra: skipped without it, mandatory under GPUAAS_REQUIRE_SERVICES=1."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuaas import demos

GPUAAS = [sys.executable, "-c", "from gpuaas.cli.main import main; main()"]
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_001_queues_and_admits_a_workbench(tmp_path: Path, require_service: Any) -> None:
    ok = importlib.util.find_spec("jupyterlab") is not None
    require_service("the workbench extra", ok, "jupyterlab is not installed")
    result = subprocess.run(
        [*GPUAAS, "demo", "001", "--headless", "--speed", "10", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    queued = out.index("workload private-ai/carol-workbench: Pending")
    idle = out.index("event IdleGPU private-ai/bob-workbench")
    stop = out.index("event IdleStopped private-ai/bob-workbench")
    running = out.index("workload private-ai/carol-workbench: Running")
    assert queued < idle < stop < running
    assert "bob's Notebook: kubeflow-resource-stopped=" in out
    assert "IdleGPU private-ai/alice-workbench" not in out  # her loop keeps her GPUs busy
    assert "position 1 of 1 in ClusterQueue rhoai-main-queue" in out
    for user in ("bob", "carol"):
        assert f"/workbenches/private-ai/{user}-workbench/lab?token=" in out
    assert out.rstrip().endswith("every process it started are gone")


def test_packaged_demo_profiles_are_valid() -> None:
    from gpuaas.core.hardware_profile import parse_hardware_profile

    docs = demos.manifests("001", "setup.yaml")
    profiles = [parse_hardware_profile(d) for d in docs if d["kind"] == "HardwareProfile"]
    assert [p.display_name for p in profiles] == ["NVIDIA L4 1GPU", "NVIDIA L4 2GPU"]
