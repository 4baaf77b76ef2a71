"""A runtime that runs nothing: it records what it was asked and reports what the test says.

``FakeRuntime`` implements the ``runtimes.base.Runtime`` protocol in memory. ``start`` pins the
pods' GPUs with the real allocator (so a start beyond the free GPUs is refused as the local
runtime refuses it), records the start and reports ``Started`` at the next ``poll``; ``stop``
records the stop and leaves the pods terminating until the test calls ``report_stopped`` (or
``report_exit`` for a workload that ended on its own), as a real runtime says ``Stopped`` only
once every process is gone. Tests inject it through ``runtimes.registry.register`` instead of
patching: it is the proof that a runtime is one module plus one registry entry. It never decides
anything and starts no process; calls may come from the engine's thread and the test's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaas.inventory.gpus import GpuDevice
from gpuaas.runtimes.base import (
    DEFAULT_BACKOFF_LIMIT,
    AlreadyRunning,
    EventKind,
    PodCpu,
    PodSpec,
    PodStatus,
    RuntimeEvent,
    RuntimeOptions,
    WorkloadRun,
)
from gpuaas.runtimes.gpus import GpuAllocator


@dataclass(slots=True)
class FakeRun:
    """One workload's pods as the fake holds them."""

    key: str
    pods: list[PodSpec]
    gpus: dict[str, tuple[int, ...]]
    restart_count: int
    stopping: bool = False


class FakeRuntime:
    def __init__(
        self,
        state_dir: Path,
        gpus: Sequence[GpuDevice] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_dir = state_dir
        self.starts: list[str] = []  # workload keys, in start order
        self.stops: list[str] = []  # workload keys, in stop order
        self.forgotten: list[str] = []
        self._gpu_count = len(gpus)
        self._allocator = GpuAllocator(gpus)
        self._clock = clock
        self._runs: dict[str, FakeRun] = {}
        self._events: list[RuntimeEvent] = []
        self._cpu: dict[tuple[str, str], PodCpu] = {}
        self._lock = threading.Lock()

    @classmethod
    def create(cls, options: RuntimeOptions) -> FakeRuntime:
        """A registry factory: the node's GPUs, state under ``options.state_dir``."""
        return cls(options.state_dir, options.node.gpus)

    # -- the Runtime protocol ---------------------------------------------------------------------
    def start(
        self,
        key: str,
        pods: list[PodSpec],
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        restart_count: int | None = None,
    ) -> None:
        with self._lock:
            if key in self._runs:
                raise AlreadyRunning(f"Workload {key}: already has pods on this node")
            gpus = self._allocator.allocate(key, [(p.name, p.gpus) for p in pods])
            count = restart_count if restart_count is not None else self.starts.count(key)
            self._runs[key] = FakeRun(key, list(pods), gpus, count)
            self.starts.append(key)
            self._emit(EventKind.STARTED, key, f"{len(pods)} pod(s)")

    def stop(self, key: str, grace_seconds: float | None = None) -> bool:
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                return False
            if not run.stopping:
                run.stopping = True
                self.stops.append(key)
            return True

    def poll(self) -> list[RuntimeEvent]:
        with self._lock:
            out, self._events = self._events, []
            return out

    def running(self) -> dict[str, WorkloadRun]:
        with self._lock:
            return {key: self._status(run) for key, run in self._runs.items()}

    def run_of(self, key: str) -> WorkloadRun | None:
        with self._lock:
            run = self._runs.get(key)
            return self._status(run) if run is not None else None

    def adopt(self) -> list[str]:
        return []  # nothing outlives a fake

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        with self._lock:
            run = self._runs.get(key)
            names = [p.name for p in run.pods if pod in (None, p.name)] if run else []
        return iter([f"fake pod {name} of {key}" for name in names])

    def shutdown(self, grace_seconds: float | None = None) -> None:
        with self._lock:
            for key in list(self._runs):
                self._gone(key, EventKind.STOPPED, "server stop")

    def forget(self, key: str) -> None:
        with self._lock:
            if key in self._runs:
                raise AlreadyRunning(f"Workload {key}: still has pods; stop it first")
            self.forgotten.append(key)

    def workload_dir(self, key: str) -> Path:
        ns, _, name = key.partition("/")
        return self.state_dir / ns / name

    def ray_records(self, key: str) -> dict[str, dict[str, Any]]:
        """None: the fake starts no Ray."""
        return {}

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        with self._lock:
            return self._allocator.owners()

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """The readings a test set with ``set_pod_cpu`` for pods that still run."""
        with self._lock:
            return {
                (key, pod): cpu
                for (key, pod), cpu in self._cpu.items()
                if key in self._runs and not self._runs[key].stopping
            }

    def set_pod_cpu(self, key: str, pod: str, cpu: PodCpu) -> None:
        """What ``pod_cpu`` reports for one pod of a running workload from now on."""
        with self._lock:
            self._cpu[(key, pod)] = cpu

    def describe(self) -> str:
        return f"fake: nothing runs; {self._gpu_count} GPU(s) pinned in memory"

    # -- what the test says happened ----------------------------------------------------------------
    def report_stopped(self, key: str) -> None:
        """Every pod of ``key`` is gone after a stop: ``Stopped`` at the next poll."""
        with self._lock:
            self._gone(key, EventKind.STOPPED, "terminated")

    def report_exit(self, key: str, succeeded: bool = True) -> None:
        """Every pod of ``key`` exited on its own: ``Succeeded`` or ``Failed`` at the next poll."""
        kind = EventKind.SUCCEEDED if succeeded else EventKind.FAILED
        with self._lock:
            self._gone(key, kind, "exited 0" if succeeded else "exited 1")

    # -- internals --------------------------------------------------------------------------------
    def _gone(self, key: str, kind: EventKind, message: str) -> None:
        run = self._runs.pop(key, None)
        if run is None:
            raise KeyError(f"Workload {key}: has no pods on the fake runtime")
        for pod in run.pods:
            self._allocator.release(key, pod.name)
        self._emit(kind, key, message)

    def _emit(self, kind: EventKind, key: str, message: str) -> None:
        self._events.append(RuntimeEvent(kind, key, self._clock(), message=message))

    def _status(self, run: FakeRun) -> WorkloadRun:
        phase = "Terminating" if run.stopping else "Running"
        pods = tuple(PodStatus(p.name, None, run.gpus.get(p.name, ()), 0, phase) for p in run.pods)
        return WorkloadRun(run.key, run.restart_count, run.stopping, pods)


def for_ray_driver(
    root: Path,
    address: str | None,
    taints: object,
    *,
    local_gpus: int | None = None,
    local_labels: object = None,
) -> FakeRuntime:
    """A fake built as ``RayRuntime`` is, for ``RayDriver(runtime="...:for_ray_driver")``: tests
    of the driver's degraded mode and reconnection, where no Ray cluster can start."""
    from gpuaas.inventory.gpus import parse_fake_gpus

    return FakeRuntime(root, parse_fake_gpus(str(local_gpus or 0)))
