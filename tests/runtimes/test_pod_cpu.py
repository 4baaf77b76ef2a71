"""``LocalRuntime.pod_cpu``: the CPU time of each running pod's process tree, read-only, for the
telemetry that reads GPU load from it where NVML is missing."""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime_helpers import wait_for

from gpuaas.runtimes.base import EventKind, PodSpec
from gpuaas.runtimes.local import LocalRuntime

# A child burns CPU and exits (the wrapper reaps it), then the pod only sleeps.
BURN_THEN_SLEEP = "(i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done); echo burnt; exec sleep 30"


def until(what: Callable[[], bool], runtime: LocalRuntime, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        runtime.poll()
        time.sleep(0.05)


def test_reaped_children_count_and_a_sleeping_pod_adds_nothing(runtime: LocalRuntime) -> None:
    runtime.start("ns/w", [PodSpec("w-0", ("sh", "-c", BURN_THEN_SLEEP), gpus=1)])
    until(lambda: list(runtime.logs("ns/w")) == ["burnt"], runtime)
    first = runtime.pod_cpu()[("ns/w", "w-0")]
    # the loop ran in a child that is gone: its time is kept in its reaper's children times
    assert first.cpu_seconds > 0.1
    assert first.started_at <= first.read_at and first.processes >= 2
    assert first.rss_bytes > 0
    time.sleep(0.5)
    second = runtime.pod_cpu()[("ns/w", "w-0")]
    assert second.started_at == first.started_at and second.read_at > first.read_at
    used = second.cpu_seconds - first.cpu_seconds
    assert 0 <= used < 0.05  # sleeping: about nothing


def test_only_running_pods_are_read(runtime: LocalRuntime) -> None:
    runtime.start("ns/a", [PodSpec("a-0", ("sleep", "30"), gpus=1)])
    runtime.start("ns/done", [PodSpec("done-0", ("true",))])
    wait_for(runtime, EventKind.SUCCEEDED, "ns/done")
    until(lambda: ("ns/a", "a-0") in runtime.pod_cpu(), runtime)
    assert set(runtime.pod_cpu()) == {("ns/a", "a-0")}
    runtime.stop("ns/a", grace_seconds=0)
    assert runtime.pod_cpu() == {}  # stopping: its load no longer says anything
    wait_for(runtime, EventKind.STOPPED, "ns/a")
