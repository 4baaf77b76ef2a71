"""The MultiKueue controller's writes on the manager, each one request's worth of engine steps.

Kueue's controller patches a Workload's status (check state, ``nominatedClusterNames``,
``clusterName``: one patch) and the ``status`` of a MultiKueueCluster, an AdmissionCheck or a
Job. These are those writes with the engine's usual steps under its lock: apply to the core
where the core keeps the state, settle, commit, then wait for the store outside the lock. They
are called from the controller's own thread, never from an engine hook, and never do remote I/O.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpuaas.core.errors import ApplyError
from gpuaas.core.state import Event
from gpuaas.engine.errors import NotFound
from gpuaas.vocab.kinds import BY_KIND, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

JsonDoc = dict[str, Any]


def update_workload(
    engine: Engine,
    key: str,
    check: str,
    state: tuple[str, str] | None,
    nominated: tuple[str, ...] | None,
    cluster_name: str | None,
    events: list[str],
) -> bool:
    """Set the MultiKueue check's state and the nomination of workload ``key`` in one write.

    False when the workload moved on meanwhile (no quota any more, gone): nothing is written
    and the next pass reads it again.
    """
    with engine._lock:
        engine._reload_if_failed()
        now = engine.clock()
        st = engine._cluster.workloads.get(key)
        if st is None:
            return False
        try:
            if nominated is not None or cluster_name is not None:
                names = st.nominated_cluster_names if nominated is None else nominated
                engine._cluster.set_cluster_nomination(key, names, cluster_name)
            if state is not None:
                engine._cluster.set_check_state(key, check, state[0], state[1], now)
        except ApplyError:
            return False
        for message in events:
            engine.record_event(Event(now, "Normal", "MultiKueue", f"Workload {key}", message, key))
        batch = engine._new_batch()
        engine._settle(now, batch)
        fut = engine._commit(batch)
    engine._wait(fut)
    return True


def finish_workload(engine: Engine, key: str, succeeded: bool, message: str) -> bool:
    """The copy on the chosen worker finished: so does the manager's workload."""
    with engine._lock:
        engine._reload_if_failed()
        now = engine.clock()
        if not engine._cluster.finish(key, now, succeeded=succeeded):
            return False
        engine.record_event(
            Event(now, "Normal", "MultiKueue", f"Workload {key}", message or "Finished", key)
        )
        batch = engine._new_batch()
        engine._settle(now, batch)
        fut = engine._commit(batch)
    engine._wait(fut)
    return True


def write_status(
    engine: Engine, kind: Kind, namespace: str | None, name: str, status: JsonDoc
) -> bool:
    """Replace the ``status`` of a stored object the core does not keep (MultiKueueCluster,
    a Job mirrored from its worker). False when it is gone or already says so."""
    with engine._lock:
        engine._reload_if_failed()
        key = engine.key_of(kind, namespace, name)
        old = engine.objects.get(key)
        if old is None:
            return False
        if old.doc.get("status") == status:
            return True
        rv = engine._next_rv()
        doc = copy.deepcopy(old.doc)
        doc["status"] = copy.deepcopy(status)
        doc["metadata"]["resourceVersion"] = str(rv)
        batch = engine._new_batch()
        engine._put(batch, replace(old, rv=rv, doc=doc), "MODIFIED")
        fut = engine._commit(batch)
    engine._wait(fut)
    return True


def write_admission_check_active(engine: Engine, name: str, condition: JsonDoc) -> None:
    """An AdmissionCheck's Active condition, as the MultiKueue admission check controller
    writes it (through the same path as the status subresource)."""
    try:
        doc = engine.get(BY_KIND["AdmissionCheck"], None, name)
    except NotFound:
        return
    conds = [
        c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") != "Active"
    ]
    old = next(
        (c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"),
        None,
    )
    if old is not None and all(
        old.get(k) == condition.get(k) for k in ("status", "reason", "message")
    ):
        return
    engine.update_admission_check_status(name, {"status": {"conditions": [*conds, condition]}})


__all__ = ["finish_workload", "update_workload", "write_admission_check_active", "write_status"]
