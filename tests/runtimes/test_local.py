"""The local runtime with real processes: environment, exits, retries, stops, logs, limits."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psutil
import pytest
from runtime_helpers import MakeRuntime, sh, wait_for

from gpuaas.runtimes.base import (
    AlreadyRunning,
    EventKind,
    NotEnoughGpus,
    PodSpec,
    RuntimeRequestError,
)
from gpuaas.runtimes.local import LocalRuntime

ENV_DUMP = (
    "sh",
    "-c",
    'echo "$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES|$GPUAAS_WORKLOAD|$GPUAAS_POD|'
    '$GPUAAS_RESTART_COUNT|$GREETING|$(pwd)"',
)


def test_pod_environment_and_success(runtime: LocalRuntime, tmp_path: Path) -> None:
    pods = [
        PodSpec("j-0", ENV_DUMP, env=(("GREETING", "hi"),), gpus=2, working_dir=str(tmp_path)),
        PodSpec("j-1", ENV_DUMP, gpus=0),
    ]
    runtime.start("team-a/j", pods)
    wait_for(runtime, EventKind.SUCCEEDED, "team-a/j")
    lines = sorted(runtime.logs("team-a/j"))
    uuids = "GPU-fake-0000-0000-0000-000000000000,GPU-fake-0001-0000-0000-000000000000"
    assert lines == [
        f"[j-0] 0,1|{uuids}|team-a/j|j-0|0|hi|{tmp_path}",
        f"[j-1] |void|team-a/j|j-1|0||{Path.cwd()}",
    ]
    assert runtime.running() == {} and runtime.gpu_owners() == {}


def test_pod_env_cannot_override_gpu_pinning(runtime: LocalRuntime) -> None:
    pod = PodSpec("p-0", ENV_DUMP, env=(("CUDA_VISIBLE_DEVICES", "0,1,2,3"),), gpus=1)
    runtime.start("ns/w", [pod])
    wait_for(runtime, EventKind.SUCCEEDED, "ns/w")
    assert next(iter(runtime.logs("ns/w"))).startswith("0|GPU-fake-0000")


def test_backoff_limit_retries_then_fails(runtime: LocalRuntime) -> None:
    runtime.start("ns/flaky", [sh("echo try $GPUAAS_POD_RETRY; exit 3")], backoff_limit=2)
    failed, seen = wait_for(runtime, EventKind.FAILED, "ns/flaky")
    kinds = [e.kind for e in seen if e.workload == "ns/flaky"]
    assert kinds.count(EventKind.POD_RESTARTED) == 2
    assert [e.exit_code for e in seen if e.kind == EventKind.POD_FAILED] == [3, 3, 3]
    assert list(runtime.logs("ns/flaky")) == ["try 0", "try 1", "try 2"]
    assert "3 failure(s)" in failed.message


def test_retry_succeeds_within_backoff_limit(runtime: LocalRuntime, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    script = f"[ -e {marker} ] && exit 0; touch {marker}; exit 1"
    runtime.start("ns/second-time", [sh(script)], backoff_limit=1)
    _, seen = wait_for(runtime, EventKind.SUCCEEDED, "ns/second-time")
    assert [e.kind for e in seen].count(EventKind.POD_RESTARTED) == 1


def test_failure_past_backoff_stops_the_other_pods(runtime: LocalRuntime) -> None:
    # w-0 fails at once, so w-1 is stopped as it starts, perhaps before its command exists: the
    # stop waits for the command (docs/runtime.md, "Preemption"). Its grace is an hour, so a
    # SIGTERM lost on the way would show as no end at all.
    pods = [
        sh("exit 1", "w-0"),
        PodSpec("w-1", ("sleep", "3600"), termination_grace_seconds=3600.0),
    ]
    runtime.start("ns/w", pods, backoff_limit=0)
    failed, _ = wait_for(runtime, EventKind.FAILED, "ns/w")
    assert "exit codes [1, 143]" in failed.message  # the sleeper got SIGTERM


def test_stop_ignoring_sigterm_is_killed_after_grace(runtime: LocalRuntime) -> None:
    # How each pod ended is read from its exit code, not from a clock: 143 is SIGTERM, 137 is
    # SIGKILL. The polite pod's grace is an hour, so its Stopped within wait_for's deadline
    # says it stopped on SIGTERM, not at the end of its grace.
    stubborn = sh("trap '' TERM; echo ready; sleep 30", "s-0", termination_grace_seconds=1.0)
    polite = sh("echo ready; exec sleep 30", termination_grace_seconds=3600.0)
    runtime.start("ns/stubborn", [stubborn])
    runtime.start("ns/polite", [polite])
    # Both commands run before the stop: the stubborn one's trap is set, so it ignores SIGTERM
    # (a shell stopped before it reads its trap ends on SIGTERM, as it should).
    _wait_log(runtime, "ns/stubborn", "ready")
    _wait_log(runtime, "ns/polite", "ready")
    started = time.monotonic()
    assert runtime.stop("ns/stubborn") and runtime.stop("ns/polite")
    assert runtime.running()["ns/stubborn"].pods[0].phase == "Terminating"
    polite_stopped, _ = wait_for(runtime, EventKind.STOPPED, "ns/polite")
    stubborn_stopped, _ = wait_for(runtime, EventKind.STOPPED, "ns/stubborn")
    # A lower bound only (a loaded machine makes it later, never earlier): the SIGKILL waited
    # for terminationGracePeriodSeconds.
    assert time.monotonic() - started >= 0.9, "SIGKILL came before terminationGracePeriodSeconds"
    assert "exit codes [143]" in polite_stopped.message, polite_stopped.message
    assert "exit codes [137]" in stubborn_stopped.message, stubborn_stopped.message
    assert runtime.gpu_owners() == {}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone between the lookup and the read of its status
        return False


def test_stop_kills_what_outlives_the_leader_before_saying_stopped(runtime: LocalRuntime) -> None:
    # The child ignores SIGTERM, the pod's main process exits on it. As when a container's main
    # process exits, the rest is killed; Stopped comes only once the child is gone too.
    # The child and the pod's grace last an hour: a child not killed when the main process
    # exits is still alive at the deadline.
    script = "(trap '' TERM; exec sleep 3600) & echo $! > child.pid; wait"
    workdir = str(runtime._dir.root)
    pod = PodSpec(
        "t-0", ("sh", "-c", script), gpus=1, termination_grace_seconds=3600.0, working_dir=workdir
    )
    runtime.start("ns/tree", [pod])
    pid_file = runtime._dir.root / "child.pid"
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 20
    runtime.stop("ns/tree")
    while True:
        events = runtime.poll()
        alive = _alive(child)
        if any(e.kind == EventKind.STOPPED for e in events):
            assert not alive, "Stopped while a process of the pod was still alive"
            break
        if alive:
            assert runtime.gpu_owners() == {0: ("ns/tree", "t-0")}
        assert time.monotonic() < deadline, "the leftover child was not killed"
        time.sleep(0.01)
    assert runtime.gpu_owners() == {}


def test_stop_with_grace_zero_kills_at_once(runtime: LocalRuntime) -> None:
    # The pod ignores SIGTERM and has an hour of grace: only a SIGKILL at once (137) stops it
    # within wait_for's deadline.
    runtime.start(
        "ns/w", [sh("trap '' TERM; echo ready; sleep 30", termination_grace_seconds=3600)]
    )
    _wait_log(runtime, "ns/w", "ready")
    runtime.stop("ns/w", grace_seconds=0)
    stopped, _ = wait_for(runtime, EventKind.STOPPED, "ns/w")
    assert "exit codes [137]" in stopped.message, stopped.message


def test_requeue_increments_restart_count(runtime: LocalRuntime) -> None:
    pod = PodSpec(
        "p-0",
        ("sh", "-c", "echo restart=$GPUAAS_RESTART_COUNT; exec sleep 30"),
        termination_grace_seconds=1,
    )
    for expected in range(3):
        runtime.start("ns/w", [pod])
        _wait_log(runtime, "ns/w", f"restart={expected}")
        assert runtime.running()["ns/w"].restart_count == expected
        runtime.stop("ns/w")
        wait_for(runtime, EventKind.STOPPED, "ns/w")
    runtime.start("ns/w", [pod], restart_count=7)
    _wait_log(runtime, "ns/w", "restart=7")


def test_logs_follow_streams_until_the_pod_ends(runtime: LocalRuntime) -> None:
    runtime.start("ns/w", [sh("for i in 1 2 3; do echo line $i; sleep 0.2; done")])
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(runtime.logs("ns/w", follow=True)))
    reader.start()
    time.sleep(0.1)
    assert got == ["line 1"] or got == []  # follow started while the pod still runs
    wait_for(runtime, EventKind.SUCCEEDED, "ns/w")
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert got == ["line 1", "line 2", "line 3"]
    assert list(runtime.logs("ns/w", pod="p-0")) == got
    with pytest.raises(RuntimeRequestError, match="no pod 'nope'"):
        list(runtime.logs("ns/w", pod="nope"))


def test_stderr_is_captured_with_stdout(runtime: LocalRuntime) -> None:
    runtime.start("ns/w", [sh("echo out; echo err >&2; exit 0")])
    wait_for(runtime, EventKind.SUCCEEDED, "ns/w")
    assert list(runtime.logs("ns/w")) == ["out", "err"]


def test_missing_command_fails_like_a_container(runtime: LocalRuntime) -> None:
    runtime.start("ns/w", [PodSpec("p-0", ("no-such-command-gpuaas",))], backoff_limit=0)
    _, seen = wait_for(runtime, EventKind.FAILED, "ns/w")
    assert {e.exit_code for e in seen if e.kind == EventKind.POD_FAILED} == {127}


@pytest.mark.parametrize(
    ("key", "pods", "error", "match"),
    [
        ("nokey", [PodSpec("a", ("true",))], RuntimeRequestError, "namespace/name"),
        ("ns/w", [], RuntimeRequestError, "no pods"),
        ("ns/w", [PodSpec("a", ("true",)), PodSpec("a", ("true",))], RuntimeRequestError, "unique"),
        (
            "ns/w",
            [PodSpec("a", ("true",), working_dir="/no/such/dir")],
            RuntimeRequestError,
            "workingDir /no/such/dir",
        ),
        (
            "ns/w",
            [PodSpec("a", ("true",), gpus=3), PodSpec("b", ("true",), gpus=2)],
            NotEnoughGpus,
            "request 5 GPU",
        ),
    ],
)
def test_start_refuses_and_takes_nothing(
    runtime: LocalRuntime, key: str, pods: list[PodSpec], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        runtime.start(key, pods)
    assert runtime.running() == {} and runtime.gpu_owners() == {}


def test_no_workload_runs_twice(runtime: LocalRuntime) -> None:
    runtime.start("ns/w", [PodSpec("p-0", ("sleep", "30"))])
    with pytest.raises(AlreadyRunning, match="ns/w"):
        runtime.start("ns/w", [PodSpec("p-0", ("sleep", "30"))])


def test_limits_are_reported(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime()
    if not runtime.limits.enforced:
        assert runtime.limits.note.startswith("limits not enforced: ")
    off = make_runtime(root=runtime._dir.root.parent / "other", enforce_limits=False)
    assert off.limits.note == "limits not enforced: disabled by configuration"


def test_shutdown_leaves_nothing(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime()
    for i in range(3):
        runtime.start(f"ns/w{i}", [PodSpec("p-0", ("sleep", "30"), gpus=1)])
    pids = [p.pid for run in runtime.running().values() for p in run.pods]
    runtime.shutdown(grace_seconds=1)
    assert runtime.running() == {} and runtime.gpu_owners() == {}
    assert not [p for p in pids if p and psutil.pid_exists(p)]
    assert os.listdir(runtime._dir.pods_dir("ns/w0")) == []


def _wait_log(runtime: LocalRuntime, key: str, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in runtime.logs(key)):
            return
        runtime.poll()
        time.sleep(0.02)
    raise AssertionError(f"{text!r} not in the logs of {key}: {list(runtime.logs(key))}")


def test_stop_also_kills_processes_that_left_the_pod_group(runtime: LocalRuntime) -> None:
    """A child that ran setsid (as Ray's workers do) is still the pod's: stopped with it."""
    runtime.start("ns/escape", [sh("setsid sleep 60 & exec sleep 60")])
    deadline = time.monotonic() + 10
    escaped: list[psutil.Process] = []
    while time.monotonic() < deadline and not escaped:
        escaped = [
            p
            for p in psutil.process_iter(["cmdline", "environ"])
            if p.info["cmdline"] == ["sleep", "60"]
            and os.getsid(p.pid) == p.pid
            and any(
                k == "GPUAAS_WORKLOAD" and v == "ns/escape"
                for k, v in (p.info["environ"] or {}).items()
            )
        ]
        time.sleep(0.05)
    assert escaped, "the setsid child did not start"
    runtime.stop("ns/escape", 1)
    wait_for(runtime, EventKind.STOPPED, "ns/escape")
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in escaped)


def test_a_command_is_looked_up_on_the_pods_own_path(runtime: LocalRuntime, tmp_path: Path) -> None:
    """The command is found on the pod's ``PATH`` (as a container runtime does), not the
    server's, and sees the pod's environment, whichever way its leader started (a forked one
    gets both without rebuilding its own environment)."""
    bin_dir = tmp_path / "pod-bin"
    bin_dir.mkdir()
    tool = bin_dir / "only-on-pod-path"
    tool.write_text('#!/bin/sh\necho "found $GREETING"\n')
    tool.chmod(0o755)
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    pod = PodSpec("p-0", ("only-on-pod-path",), env=(("PATH", path), ("GREETING", "hi")))
    runtime.start("ns/w", [pod])
    wait_for(runtime, EventKind.SUCCEEDED, "ns/w")
    assert list(runtime.logs("ns/w")) == ["found hi"]
    runtime.start("ns/v", [PodSpec("p-0", ("only-on-pod-path",))])  # the server's PATH: not there
    _, seen = wait_for(runtime, EventKind.FAILED, "ns/v")
    assert {e.exit_code for e in seen if e.kind == EventKind.POD_FAILED} == {127}
    assert any("only-on-pod-path" in line for line in runtime.logs("ns/v"))


def test_running_hands_out_snapshots_that_later_changes_leave_alone(
    runtime: LocalRuntime,
) -> None:
    """``running()`` answers the same mapping until something changes, and a new one after:
    one already handed out (the API reads it on another thread) never changes under its
    reader, neither by a new workload nor by a stop."""
    runtime.start("ns/a", [sh("sleep 30", name="a-0")])
    first = runtime.running()
    assert runtime.running() is first  # nothing changed: no copy
    runtime.start("ns/b", [sh("sleep 30", name="b-0")])
    second = runtime.running()
    assert list(first) == ["ns/a"] and list(second) == ["ns/a", "ns/b"]
    runtime.stop("ns/a", grace_seconds=30)
    third = runtime.running()
    assert third["ns/a"].stopping and not second["ns/a"].stopping
    assert list(second) == ["ns/a", "ns/b"]


def test_run_of_says_what_running_says_without_a_snapshot(runtime: LocalRuntime) -> None:
    """``run_of(key)`` is ``running().get(key)`` in every state, also while the snapshot is
    behind (read from the run itself then, and the snapshot is left to be rebuilt later)."""
    assert runtime.run_of("ns/a") is None
    runtime.start("ns/a", [sh("sleep 30", name="a-0")])
    behind = runtime.run_of("ns/a")  # before anyone asked running(): the snapshot is stale
    assert behind is not None and [p.name for p in behind.pods] == ["a-0"]
    assert behind == runtime.running()["ns/a"]
    runtime.start("ns/b", [sh("sleep 30", name="b-0")])
    runtime.stop("ns/a", grace_seconds=30)
    a, b = runtime.run_of("ns/a"), runtime.run_of("ns/b")
    assert a is not None and a.stopping and b is not None and not b.stopping
    assert (a, b) == (runtime.running()["ns/a"], runtime.running()["ns/b"])
    assert runtime.run_of("ns/b") is runtime.running()["ns/b"]  # caught up: the snapshot's
    assert runtime.run_of("ns/nope") is None
