"""What the engine knows about each workload: phase, admission, conditions and events.

These records are the engine's output, written as Kueue writes a Workload's status, so that an API
can show them unchanged. They are plain data: the engine mutates them, nothing here decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpuaas.core.objects import Workload


class Phase(StrEnum):
    PENDING = "Pending"  # waiting for quota (held queues included)
    ADMITTED = "Admitted"  # holds quota
    EVICTING = "Evicting"  # evicted, still holds quota until its pods are gone
    FINISHED = "Finished"
    INACTIVE = "Inactive"  # spec.active is false


@dataclass(slots=True)
class Condition:
    type: str
    status: str  # "True" / "False"
    reason: str
    message: str
    last_transition_time: float

    def to_dict(self) -> dict[str, str | float]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }


@dataclass(slots=True)
class Event:
    """A Kubernetes-style event. ``object`` is ``Kind namespace/name`` or ``Kind name``."""

    time: float
    type: str  # Normal / Warning
    reason: str
    object: str
    message: str
    workload: str | None = None  # namespace/name when the event is about a workload
    related: str | None = None  # the other workload (preemptor of a victim, victim of a preemptor)


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    flavors: dict[str, str]  # resource -> flavor
    count: int
    resource_usage: dict[str, int]  # resource -> total for ``count`` pods

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "flavors": dict(self.flavors),
            "count": self.count,
            "resourceUsage": dict(self.resource_usage),
        }


@dataclass(slots=True)
class Admission:
    cluster_queue: str
    pod_sets: list[PodSetAssignment]

    def usage(self) -> dict[tuple[str, str], int]:
        """Quota held, per (flavor, resource)."""
        out: dict[tuple[str, str], int] = {}
        for ps in self.pod_sets:
            for res, qty in ps.resource_usage.items():
                fr = (ps.flavors[res], res)
                out[fr] = out.get(fr, 0) + qty
        return out


class CheckStateValue(StrEnum):
    """Kueue's CheckState for one admission check on one workload."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


@dataclass(slots=True)
class AdmissionCheckStatus:
    """One entry of a Workload's ``status.admissionChecks``."""

    name: str
    state: CheckStateValue
    message: str
    last_transition_time: float
    requeue_after_seconds: int | None = None
    retry_count: int | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "state": self.state.value,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.requeue_after_seconds is not None:
            out["requeueAfterSeconds"] = self.requeue_after_seconds
        if self.retry_count is not None:
            out["retryCount"] = self.retry_count
        return out


@dataclass(slots=True)
class WorkloadState:
    workload: Workload
    uid: int  # creation sequence: Kueue's UID tie-break, deterministic here
    created_at: float
    priority: int  # effective priority, resolved at creation as Kueue does
    cluster_queue: str | None = None  # resolved through the LocalQueue, None if unresolved
    phase: Phase = Phase.PENDING
    admission: Admission | None = None
    admitted_at: float | None = None  # last QuotaReserved=True transition
    admission_count: int = 0  # how many times quota was reserved
    requeue_count: int = 0
    preempted_by: str | None = None  # last preemptor
    preemption_reason: str | None = None  # InClusterQueue, InCohortReclamation, ...
    ever_preempted: bool = False
    pending_reason: str = ""  # plain-words "why pending"
    pending_flavors: str = ""  # flavors considered in the last attempt
    conditions: dict[str, Condition] = field(default_factory=dict)
    admission_checks: dict[str, AdmissionCheckStatus] = field(default_factory=dict)
    # Queue-order timestamp: creation time, or the eviction time after an AdmissionCheck eviction.
    queued_at: float = -1.0
    requeue_at: float | None = None  # backoff: not back in its queue before this instant
    requeue_state_count: int = 0  # Kueue's status.requeueState.count: backoff evictions so far
    # Kueue deactivated it (a Rejected check, the requeuing limit) and wrote spec.active=false:
    # only a Workload's own spec.active set back to true brings it back (Lifecycle).
    deactivated_by_check: bool = False
    # MultiKueue (status.nominatedClusterNames, status.clusterName): reset on eviction.
    nominated_cluster_names: tuple[str, ...] = ()
    cluster_name: str | None = None
    # Kueue's status.accumulatedPastExecutionTimeSeconds: seconds Admitted before now (max_exec).
    past_exec_seconds: int = 0
    # Engine bookkeeping (not part of Kueue's status):
    usage: dict[tuple[str, str], int] = field(default_factory=dict)  # quota held now
    shape: object = None  # scheduling-equivalence key
    last_tried: list[dict[str, int]] | None = None  # resumed flavor scan (LastTriedFlavorIdx)
    last_generation: int = -1  # CQ allocatable generation when last_tried was recorded

    key: str = field(init=False, default="")  # "namespace/name", fixed for the workload's life

    def __post_init__(self) -> None:
        self.key = self.workload.key
        if self.queued_at < 0:
            self.queued_at = self.created_at

    @property
    def awaiting_checks(self) -> bool:
        """Holds quota, but not every admission check that applies is Ready yet."""
        return self.phase == Phase.ADMITTED and any(
            c.state != CheckStateValue.READY for c in self.admission_checks.values()
        )

    def set_condition(self, type_: str, status: str, reason: str, message: str, now: float) -> bool:
        """Set a condition; keep its transition time when the status does not change."""
        old = self.conditions.get(type_)
        if old is not None and old.status == status:
            changed = old.reason != reason or old.message != message
            old.reason, old.message = reason, message
            return changed
        self.conditions[type_] = Condition(type_, status, reason, message, now)
        return True
