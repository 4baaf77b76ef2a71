"""A batch/v1 Job's ``status`` as Kubernetes' job controller writes it, from its Kueue workload
and the pods that really run for it.

Under Kueue a Job is created suspended and resumed when its workload is admitted, so the job
controller's conditions follow the workload: ``Suspended=True`` (``JobSuspended``, "Job
suspended") while it waits for quota (or its admission checks) or after an eviction,
``Suspended=False`` (``JobResumed``, "Job resumed") once it runs, and after; ``startTime`` is when it was last resumed (the job controller resets
it on every resume), ``completionTime`` when it succeeded. A finished Job gets Kubernetes' two
terminal conditions (since 1.31 the job controller adds ``SuccessCriteriaMet`` before
``Complete`` and ``FailureTarget`` before ``Failed``): ``Complete`` (``CompletionsReached``) or
``Failed`` (``BackoffLimitExceeded``). The pod counters are the job controller's: ``active`` pods
not finished, ``ready`` among them the running ones, ``succeeded`` and ``failed`` (retried
attempts included, as each failed pod is counted once); once the runtime has let a finished
Job's pods go, all its pods count as succeeded (or one as failed), as the job controller had
counted them. ``uncountedTerminatedPods`` is always
empty: gpuaas counts pods as it reads them, never through finalizers.

A Job managed by a MultiKueue manager (``spec.managedBy``) is not this server's to describe: its
status is the worker's, copied there; this module is not used for it. Pure: the workload state
and the live pods are passed in; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuaas.core.state import Phase, WorkloadState
from gpuaas.vocab.render import rfc3339

JsonDoc = dict[str, Any]


def job_status(st: WorkloadState | None, pods: Sequence[JsonDoc]) -> JsonDoc:
    """``pods``: each pod's ``phase`` (Pending, Running, Succeeded, Failed, Terminating) and
    ``restarts`` (failed attempts retried within the backoff limit)."""
    active = sum(1 for p in pods if p.get("phase") in ("Pending", "Running"))
    ready = sum(1 for p in pods if p.get("phase") == "Running")
    succeeded = sum(1 for p in pods if p.get("phase") == "Succeeded")
    failed = sum(int(p.get("restarts") or 0) for p in pods)
    failed += sum(1 for p in pods if p.get("phase") == "Failed")
    terminating = sum(1 for p in pods if p.get("phase") == "Terminating")
    status: JsonDoc = {"active": active, "ready": ready}
    if succeeded:
        status["succeeded"] = succeeded
    if failed:
        status["failed"] = failed
    if terminating:
        status["terminating"] = terminating
    status["uncountedTerminatedPods"] = {}
    if st is None:
        return status
    conditions: list[JsonDoc] = []
    running = st.phase == Phase.ADMITTED and not st.awaiting_checks
    resumed_at = st.admitted_at
    if st.phase == Phase.FINISHED:
        finished = st.conditions.get("Finished")
        at = rfc3339(finished.last_transition_time) if finished else ""
        if resumed_at is not None:
            status["startTime"] = rfc3339(resumed_at)
            conditions.append(_resumed(resumed_at))
        ok = finished is None or finished.reason != "Failed"
        if not pods:  # the runtime let its pods go: count them as the job controller did
            if ok:
                status["succeeded"] = sum(ps.count for ps in st.workload.pod_sets)
            else:
                status["failed"] = max(1, failed)
        message = finished.message if finished else ""
        if ok:
            status["completionTime"] = at
            conditions += [
                _cond("SuccessCriteriaMet", "CompletionsReached", message, at),
                _cond("Complete", "CompletionsReached", message, at),
            ]
        else:
            conditions += [
                _cond("FailureTarget", "BackoffLimitExceeded", message, at),
                _cond("Failed", "BackoffLimitExceeded", message, at),
            ]
    elif running and resumed_at is not None:
        status["startTime"] = rfc3339(resumed_at)
        conditions.append(_resumed(resumed_at))
    else:
        evicted = st.conditions.get("Evicted")
        since = evicted.last_transition_time if evicted is not None else st.created_at
        conditions.append(_cond("Suspended", "JobSuspended", "Job suspended", rfc3339(since)))
    if conditions:
        status["conditions"] = conditions
    return status


def _resumed(at: float) -> JsonDoc:
    """Every Kueue Job starts suspended, so once it runs its Suspended condition is False."""
    return _cond("Suspended", "JobResumed", "Job resumed", rfc3339(at), "False")


def _cond(type_: str, reason: str, message: str, at: str, status: str = "True") -> JsonDoc:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": at,
        "lastTransitionTime": at,
    }


__all__ = ["job_status"]
