"""How core state reads on the wire: Kueue's status fields, timestamps and quantities.

Workload status is written as Kueue writes it (``status.conditions``, ``status.admission`` with
``podSetAssignments``), ClusterQueue status as Kueue's counters, a job's derived Workload as Kueue
creates it, timestamps as RFC 3339. Quantities go out in Kubernetes text through
``core.quantity.format_quantity``. The engine writes these documents and the CLI reads them back
(``parse_rfc3339``). Pure functions over core objects: no locks, no I/O, no store, and nothing the
engine keeps only for itself (that is ``engine.persisted``).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from gpuaas.core.objects import ClusterQueue, Workload
from gpuaas.core.quantity import format_quantity
from gpuaas.core.state import WorkloadState

JsonDoc = dict[str, Any]


def rfc3339(ts: float) -> str:
    """Kubernetes' timestamp format: seconds, UTC, ``Z``.

    Every create, status and event writes the current second, thousands of times a second, so
    the last second's text is kept (``_last``: one tuple, read and replaced atomically from any
    thread). It is reused only when ``ts`` cannot round up into the next second (datetime rounds
    to the microsecond), so the answer is always ``_format(ts)``'s."""
    global _last
    try:
        second = math.floor(ts)
    except (OverflowError, ValueError):  # inf, NaN: datetime's own error
        return _format(ts)
    last = _last
    if ts - second < _LAST_SAFE:
        if last[0] == second:
            return last[1]
        text = _format(ts)
        _last = (second, text)
        return text
    return _format(ts)


def _format(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_LAST_SAFE = 0.999999  # a fraction below this stays in its second at microsecond rounding
_last: tuple[int, str] = (0, _format(0))


def parse_rfc3339(text: str) -> float | None:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except (TypeError, ValueError):
        return None


def workload_status(st: WorkloadState) -> JsonDoc:
    status: JsonDoc = {
        "conditions": [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": rfc3339(c.last_transition_time),
            }
            for c in sorted(st.conditions.values(), key=lambda c: c.last_transition_time)
        ]
    }
    if st.admission_checks:
        checks = []
        for c in st.admission_checks.values():
            entry: JsonDoc = {
                "name": c.name,
                "state": c.state.value,
                "message": c.message,
                "lastTransitionTime": rfc3339(c.last_transition_time),
            }
            if c.requeue_after_seconds is not None:
                entry["requeueAfterSeconds"] = c.requeue_after_seconds
            if c.retry_count is not None:
                entry["retryCount"] = c.retry_count
            checks.append(entry)
        status["admissionChecks"] = checks
    if st.cluster_name is not None:
        status["clusterName"] = st.cluster_name
    if st.past_exec_seconds:
        status["accumulatedPastExecutionTimeSeconds"] = st.past_exec_seconds
    if st.nominated_cluster_names:
        status["nominatedClusterNames"] = list(st.nominated_cluster_names)
    if st.requeue_state_count or st.requeue_at is not None:
        # Kueue's status.requeueState: back-off evictions so far and when it may return.
        requeue: JsonDoc = {}
        if st.requeue_state_count:
            requeue["count"] = st.requeue_state_count
        if st.requeue_at is not None:
            requeue["requeueAt"] = rfc3339(st.requeue_at)
        status["requeueState"] = requeue
    if st.admission is not None:
        status["admission"] = {
            "clusterQueue": st.admission.cluster_queue,
            "podSetAssignments": [
                {
                    "name": p.name,
                    "flavors": dict(p.flavors),
                    "count": p.count,
                    "resourceUsage": {
                        r: format_quantity(v, r) for r, v in p.resource_usage.items()
                    },
                }
                for p in st.admission.pod_sets
            ],
        }
    return status


def derived_workload_doc(wl: Workload, owner: JsonDoc, api_version: str) -> JsonDoc:
    """The Workload Kueue creates for a Job, RayCluster or RayJob (named as the job here)."""
    meta = owner.get("metadata", {})
    spec: JsonDoc = {
        "queueName": wl.queue_name,
        "active": wl.active,
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                **({"minCount": ps.min_count} if ps.min_count is not None else {}),
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "resources": {
                                    "requests": {
                                        r: format_quantity(v, r) for r, v in ps.requests.items()
                                    }
                                },
                            }
                        ]
                    }
                },
            }
            for ps in wl.pod_sets
        ],
    }
    if wl.priority_class is not None:
        spec["priorityClassName"] = wl.priority_class
        spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    if wl.priority is not None:
        spec["priority"] = wl.priority
    if wl.max_exec_seconds is not None:  # from the job's max-exec-time-seconds label
        spec["maximumExecutionTimeSeconds"] = wl.max_exec_seconds
    labels = dict(meta.get("labels") or {})
    return {
        "apiVersion": api_version,
        "kind": "Workload",
        "metadata": {
            "name": wl.name,
            "namespace": wl.namespace,
            "labels": labels,
            "ownerReferences": [controller_reference(owner)],
        },
        "spec": spec,
    }


def controller_reference(owner: JsonDoc) -> JsonDoc:
    """The ``ownerReferences`` entry that makes ``owner`` (a job) its Workload's controller."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
    }


def cluster_queue_status(
    cq: ClusterQueue,
    usage: dict[tuple[str, str], int],
    pending: int,
    admitted: int,
    inactive: tuple[str, str] | None,
) -> JsonDoc:
    """Kueue's ClusterQueue status; ``inactive`` is (reason, message) when it is not Active."""
    flavors: list[JsonDoc] = []
    for group in cq.resource_groups:
        for fq in group.flavors:
            flavors.append(
                {
                    "name": fq.name,
                    "resources": [
                        {
                            "name": res,
                            "total": format_quantity(usage.get((fq.name, res), 0), res),
                            "borrowed": format_quantity(
                                max(0, usage.get((fq.name, res), 0) - q.nominal), res
                            ),
                        }
                        for res, q in fq.resources.items()
                    ],
                }
            )
    if inactive is None:
        active = {"status": "True", "reason": "Ready", "message": "Can admit new workloads"}
    elif inactive[0] == "Terminating":  # Kueue's own wording for this one
        message = "Can't admit new workloads; clusterQueue is terminating"
        active = {"status": "False", "reason": inactive[0], "message": message}
    else:
        message = f"Can't admit new workloads: {inactive[1]}."
        active = {"status": "False", "reason": inactive[0], "message": message}
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
        "flavorsReservation": flavors,
        "flavorsUsage": flavors,
        "conditions": [{"type": "Active", **active}],
    }


def quota_summary(cq: ClusterQueue, usage: dict[tuple[str, str], int]) -> list[JsonDoc]:
    """Per flavor and resource: nominal, borrowing and lending limits, usage (ints and text)."""
    out: list[JsonDoc] = []
    for group in cq.resource_groups:
        for fq in group.flavors:
            for res, q in fq.resources.items():
                used = usage.get((fq.name, res), 0)
                out.append(
                    {
                        "flavor": fq.name,
                        "resource": res,
                        "nominal": q.nominal,
                        "borrowingLimit": q.borrowing_limit,
                        "lendingLimit": q.lending_limit,
                        "usage": used,
                        "borrowed": max(0, used - q.nominal),
                        "display": {
                            "nominal": format_quantity(q.nominal, res),
                            "usage": format_quantity(used, res),
                        },
                    }
                )
    return out
