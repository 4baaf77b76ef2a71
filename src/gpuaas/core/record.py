"""Kueue's conditions and events, derived from decisions in this one place.

``Lifecycle`` changes a workload's phase and quota, then hands the decision here: this module
writes the Workload's ``status.conditions`` as Kueue's workload controller and scheduler write
them, and the events Kueue records (QuotaReserved, Admitted, Preempted, EvictedDueTo..., Requeued,
Finished, ...). It never decides anything and never changes phases or quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuaas.core.decisions import (
    Admit,
    CheckState,
    Deactivate,
    Decision,
    Evict,
    Finish,
    Pend,
    Requeue,
    Reserve,
)
from gpuaas.core.preemption import HUMAN_REASONS
from gpuaas.core.state import Event, WorkloadState


def preemption_message(
    preemptor: WorkloadState, preemptor_path: str, victim_path: str, reason: str
) -> str:
    """Kueue's Preempted/Evicted message for a victim (``preemption.go``).

    The preemptor is named by its UIDs only (``UNKNOWN`` where it has none, as Kueue writes for a
    Workload without a job): its namespace and name may belong to another tenant.
    """
    human = HUMAN_REASONS.get(reason, "UNKNOWN")
    uid = preemptor.workload.uid or "UNKNOWN"
    job_uid = preemptor.workload.job_uid or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) "
        f"due to {human}; preemptor path: {preemptor_path}; preemptee path: {victim_path}"
    )


def conditions(wl: WorkloadState, d: Decision) -> bool:
    """Write the conditions ``d`` implies on ``wl``; True if any changed."""
    write = CONDITION_WRITERS.get(type(d))
    return write(wl, d) if write is not None else False


def _reserve(wl: WorkloadState, d: Reserve) -> bool:
    now = d.time
    changed = wl.set_condition(
        "QuotaReserved", "True", "QuotaReserved", reserved_message(d.cluster_queue), now
    )
    if "Evicted" in wl.conditions:
        previously = "Previously: " + wl.conditions["Evicted"].message
        changed |= wl.set_condition("Evicted", "False", "QuotaReserved", previously, now)
    return changed


def _admit(wl: WorkloadState, d: Admit) -> bool:
    return wl.set_condition("Admitted", "True", "Admitted", "The workload is admitted", d.time)


def _pend(wl: WorkloadState, d: Pend) -> bool:
    return wl.set_condition("QuotaReserved", "False", d.reason, d.message, d.time)


def _evict(wl: WorkloadState, d: Evict) -> bool:
    now, changed = d.time, False
    if d.preemptor is not None:
        changed |= wl.set_condition("Preempted", "True", d.preemption_reason or "", d.message, now)
    changed |= wl.set_condition("Evicted", "True", d.reason, d.message, now)
    changed |= wl.set_condition("Admitted", "False", d.reason, d.message, now)
    return changed


def _requeue(wl: WorkloadState, d: Requeue) -> bool:
    msg = f"The workload was evicted: {d.reason}"
    changed = wl.set_condition("QuotaReserved", "False", "Pending", msg, d.time)
    changed |= wl.set_condition(
        "Requeued", "True", d.reason, "The workload was requeued after eviction", d.time
    )
    return changed


def _deactivate(wl: WorkloadState, d: Deactivate) -> bool:
    if not d.after_eviction:
        return False
    msg = f"The workload was evicted: {d.reason}"
    return wl.set_condition("QuotaReserved", "False", "Pending", msg, d.time)


def _finish(wl: WorkloadState, d: Finish) -> bool:
    reason, msg = (d.reason, d.message) if d.reason else finish_reason(d.succeeded)
    return wl.set_condition("Finished", "True", reason, msg, d.time)


# By exact type: a dict lookup per decision instead of an isinstance chain (a settle records
# several decisions per admission); each writer takes the type it is listed under. Types not
# listed write no condition.
CONDITION_WRITERS: dict[type[Decision], Callable[[WorkloadState, Any], bool]] = {
    Reserve: _reserve,
    Admit: _admit,
    Pend: _pend,
    Evict: _evict,
    Requeue: _requeue,
    Deactivate: _deactivate,
    Finish: _finish,
}


def reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def finish_reason(succeeded: bool) -> tuple[str, str]:
    return ("Succeeded", "Job finished successfully") if succeeded else ("Failed", "Job failed")


def events(d: Decision, workloads: Mapping[str, WorkloadState]) -> list[Event]:
    """The Kubernetes events Kueue records for ``d`` (about its workload, and for a preemption
    also about the preemptor)."""
    wl = workloads.get(d.workload)
    if wl is None:
        return []
    now, key, obj = d.time, d.workload, "Workload " + d.workload
    if isinstance(d, Reserve):
        pairs = sorted({f"{r}={f}" for _, r, f in d.flavors})
        flavors = ", ".join(pairs) if len(d.flavors) != 1 else pairs[0]
        msg = (
            f"{reserved_message(d.cluster_queue)}, wait time since queued was "
            f"{d.wait_seconds:.0f}s; flavors: {flavors or 'none'}"
        )
        return [Event(now, "Normal", "QuotaReserved", obj, msg, key)]
    if isinstance(d, Admit):
        msg = f"Admitted by ClusterQueue {d.cluster_queue}"
        return [Event(now, "Normal", "Admitted", obj, msg, key)]
    if isinstance(d, Pend):
        return [Event(now, "Warning", d.reason, obj, d.message, key)]
    if isinstance(d, Evict):
        out = [Event(now, "Normal", f"EvictedDueTo{d.reason}", obj, d.message, key)]
        if d.preemptor is not None:
            pre = workloads.get(d.preemptor)
            pre_prio = pre.priority if pre is not None else 0
            out.append(
                Event(
                    now,
                    "Normal",
                    "Preempted",
                    obj,
                    f"{d.message}; preemptor effective priority: {pre_prio}; "
                    f"preemptee effective priority: {wl.priority}",
                    key,
                    d.preemptor,
                )
            )
            out.append(
                Event(
                    now,
                    "Normal",
                    "PreemptedWorkload",
                    "Workload " + d.preemptor,
                    # By UID: the victim may be another tenant's, its name is not ours to tell.
                    f"Preempted a workload (UID: {wl.workload.uid or 'UNKNOWN'}) in ClusterQueue "
                    f"{d.cluster_queue} ({d.preemption_reason})",
                    d.preemptor,
                    key,
                )
            )
        return out
    if isinstance(d, Requeue):
        msg = f"Requeued after eviction ({d.reason})"
        return [Event(now, "Normal", "Requeued", obj, msg, key)]
    if isinstance(d, Finish):
        msg = d.message if d.reason else finish_reason(d.succeeded)[1]
        return [Event(now, "Normal", "Finished", obj, msg, key)]
    if isinstance(d, CheckState):
        msg = f"Admission check {d.check} is {d.state}" + (f": {d.message}" if d.message else "")
        return [Event(now, "Normal", "AdmissionCheckUpdated", obj, msg, key)]
    return []


__all__ = [
    "CONDITION_WRITERS",
    "conditions",
    "events",
    "finish_reason",
    "preemption_message",
    "reserved_message",
]
