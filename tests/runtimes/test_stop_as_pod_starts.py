"""A stop that comes as a pod starts reaches its command, however early it comes.

A pod's leader (``pod_init``; a Ray pod's ``ray_podproc``) takes SIGTERM over just before it
creates the command. A SIGTERM to the pod's group in between reached the leader alone and was
lost: the command, created a moment later, ran until the SIGKILL at the end of its grace period.
These tests stop each pod in that instant: they watch the leader take SIGTERM over, then stop the
pod at once, while the leader turns a large environment (or argument list) into the command's,
which makes the instant a few milliseconds long. Each pod's grace is an hour, so its exit code
143 (SIGTERM) within the wait's deadline says the stop reached the command; a lost stop shows as
no end at all. Checked: with the stop sent at once again, every attempt but the odd one is lost.
"""

from __future__ import annotations

import secrets
import threading
import time

import pytest
from runtime_helpers import wait_for

from gpuaas.runtimes.base import EventKind, PodSpec
from gpuaas.runtimes.local import LocalRuntime
from gpuaas.runtimes.ray_actor import RunningPod

ATTEMPTS = 5
# 60,000 variables (or arguments) take the leader a few milliseconds to hand on, well within
# the kernel's limit on what an exec carries (ARG_MAX, 2 MiB here).
_FILLER_ENV = tuple((f"F{i}", "x") for i in range(60_000))
_FILLER_ARGS = ("0",) * 60_000  # sleep adds its operands up: 3600 + 0 + 0 ...


def _sigterm_taken(pid: int) -> bool:
    """Whether ``pid`` handles or ignores SIGTERM (its leader took it over); True once it is
    gone too, so the wait ends."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        return True
    mask = int(fields["SigCgt"], 16) | int(fields["SigIgn"], 16)
    return bool(mask & (1 << (15 - 1)))


def _until_sigterm_taken(pid: int) -> None:
    deadline = time.monotonic() + 10.0
    while not _sigterm_taken(pid):  # no sleep: the instant after it is what is tested
        assert time.monotonic() < deadline, f"leader {pid} never took SIGTERM over"


def test_a_stop_as_the_leader_takes_sigterm_over_reaches_the_command(
    runtime: LocalRuntime,
) -> None:
    for attempt in range(ATTEMPTS):
        key = f"ns/early-{attempt}"
        pod = PodSpec("p-0", ("sleep", "3600"), env=_FILLER_ENV, termination_grace_seconds=3600.0)
        runtime.start(key, [pod])
        pid = runtime.running()[key].pods[0].pid
        assert pid is not None
        _until_sigterm_taken(pid)
        assert runtime.stop(key)
        stopped, _ = wait_for(runtime, EventKind.STOPPED, key)
        assert "exit codes [143]" in stopped.message, (attempt, stopped.message)


@pytest.mark.parametrize("wait_for_takeover", [True, False], ids=["as-taken-over", "at-once"])
def test_a_ray_pods_stop_as_its_leader_starts_reaches_the_command(wait_for_takeover: bool) -> None:
    # at-once: the stop comes while the leader's Python starts, and waits in the pod's thread
    # for the command, which then gets it.
    changed = threading.Condition()
    for attempt in range(ATTEMPTS):
        pod = RunningPod(
            f"early-{secrets.token_hex(4)}-{attempt}",
            ["sleep", "3600", *_FILLER_ARGS],
            {},
            None,
            [],
            "node-a",
            changed,
            lambda: None,
        )
        try:
            assert pod.pid is not None
            if wait_for_takeover:
                _until_sigterm_taken(pod.pid)
            pod.terminate(3600.0)
            deadline = time.monotonic() + 10.0
            with changed:
                while not pod.gone and time.monotonic() < deadline:
                    changed.wait(0.1)
            assert pod.gone, f"attempt {attempt}: the pod did not stop on its SIGTERM"
            assert pod.code == 143, (attempt, pod.code)
        finally:
            pod.terminate(0.0)
            pod.log_path.unlink(missing_ok=True)
