"""Crash safety: pods outlive a crashed server and the next one re-adopts or cleans them up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from runtime_helpers import MakeRuntime, wait_for

from gpuaas.runtimes.base import AlreadyRunning, EventKind, PodSpec
from gpuaas.runtimes.podstate import volatile_records

CRASHING_SERVER = """
import os, sys
from gpuaas.inventory import parse_fake_gpus
from gpuaas.runtimes.base import PodSpec
from gpuaas.runtimes.local import LocalRuntime
rt = LocalRuntime(sys.argv[1], parse_fake_gpus("4"))
rt.start("ns/long", [PodSpec("long-0", ("sleep", "30"), gpus=2, termination_grace_seconds=1)])
rt.start("ns/short", [PodSpec("short-0", ("sh", "-c", "sleep 0.3; exit 4"), gpus=1)])
rt.start("ns/ok", [PodSpec("ok-0", ("true",), gpus=1)])
print("started", flush=True)
os.kill(os.getpid(), 9)
"""


def test_adopt_after_dropping_the_runtime(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    root = tmp_path / "rt"
    first = make_runtime(root=root)
    first.start("ns/a", [PodSpec("a-0", ("sleep", "30"), gpus=2, termination_grace_seconds=1)])
    first.start("ns/b", [PodSpec("b-0", ("sleep", "30"), gpus=1, termination_grace_seconds=1)])
    pids = {k: [p.pid for p in r.pods] for k, r in first.running().items()}
    first._runs.clear()  # the server goes away without stopping its pods

    second = make_runtime(root=root)
    with pytest.raises(AlreadyRunning, match="call adopt"):
        second.start("ns/a", [PodSpec("a-0", ("sleep", "30"))])
    assert second.adopt() == ["ns/a", "ns/b"]
    assert [e.kind for e in second.poll()] == [EventKind.ADOPTED, EventKind.ADOPTED]
    running = second.running()
    assert {k: [p.pid for p in r.pods] for k, r in running.items()} == pids
    assert second.gpu_owners() == {0: ("ns/a", "a-0"), 1: ("ns/a", "a-0"), 2: ("ns/b", "b-0")}
    # a new workload gets the GPU nobody holds
    second.start("ns/c", [PodSpec("c-0", ("sleep", "30"), gpus=1)])
    assert second.running()["ns/c"].pods[0].gpus == (3,)
    second.stop("ns/a")
    wait_for(second, EventKind.STOPPED, "ns/a")
    # gone, or a zombie for a moment: the first runtime's launcher forked them and reaps them
    assert all(_gone(p) for p in pids["ns/a"] if p)
    assert second.adopt() == []  # adopting twice adopts nothing


def test_adopt_after_a_real_crash(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    root = tmp_path / "rt"
    server = subprocess.run(
        [sys.executable, "-c", CRASHING_SERVER, str(root)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert server.returncode == -signal.SIGKILL and "started" in server.stdout
    long_pid = json.loads(
        (volatile_records(root) / "workloads/ns/long/pods/long-0.json").read_text()
    )["pid"]
    assert psutil.pid_exists(long_pid)
    time.sleep(0.6)  # ns/short fails and ns/ok succeeds while no server watches

    runtime = make_runtime(root=root)
    try:
        assert runtime.adopt() == ["ns/long", "ns/ok", "ns/short"]
        owners = runtime.gpu_owners()
        assert owners[0] == owners[1] == ("ns/long", "long-0")
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seen += [(e.kind, e.workload, e.exit_code) for e in runtime.poll()]
            if (EventKind.POD_RESTARTED, "ns/short", None) in seen:
                break
            time.sleep(0.01)
        # ns/ok finished while no server watched; ns/short's exit code came from the
        # wrapper's file, and the pod is retried within its backoffLimit
        assert (EventKind.SUCCEEDED, "ns/ok", None) in seen
        assert (EventKind.POD_FAILED, "ns/short", 4) in seen
        assert (EventKind.POD_RESTARTED, "ns/short", None) in seen
        runtime.stop("ns/short", 0)
        runtime.stop("ns/long")
        wait_for(runtime, EventKind.STOPPED, "ns/long")
        assert not psutil.pid_exists(long_pid) or (
            psutil.Process(long_pid).status() == psutil.STATUS_ZOMBIE
        )
    finally:
        _kill_leftovers(root)


def test_dead_leader_with_leftovers_is_cleaned_up(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    root = tmp_path / "rt"
    first = make_runtime(root=root)
    script = "(trap '' TERM; exec sleep 30) & echo $! > child.pid; wait"
    first.start("ns/w", [PodSpec("w-0", ("sh", "-c", script), gpus=1, working_dir=str(tmp_path))])
    pid_file = tmp_path / "child.pid"
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(pid_file.read_text())
    leader = first.running()["ns/w"].pods[0].pid
    assert leader is not None
    first._runs.clear()
    os.kill(leader, signal.SIGKILL)  # the wrapper dies; the child keeps the pod's GPU
    with contextlib.suppress(psutil.NoSuchProcess):  # reaped by the launcher that forked it
        psutil.Process(leader).wait(5)

    second = make_runtime(root=root)
    assert second.adopt() == ["ns/w"]
    _, seen = wait_for(second, EventKind.POD_RESTARTED, "ns/w")
    assert [e.exit_code for e in seen if e.kind == EventKind.POD_FAILED] == [137]
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_leftovers(root: Path) -> None:
    """The crashed server's pods are not our children: make sure none survives the test."""
    for path in volatile_records(root).glob("workloads/*/*/pods/*.json"):
        pid = json.loads(path.read_text()).get("pid")
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
