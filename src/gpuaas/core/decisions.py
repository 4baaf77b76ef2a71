"""What the core decided, as data: one frozen dataclass per kind of transition.

``Cluster.schedule`` (and ``apply``/``delete``/``finish``/``evict``/``confirm_stopped``, whose
effects surface at the next ``take_decisions``) report what happened to workloads as these
values, in the order they were applied. Everything riding on the core (the runtime and telemetry
bridges, the server's audit trail, the scenario runner) dispatches on their types, never on
reason text. Kueue's conditions and events are derived from them in one place
(``core.record``). This module holds data only: no decision is made here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    """Base: the workload (``namespace/name``) and the instant the decision took effect."""

    workload: str
    time: float


@dataclass(frozen=True, slots=True)
class Reserve(Decision):
    """Quota reserved in ``cluster_queue`` on ``flavors`` ((podSet, resource, flavor), ...)."""

    cluster_queue: str
    flavors: tuple[tuple[str, str, str], ...]
    wait_seconds: float  # since the workload was created (as the QuotaReserved event says it)


@dataclass(frozen=True, slots=True)
class Admit(Decision):
    """Admitted: quota is reserved and every admission check that applies is Ready."""

    cluster_queue: str
    wait_seconds: float


@dataclass(frozen=True, slots=True)
class Pend(Decision):
    """Not admitted in a cycle; its QuotaReserved=False reason or message changed."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Evict(Decision):
    """Eviction began: the workload's pods must stop; its quota is held until they are gone.

    ``reason`` is Kueue's Evicted reason (Preempted, ClusterQueueStopped, LocalQueueStopped,
    Deactivated, AdmissionCheck, or a gpuaas one such as IdleGPU, PodsLost). A preemption also
    names the ``preemptor`` and Kueue's ``preemption_reason`` (InClusterQueue, ...).
    """

    cluster_queue: str
    reason: str
    message: str
    preemptor: str | None = None
    preemption_reason: str | None = None
    preemptor_cluster_queue: str | None = None


@dataclass(frozen=True, slots=True)
class Release(Decision):
    """The workload's quota was given back (evicted and stopped, finished or deleted)."""

    cluster_queue: str


@dataclass(frozen=True, slots=True)
class Requeue(Decision):
    """Back in its queue after an eviction; ``reason`` is the eviction's reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class Finish(Decision):
    succeeded: bool
    # Kueue's Finished reason and message when not a job's outcome (OutOfSync); "" for those
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Deactivate(Decision):
    """Left scheduling for good until reactivated (spec.active false, a Rejected check).

    ``after_eviction``: it held quota and its pods are now gone (the quota was just released).
    """

    reason: str
    message: str
    after_eviction: bool = False


@dataclass(frozen=True, slots=True)
class Delete(Decision):
    """The workload object is gone."""


@dataclass(frozen=True, slots=True)
class CheckState(Decision):
    """An admission check's state on the workload changed (Pending, Ready, Retry, Rejected)."""

    check: str
    state: str
    message: str


__all__ = [
    "Admit",
    "CheckState",
    "Deactivate",
    "Decision",
    "Delete",
    "Evict",
    "Finish",
    "Pend",
    "Release",
    "Requeue",
    "Reserve",
]
