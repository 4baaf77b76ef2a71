"""``gpuaas demo`` end to end, and the packaged demo files it depends on.

The demo runs headless in a child process with a real server and real processes; it must reach
the eviction and the audit trail, exit 0 and leave no pod process behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from gpuaas.cli.main import build_app
from gpuaas.runtimes.podstate import volatile_records

REPO = Path(__file__).resolve().parents[2]
CAST = REPO / "examples" / "004-jobs" / "gpu-preemption-demo.cast"
GPUAAS = [sys.executable, "-c", "from gpuaas.cli.main import main; main()"]


def _pods_alive(since: float) -> list[int]:
    found = []
    for p in psutil.process_iter(["environ", "create_time"]):
        try:
            env = p.info.get("environ") or {}
        except psutil.Error:
            continue
        # this session's pods only: other test runs (or xdist workers) may run team-* pods too
        ours = env.get("GPUAAS_WORKLOAD", "").startswith("team-") and env.get(
            "TESTS_GPUAAS_SESSION"
        ) == os.environ.get("TESTS_GPUAAS_SESSION")
        if ours and p.info["create_time"] >= since and p.status() != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


@pytest.mark.slow
def test_demo_runs_headless_to_the_end(tmp_path: Path) -> None:
    t0 = time.time() - 1
    result = subprocess.run(
        [*GPUAAS, "demo", "--headless", "--speed", "10", "--data-dir", str(tmp_path / "data"),
         "--record", str(tmp_path / "demo.cast")],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # the eviction as it happens, in causal order (events are printed in the order the server
    # recorded them; a poll may miss the short Evicting state, so it is not required):
    # evicted, then its process is gone, then the preemptor starts on its GPUs
    evicted = out.index("event EvictedDueToPreempted team-b/team-b-job")
    stopped = out.index("event Stopped team-b/team-b-job")
    started = out.index("event Started team-a/team-a-job")
    assert evicted < stopped < started
    assert "GPU 0,1" in out[started:].splitlines()[0]
    assert "workload team-a/team-a-job: Running" in out
    # the audit trail: describe of the evicted workload
    trail = out[out.index("== Audit trail") :]
    assert "Preempted       True     InCohortReclaimWhileBorrowing" in trail
    # the preemptor by its UIDs (Kueue's words), never by its name: it may be another tenant's
    assert "Preempted to accommodate a workload (UID: " in trail and "JobUID: " in trail
    preempted = [ln for ln in trail.splitlines() if "Preempted to accommodate" in ln]
    assert preempted and not any("team-a-job" in ln for ln in preempted)
    assert "EvictedDueToPreempted" in trail and "Stopped" in trail
    assert out.rstrip().endswith("every process it started are gone")
    assert _pods_alive(t0) == []
    assert not list(volatile_records(tmp_path / "data" / "runtime").rglob("pods/*.json"))
    lines = (tmp_path / "demo.cast").read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2 and len(lines) > 5


@pytest.mark.slow
def test_demo_piped_keeps_its_audit_trail(tmp_path: Path) -> None:
    """Piped (no terminal), the demo prints plain lines, audit trail included (issue 17)."""
    result = subprocess.run(
        [*GPUAAS, "demo", "--speed", "10", "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    trail = out[out.index("== Audit trail") :]
    assert "Preempted to accommodate a workload (UID: " in trail


def test_demo_list_shows_the_other_seeds() -> None:
    result = CliRunner().invoke(build_app(), ["demo", "--list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("004", "001", "003", "gpuaas demo 004", "gpuaas scenario run"):
        assert text in result.output
    if importlib.util.find_spec("ray") is None:
        assert "not available: needs the ray extra" in result.output


def test_a_demo_that_does_not_run_live_says_why() -> None:
    result = CliRunner().invoke(build_app(), ["demo", "003"])
    assert result.exit_code == 1 and "does not run live" in result.output
    result = CliRunner().invoke(build_app(), ["demo", "999"])
    assert result.exit_code == 1 and "no demo '999'" in result.output


@pytest.mark.parametrize("name", ["setup.yaml", "team-a-job.yaml", "team-b-job.yaml"])
def test_packaged_manifests_are_the_examples(name: str) -> None:
    packaged = REPO / "src" / "gpuaas" / "demos" / "004" / name
    assert packaged.read_text() == (REPO / "examples" / "004-jobs" / name).read_text()


def test_shipped_recording_is_asciinema_v2_and_shows_the_preemption() -> None:
    lines = CAST.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["width"] > 0 and header["height"] > 0
    frames = [json.loads(line) for line in lines[1:]]
    times = [f[0] for f in frames]
    assert times == sorted(times) and times[-1] < 30
    assert all(f[1] == "o" and isinstance(f[2], str) for f in frames)
    text = "".join(f[2] for f in frames)
    for needle in ("Evicting", "SIGTERM sent", "GPU 0,1", "Preempted to accommodate", "Audit"):
        assert needle in text
