"""MultiKueue's decisions, pure: which workers to nominate, and what to do with a workload group.

Kueue's MultiKueue controller (``pkg/controller/admissionchecks/multikueue/workload.go``,
``reconcileGroup``; ``pkg/controller/workloaddispatcher``) keeps a manager's workload and its
copies on the workers in step. Here the same steps are a function of what the manager knows (its
workload's state, each worker's copy as last read, which workers answer) to a ``Plan``: copies
to create or delete, the Job to create on the worker that admitted the copy, and the check state,
nomination and ``clusterName`` to write on the manager. ``admission_check_active`` is Kueue's
rule for the AdmissionCheck's Active condition. Nothing here does I/O or reads a clock: the
engine's MultiKueue controller reads the workers, calls these, and carries the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ALL_AT_ONCE, INCREMENTAL, EXTERNAL = "AllAtOnce", "Incremental", "External"
READY, PENDING, RETRY = "Ready", "Pending", "Retry"


@dataclass(frozen=True, slots=True)
class RemoteCopy:
    """A worker's copy of the workload, as read: its conditions that matter here."""

    admitted_at: float | None = None  # Admitted=True since
    finished: tuple[bool, str, str] | None = None  # (succeeded, reason, message)
    evicted: bool = False
    pending_message: str = ""  # its QuotaReserved=False message: why the worker waits
    has_job: bool = False  # the Job was created there


@dataclass(frozen=True, slots=True)
class Local:
    """The manager's workload as the plan needs it."""

    holds_quota: bool
    finished: bool
    check_state: str  # of its MultiKueue check
    cluster_name: str | None
    nominated: tuple[str, ...]


@dataclass(slots=True)
class Plan:
    delete_on: list[str] = field(default_factory=list)  # copies (Job first) to remove
    create_on: list[str] = field(default_factory=list)  # copies to create
    create_job_on: str | None = None
    check: tuple[str, str] | None = None  # (state, message) to write on the check
    nominated: tuple[str, ...] | None = None  # status.nominatedClusterNames to write
    cluster_name: str | None = None  # status.clusterName to write with check Ready
    finish: tuple[bool, str, str] | None = None  # finish the manager's workload
    wait_lost: float | None = None  # seconds until the lost worker counts as gone
    events: list[str] = field(default_factory=list)  # MultiKueue events on the workload


def nominate(
    dispatcher: str,
    clusters: Sequence[str],
    available: Sequence[str],
    nominated: Sequence[str],
    round_started: float | None,
    now: float,
    step: int = 3,
    round_seconds: float = 300.0,
) -> tuple[tuple[str, ...], float | None]:
    """The nomination and the Incremental round's start.

    AllAtOnce: every connected worker, sorted by name. Incremental: the nomination grows by
    ``step`` workers in the MultiKueueConfig's order (Kueue 0.19 default:
    ``MultiKueueIncrementalDispatcherRespectConfigOrder``) each ``round_seconds``. External: kept
    as another controller wrote it.
    """
    if dispatcher == ALL_AT_ONCE:
        return tuple(sorted(c for c in clusters if c in set(available))), None
    if dispatcher == INCREMENTAL:
        if round_started is not None and now - round_started <= round_seconds:
            return tuple(nominated), round_started
        rest = [c for c in clusters if c not in set(nominated)]
        if not rest:
            return tuple(nominated), round_started
        return (*nominated, *rest[:step]), now
    return tuple(nominated), None


def _first_admitted(remotes: Mapping[str, RemoteCopy | None], with_job: bool = False) -> str | None:
    """The worker whose copy was admitted first (ties, within a second, by name); with
    ``with_job``, among those the Job was already sent to only."""
    best: tuple[float, str] | None = None
    for name, seen in remotes.items():
        if seen is None or seen.admitted_at is None or (with_job and not seen.has_job):
            continue
        if best is None or (seen.admitted_at, name) < best:
            best = (seen.admitted_at, name)
    return best[1] if best else None


def reconcile(
    local: Local,
    remotes: Mapping[str, RemoteCopy | None],
    unavailable: Sequence[str],
    nomination: tuple[str, ...],
    lost_for: float | None,
    lost_timeout: float,
) -> Plan:
    """One pass of Kueue's ``reconcileGroup`` for a workload with a MultiKueue check.

    ``remotes``: the copy on each connected worker (None: no copy there). ``nomination``: what
    the dispatcher nominates now. ``lost_for``: how long the chosen worker has not answered.
    """
    plan = Plan()
    present = sorted(n for n, c in remotes.items() if c is not None)
    # 1. Finished, or no quota on the manager: every copy goes.
    if local.finished or not local.holds_quota:
        plan.delete_on = present
        return plan
    # 2. A copy finished: the manager's workload finishes with it.
    for name in present:
        done = remotes[name]
        if done is not None and done.finished is not None:
            plan.finish = done.finished
            plan.events.append(f'The workload finished on "{name}": {done.finished[2]}')
            return plan
    # 3. Evicted on the chosen worker: back to the manager's queue.
    if local.check_state == READY and local.cluster_name is not None:
        chosen = remotes.get(local.cluster_name)
        if chosen is not None and chosen.evicted:
            plan.check = (
                RETRY,
                f'Workload evicted on worker cluster: "{local.cluster_name}", resetting for '
                f're-admission. Previously: "{READY}"',
            )
            plan.events.append(plan.check[1])
            return plan
    # A Job on a worker is the hub's choice already made (the hub sends it only to the worker
    # it picked, before it records clusterName): it holds against a copy seen admitted earlier
    # since, or by the same second with a smaller name, so the Job never goes to a second worker.
    winner = _first_admitted(remotes, with_job=True) or _first_admitted(remotes)
    if local.cluster_name is not None and winner not in (None, local.cluster_name):
        winner = local.cluster_name if remotes.get(local.cluster_name) else None
    # 6a. Ready but no admitted copy visible.
    if winner is None and local.check_state == READY:
        lost = local.cluster_name
        if lost is not None and lost in unavailable:
            if lost_for is not None and lost_for < lost_timeout:
                plan.wait_lost = lost_timeout - lost_for
                return plan
            plan.check = (RETRY, 'Admitting remote lost, Previously: "Ready"')
        else:
            plan.check = (RETRY, 'Admitting remote no longer exists, Previously: "Ready"')
        plan.events.append(f"{plan.check[1]} (worker {lost})")
        return plan
    # 6b. A copy was admitted: it wins, the others go, its Job is created there.
    if winner is not None:
        plan.delete_on = [n for n in present if n != winner]
        won = remotes[winner]
        if won is not None and not won.has_job:
            plan.create_job_on = winner
        if local.check_state == PENDING or local.cluster_name is None:
            message = f'The workload was admitted on "{winner}"'
            plan.check = (READY, message)
            plan.cluster_name = winner
            plan.nominated = ()
            others = [n for n in local.nominated if n != winner]
            why = f"; not chosen: {', '.join(others)} (admitted later or not at all)"
            plan.events.append(message + (why if others else ""))
        return plan
    # 8. Nominate and keep the copies on the nominated workers only.
    if local.check_state != PENDING or local.cluster_name is not None:
        return plan
    if set(nomination) != set(local.nominated):
        plan.nominated = nomination
        plan.events.append(f"Nominated worker clusters: {', '.join(nomination) or 'none'}")
    plan.create_on = [n for n in nomination if n in remotes and remotes[n] is None]
    plan.delete_on = [n for n in present if n not in nomination]
    waiting = []
    for n in nomination:
        there = remotes.get(n)
        if n in unavailable or n not in remotes:
            waiting.append(f"{n}: not connected")
        elif there is not None and there.pending_message:
            waiting.append(f"{n}: {there.pending_message}")
    if not nomination:
        message = "no worker cluster is connected to dispatch to"
    else:
        message = "not admitted by any nominated worker cluster yet"
        if waiting:
            message += "; " + "; ".join(waiting)
    plan.check = (PENDING, message)
    return plan


def admission_check_active(
    config_error: str | None, clusters: Sequence[str], active: Mapping[str, bool]
) -> tuple[str, str, str]:
    """Kueue's ACReconciler: (status, reason, message) of a MultiKueue check's Active.

    ``active`` has an entry per existing MultiKueueCluster (its Active condition).
    """
    if config_error is not None:
        return "False", "BadConfig", f"Cannot load the AdmissionChecks parameters: {config_error}"
    missing = [c for c in clusters if c not in active]
    inactive = [c for c in clusters if c in active and not active[c]]
    unusable = len(missing) + len(inactive)
    if not unusable:
        return "True", "Active", "The admission check is active"
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    if unusable < len(clusters):
        return "True", "SomeActiveClusters", ", ".join(parts)
    return "False", "NoUsableClusters", ", ".join(parts)


def config_ref_error(parameters: Mapping[str, object] | None) -> str | None:
    """Kueue's ``refValidForGK`` for ``MultiKueueConfig`` parameters, as its error text."""
    if not parameters:
        return "missing parameters reference"
    if not parameters.get("name"):
        return "empty name: bad parameters reference"
    group, kind = parameters.get("apiGroup"), parameters.get("kind")
    if group != "kueue.x-k8s.io":
        return f'wrong group "{group}", expecting "kueue.x-k8s.io": bad parameters reference'
    if kind != "MultiKueueConfig":
        return f'wrong kind "{kind}", expecting "MultiKueueConfig": bad parameters reference'
    return None


__all__ = [
    "ALL_AT_ONCE",
    "EXTERNAL",
    "INCREMENTAL",
    "Local",
    "Plan",
    "RemoteCopy",
    "admission_check_active",
    "config_ref_error",
    "nominate",
    "reconcile",
]
