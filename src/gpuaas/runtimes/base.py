"""The runtime port: how the engine makes admitted workloads run and evicted ones stop.

This module owns the contract between the engine and any runtime (local processes, Ray,
Kubernetes): the ``PodSpec`` a runtime starts, the ``RuntimeEvent`` it reports, and the
``Runtime`` protocol, and the ``RuntimeOptions`` every runtime is built from (``runtimes.registry``
picks the runtime by name). It holds no processes and no policy; runtimes never decide admission,
they only carry out the engine's decisions and say when pods are really gone, because Kueue
releases an evicted workload's quota only once its pods have terminated.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gpuaas.core.objects import Toleration
from gpuaas.inventory.node import NodeInventory

DEFAULT_GRACE_SECONDS = 30.0
DEFAULT_BACKOFF_LIMIT = 6


class RuntimeRequestError(Exception):
    """A runtime refused a request; the message names the workload and the reason."""


class NotEnoughGpus(RuntimeRequestError):
    """The node has fewer free GPUs than the workload's pods request."""


class RuntimeUnavailable(RuntimeRequestError):
    """The runtime cannot be reached now (the Ray head is lost): pods wait, as for a node."""


class AlreadyRunning(RuntimeRequestError):
    """The workload already has pods on this node: no workload runs twice."""


@dataclass(slots=True, frozen=True)
class PodSpec:
    """One pod to run: the first container's command and args, and the pod's requests."""

    name: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str | None = None
    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0
    termination_grace_seconds: float = DEFAULT_GRACE_SECONDS
    image: str | None = None  # used only when a container engine is configured
    pod_set: str = "main"
    # Where the pod may go, for runtimes that place pods on many nodes (Ray): the admitted
    # flavors' nodeLabels plus the pod's nodeSelector, and the pod's plus the flavors' tolerations.
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]


class EventKind(StrEnum):
    STARTED = "Started"  # every pod of the workload has a process
    POD_FAILED = "PodFailed"  # one pod exited non-zero and will be retried
    POD_RESTARTED = "PodRestarted"  # a failed pod runs again (backoffLimit not reached)
    SUCCEEDED = "Succeeded"  # every pod exited 0; the workload is finished
    FAILED = "Failed"  # backoffLimit exceeded and every pod is gone
    STOPPED = "Stopped"  # after stop(): every process of every pod is gone
    ADOPTED = "Adopted"  # after a restart: live pods re-attached


@dataclass(slots=True, frozen=True)
class RuntimeEvent:
    kind: EventKind
    workload: str  # namespace/name
    time: float
    pod: str | None = None
    exit_code: int | None = None
    message: str = ""


@dataclass(slots=True, frozen=True)
class PodStatus:
    name: str
    pid: int | None
    gpus: tuple[int, ...]
    restarts: int  # failed attempts of this pod, retried within the backoffLimit
    phase: str  # Pending, Running, Succeeded, Failed, Terminating
    exit_code: int | None = None
    # What the API's v1 Pod shows (kubectl get pods): the pod set it belongs to, the node it runs
    # on ("" for this server's node), when its current attempt started and, once it is being
    # stopped, when it will be killed (Kubernetes' deletionTimestamp: the end of its grace).
    pod_set: str = ""
    node: str = ""
    started: float | None = None
    kill_at: float | None = None


@dataclass(slots=True, frozen=True)
class WorkloadRun:
    key: str
    restart_count: int  # how many times the workload was started before (requeues)
    stopping: bool
    pods: tuple[PodStatus, ...] = field(default_factory=tuple)


@dataclass(slots=True, frozen=True)
class PodCpu:
    """What a pod's processes used, for telemetry where no GPU reports a load (no NVML).

    ``cpu_seconds``: user + system time of the pod's processes since it started (reaped children
    included); ``rss_bytes``: their resident memory now; ``started_at``/``read_at``: when the pod's
    leader started and when this was read, both epoch seconds on the runtime's host clock.
    """

    cpu_seconds: float
    rss_bytes: int
    started_at: float
    read_at: float
    processes: int = 1


@dataclass(slots=True, frozen=True)
class RuntimeOptions:
    """What the server knows when it builds a runtime: the same for every runtime."""

    state_dir: Path  # the runtime's own directory (pod records, logs); it may create it
    node: NodeInventory  # this node: GPUs to pin, labels and taints
    ray_address: str | None = None  # the Ray runtime: the cluster to join (None: start one here)
    ray_nodes: Path | None = None  # the Ray runtime: taints per Ray node name (YAML)


@runtime_checkable
class Runtime(Protocol):
    """What the engine needs from a runtime. Calls come from one thread (the engine's loop)."""

    def start(
        self,
        key: str,
        pods: list[PodSpec],
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        restart_count: int | None = None,
    ) -> None:
        """Run every pod now; raises ``NotEnoughGpus`` or ``AlreadyRunning`` and starts nothing."""
        ...

    def stop(self, key: str, grace_seconds: float | None = None) -> bool:
        """Ask every pod to terminate (SIGTERM, then SIGKILL after the grace period).

        Returns False if the workload has no pods here. ``STOPPED`` comes from ``poll`` later.
        """
        ...

    def poll(self) -> list[RuntimeEvent]:
        """Reap exits, retry failed pods, escalate overdue stops; report what happened."""
        ...

    def running(self) -> Mapping[str, WorkloadRun]:
        """Workloads that still have pods (running or terminating), by namespace/name: a
        snapshot the caller reads and never changes (a runtime may hand out the same one until
        something changes)."""
        ...

    def run_of(self, key: str) -> WorkloadRun | None:
        """One workload's pods as ``running()`` would show them (None: it has none here),
        without a snapshot of every workload: what the bridge asks at each pod's start."""
        ...

    def adopt(self) -> list[str]:
        """After a restart: re-attach live pods from the state dir, clean up dead ones."""
        ...

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        """Captured stdout and stderr, line by line; ``follow`` waits for more until pods end."""
        ...

    def shutdown(self, grace_seconds: float | None = None) -> None:
        """Graceful server stop: stop every workload and wait until its processes are gone."""
        ...

    def forget(self, key: str) -> None:
        """Delete a finished workload's records and logs (the engine deleted the workload).

        Raises ``AlreadyRunning`` while the workload still has pods here.
        """
        ...

    def workload_dir(self, key: str) -> Path:
        """The workload's directory; its pods may share files under it (a Ray head's address)."""
        ...

    def ray_records(self, key: str) -> dict[str, dict[str, Any]]:
        """The records ``ray_pod`` keeps for ``key``'s RayCluster pods (the head's address and
        ports, each node's readiness, a RayJob's end) by name, wherever those pods run."""
        ...

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        """GPU index -> (workload key, pod) for every GPU a pod of this runtime holds now."""
        ...

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """(workload key, pod) -> what the pod's processes used, for every running pod whose
        processes this runtime can read (read-only; empty where it can read none)."""
        ...

    def describe(self) -> str:
        """One line for the server's start-up output: where pods run, what is enforced."""
        ...


def check_pods(key: str, pods: list[PodSpec]) -> None:
    """What every runtime refuses before starting anything: a bad key, no pods, duplicate or
    empty pod names, a pod without a command."""
    namespace, _, name = key.partition("/")
    if not namespace or not name or "/" in name:
        raise RuntimeRequestError(f"workload key {key!r}: must be namespace/name")
    if not pods:
        raise RuntimeRequestError(f"Workload {key}: no pods to run")
    names = [p.name for p in pods]
    if len(set(names)) != len(names) or any(not n or "/" in n for n in names):
        raise RuntimeRequestError(
            f"Workload {key}: pod names must be unique and non-empty: {names}"
        )
    for pod in pods:
        if not pod.command:
            raise RuntimeRequestError(f"Workload {key}: pod {pod.name} has no command")
