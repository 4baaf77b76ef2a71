"""GPU pinning invariant with real processes: no GPU is ever visible to two live pods.

Fifty workloads with random pod and GPU counts start and stop in a seeded random order. After
every step the test reads ``CUDA_VISIBLE_DEVICES`` from the environment of each live pod's
command (``/proc/<pid>/environ`` of its leader's child: a leader forked by the pod launcher shows
the launcher's environment), so it checks what the processes really got, not what the allocator
believes.
"""

from __future__ import annotations

import random
import time

import psutil
from runtime_helpers import MakeRuntime

from gpuaas.runtimes.base import EventKind, NotEnoughGpus, PodSpec
from gpuaas.runtimes.local import LocalRuntime

GPUS = 8


def live_pinning(runtime: LocalRuntime) -> dict[int, list[str]]:
    """GPU index -> pods whose live process sees it."""
    seen: dict[int, list[str]] = {}
    for key, run in runtime.running().items():
        for pod in run.pods:
            if pod.pid is None or pod.phase != "Running":
                continue
            env = _environ(pod.pid)
            if env is None:
                continue
            assert env["GPUAAS_WORKLOAD"] == key
            visible = env["CUDA_VISIBLE_DEVICES"]
            indices = [int(i) for i in visible.split(",")] if visible else []
            assert tuple(indices) == pod.gpus
            for index in indices:
                seen.setdefault(index, []).append(f"{key}/{pod.name}")
    return seen


def _environ(leader: int) -> dict[str, str] | None:
    """The environment of the pod's command (its leader's child, once it carries the pod's
    token): the child may not exist yet, and until it execs the command it is a copy of the
    leader, with the launcher's environment, so wait for both (a deadline for a loaded machine:
    it is seldom more than a few milliseconds)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            children = psutil.Process(leader).children()
            env = children[0].environ() if children else {}
        except psutil.NoSuchProcess:
            return None
        if "GPUAAS_POD_UID" in env or time.monotonic() > deadline:
            return env
        time.sleep(0.005)


def test_no_gpu_overlap_across_50_random_workloads(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime(gpus=str(GPUS))
    rng = random.Random(20240601)
    pending = [f"ns/w{i}" for i in range(50)]
    started: list[str] = []
    refused = 0
    while pending or started:
        if pending and (not started or rng.random() < 0.6):
            key = pending.pop()
            pods = [
                PodSpec(
                    f"p-{i}",
                    ("sleep", "30"),
                    gpus=rng.choice([0, 1, 1, 2, 3]),
                    termination_grace_seconds=1,
                )
                for i in range(rng.randint(1, 3))
            ]
            try:
                runtime.start(key, pods)
                started.append(key)
            except NotEnoughGpus:
                refused += 1
        else:
            key = started.pop(rng.randrange(len(started)))
            runtime.stop(key, grace_seconds=rng.choice([0, 1]))
        runtime.poll()
        pinning = live_pinning(runtime)
        assert all(len(pods) == 1 for pods in pinning.values()), pinning
        owners = runtime.gpu_owners()
        assert set(pinning) <= set(owners)
        # deterministic lowest-free-first: free GPUs are exactly the ones nobody owns
        assert sorted(set(range(GPUS)) - set(owners)) == sorted(
            i for i in range(GPUS) if i not in owners
        )
    deadline = time.monotonic() + 10
    while runtime.running() and time.monotonic() < deadline:
        runtime.poll()
        time.sleep(0.02)
    assert runtime.running() == {} and runtime.gpu_owners() == {}
    assert refused < 50  # the scenario did run workloads


def test_lowest_free_gpus_first(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime(gpus="4")
    runtime.start("ns/a", [PodSpec("p", ("sleep", "30"), gpus=1)])
    runtime.start("ns/b", [PodSpec("p", ("sleep", "30"), gpus=2)])
    runtime.stop("ns/a", grace_seconds=0)
    while "ns/a" in runtime.running():
        runtime.poll()
        time.sleep(0.01)
    runtime.start("ns/c", [PodSpec("p", ("sleep", "30"), gpus=2)])
    assert [p.gpus for p in runtime.running()["ns/c"].pods] == [(0, 3)]
    runtime.stop("ns/b", 0)
    runtime.stop("ns/c", 0)
    for _ in range(200):
        if not runtime.running():
            break
        events = runtime.poll()
        assert all(e.kind in (EventKind.STARTED, EventKind.STOPPED) for e in events)
        time.sleep(0.01)
