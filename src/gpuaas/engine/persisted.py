"""What the engine stores beside each shown document, and its events as the store keeps them.

A Workload record's ``internal`` part holds what a restart needs and the shown status loses: the
phase, exact times and integer usage of its admission (``internal_state``, read back by
``admission_from_internal``). ``fingerprint`` says whether a workload's shown status changed, so
that unchanged ones are not written again. Pure functions: no locks, no I/O; how a document reads
on the wire is ``vocab.render``'s, not this module's.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from gpuaas.core.state import (
    Admission,
    AdmissionCheckStatus,
    CheckStateValue,
    Event,
    PodSetAssignment,
    WorkloadState,
)
from gpuaas.store import EventRecord

JsonDoc = dict[str, Any]


def fingerprint(st: WorkloadState) -> bytes:
    """Identity of everything ``workload_status`` shows; equal means nothing to write.

    A 16-byte BLAKE2b digest of the shown fields written exactly (msgspec's JSON: floats in
    their shortest form that reads back the same, enums as their values; a third of what their
    ``repr`` cost, whose enums print through Python code), kept per workload instead of those
    fields themselves: a tuple of tuples took about 0.6 KB of every workload's memory, and two
    different statuses share a digest with odds of 2**-128."""
    return hashlib.blake2b(_EXACT.encode(_shown(st)), digest_size=16).digest()


_EXACT = msgspec.json.Encoder()


def _shown(st: WorkloadState) -> tuple[Any, ...]:
    conds = tuple(
        (c.type, c.status, c.reason, c.message, c.last_transition_time)
        for c in st.conditions.values()
    )
    adm = None
    if st.admission is not None:
        adm = (
            st.admission.cluster_queue,
            tuple(
                (p.name, tuple(sorted(p.flavors.items())), p.count) for p in st.admission.pod_sets
            ),
        )
    checks = tuple(
        (c.name, c.state, c.message, c.last_transition_time, c.retry_count)
        for c in st.admission_checks.values()
    )
    placement = (st.nominated_cluster_names, st.cluster_name)
    requeue = (st.requeue_state_count, st.requeue_at, st.workload.active, st.past_exec_seconds)
    return (st.phase, conds, adm, st.admitted_at, checks, requeue, placement)


def internal_state(st: WorkloadState) -> JsonDoc:
    """What a restart needs that the shown status loses: exact times and integer usage."""
    out: JsonDoc = {"phase": str(st.phase), "created": st.created_at}
    if st.admission is not None:
        out["admission"] = {
            "clusterQueue": st.admission.cluster_queue,
            "podSets": [
                {
                    "name": p.name,
                    "flavors": dict(p.flavors),
                    "count": p.count,
                    "usage": dict(p.resource_usage),
                }
                for p in st.admission.pod_sets
            ],
        }
        out["admittedAt"] = st.admitted_at
    if st.admission_checks:
        out["checks"] = [c.to_dict() for c in st.admission_checks.values()]
    out["clusterName"] = st.cluster_name
    out["nominatedClusterNames"] = list(st.nominated_cluster_names)
    return out


def placement_from_internal(internal: JsonDoc) -> tuple[tuple[str, ...], str | None]:
    """MultiKueue's nomination and chosen worker, given back to a restored admission."""
    nominated = internal.get("nominatedClusterNames") or []
    name = internal.get("clusterName")
    return tuple(str(n) for n in nominated), (str(name) if name else None)


def requeue_count_from_status(doc: JsonDoc) -> int:
    """Kueue's ``status.requeueState.count`` as last written (0 when absent or malformed)."""
    status = doc.get("status")
    state = status.get("requeueState") if isinstance(status, dict) else None
    count = state.get("count") if isinstance(state, dict) else None
    return count if isinstance(count, int) and count > 0 else 0


def past_execution_from_status(doc: JsonDoc) -> int:
    """Kueue's ``status.accumulatedPastExecutionTimeSeconds`` as last written (0 if absent)."""
    status = doc.get("status")
    past = status.get("accumulatedPastExecutionTimeSeconds") if isinstance(status, dict) else None
    return past if isinstance(past, int) and past > 0 else 0


def checks_from_internal(internal: JsonDoc) -> list[AdmissionCheckStatus]:
    """The admission check states a restart gives back to a restored admission."""
    out = []
    for raw in internal.get("checks") or []:
        if not isinstance(raw, dict):
            continue
        after, retries = raw.get("requeueAfterSeconds"), raw.get("retryCount")
        out.append(
            AdmissionCheckStatus(
                str(raw["name"]),
                CheckStateValue(str(raw["state"])),
                str(raw.get("message", "")),
                float(raw["lastTransitionTime"]),
                int(after) if after is not None else None,
                int(retries) if retries is not None else None,
            )
        )
    return out


def admission_from_internal(internal: JsonDoc) -> tuple[Admission, float] | None:
    raw = internal.get("admission")
    if not isinstance(raw, dict) or internal.get("admittedAt") is None:
        return None
    pod_sets = [
        PodSetAssignment(
            name=str(p["name"]),
            flavors={str(k): str(v) for k, v in p["flavors"].items()},
            count=int(p["count"]),
            resource_usage={str(k): int(v) for k, v in p["usage"].items()},
        )
        for p in raw.get("podSets", [])
    ]
    return Admission(str(raw["clusterQueue"]), pod_sets), float(internal["admittedAt"])


def event_record(event_id: int, ev: Event) -> EventRecord:
    """A core event as the store keeps it, with the namespace it belongs to."""
    ns = ""
    if ev.workload:
        ns = ev.workload.partition("/")[0]
    elif "/" in ev.object:
        ns = ev.object.split(" ", 1)[-1].partition("/")[0]
    return EventRecord(
        event_id, ev.time, ns, ev.type, ev.reason, ev.object, ev.message, ev.workload, ev.related
    )
