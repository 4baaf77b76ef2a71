"""The MultiKueue controller's writes on the manager, each one request's worth of engine steps.

Kueue's controller patches a Workload's status (check state, ``nominatedClusterNames``,
``clusterName``: one patch) and the ``status`` of a MultiKueueCluster, an AdmissionCheck or a
Job. These are those writes with the engine's usual steps under its lock: apply to the core
where the core keeps the state, settle, commit, then wait for the store outside the lock (a
pass's workload updates are waited for later: ``apply_workloads``). They are called from the
controller's own thread, never from an engine hook, and never do remote I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuaas.core.errors import ApplyError
from gpuaas.core.state import Event
from gpuaas.engine.errors import NotFound
from gpuaas.vocab.kinds import BY_KIND, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine
    from gpuaas.store.groupcommit import Ack

JsonDoc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkloadUpdate:
    """One workload's MultiKueue change: its check's state, its nomination, its chosen worker,
    or finishing with the worker's outcome; and the events that say so."""

    key: str
    check: str
    state: tuple[str, str] | None = None
    nominated: tuple[str, ...] | None = None
    cluster_name: str | None = None
    finish: tuple[bool, str] | None = None  # (succeeded, message)
    events: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """The ``status`` of a stored object the core does not keep (a Job mirrored from its
    worker), replaced whole. It is stored as it is, not copied: nobody changes it after (the
    controller's are the worker caches' documents, which are replaced, never edited)."""

    kind: Kind
    namespace: str | None
    name: str
    status: JsonDoc


def update_workloads(
    engine: Engine, updates: list[WorkloadUpdate], statuses: Sequence[StatusWrite] = ()
) -> list[str]:
    """``apply_workloads``, then wait until it is stored. Returns the keys of the updates
    applied."""
    applied, ack = apply_workloads(engine, updates, statuses)
    if ack is not None:
        engine._wait(ack)
    return applied


def apply_workloads(
    engine: Engine, updates: list[WorkloadUpdate], statuses: Sequence[StatusWrite] = ()
) -> tuple[list[str], Ack | None]:
    """Apply a pass's updates and status writes in one settle and one commit (one durable
    write for all, where one commit each kept the pass waiting for an fsync per mirrored Job);
    an update the workload moved past meanwhile (no quota any more, gone, clusterName already
    another) is skipped, and the next pass reads it again. Returns the keys of the updates
    applied and the commit's ``Ack`` (None: nothing to commit), not waited for: the caller
    waits (``saved``) before anything it does elsewhere depends on these writes."""
    if not updates and not statuses:
        return [], None
    applied: list[str] = []
    with engine._lock:
        engine._reload_if_failed()
        now = engine.clock()
        for u in updates:
            st = engine._cluster.workloads.get(u.key)
            if st is None:
                continue
            try:
                if u.finish is not None:
                    if not engine._cluster.finish(u.key, now, succeeded=u.finish[0]):
                        continue
                else:
                    if u.nominated is not None or u.cluster_name is not None:
                        names = st.nominated_cluster_names if u.nominated is None else u.nominated
                        engine._cluster.set_cluster_nomination(u.key, names, u.cluster_name)
                    if u.state is not None:
                        engine._cluster.set_check_state(u.key, u.check, *u.state, now)
            except ApplyError:
                continue
            applied.append(u.key)
            for message in u.events:
                engine.record_event(
                    Event(now, "Normal", "MultiKueue", f"Workload {u.key}", message, u.key)
                )
        batch = engine._new_batch()
        for w in statuses:
            _put_status(engine, batch, w)
        engine._settle(now, batch)
        ack = engine._commit(batch)
    return applied, ack


def saved(engine: Engine, ack: Ack) -> None:
    """Wait until the writes of ``ack`` are stored; ``Unavailable`` if they were not."""
    engine._wait(ack)


def update_workload(
    engine: Engine,
    key: str,
    check: str,
    state: tuple[str, str] | None,
    nominated: tuple[str, ...] | None,
    cluster_name: str | None,
    events: list[str],
) -> bool:
    """One workload's update (``update_workloads`` of one); False when it was skipped."""
    update = WorkloadUpdate(key, check, state, nominated, cluster_name, None, tuple(events))
    return bool(update_workloads(engine, [update]))


def write_status(
    engine: Engine, kind: Kind, namespace: str | None, name: str, status: JsonDoc
) -> bool:
    """Replace the ``status`` of a stored object the core does not keep (MultiKueueCluster,
    a Job mirrored from its worker). False when it is gone or already says so."""
    with engine._lock:
        engine._reload_if_failed()
        batch = engine._new_batch()
        write = StatusWrite(kind, namespace, name, copy.deepcopy(status))
        found = _put_status(engine, batch, write)
        if not batch.writes:  # gone, or already so: nothing to wait for
            return found
        fut = engine._commit(batch)
    engine._wait(fut)
    return found


def _put_status(engine: Engine, batch: Any, w: StatusWrite) -> bool:
    """Queue ``w`` in ``batch`` (under the engine lock) unless the object already says so;
    False when it is gone."""
    old = engine.objects.get(engine.key_of(w.kind, w.namespace, w.name))
    if old is None:
        return False
    doc = old.doc  # a fresh copy, decoded on read
    if doc.get("status") == w.status:
        return True
    rv = engine._next_rv()
    doc["status"] = w.status
    doc["metadata"]["resourceVersion"] = str(rv)
    engine._put(batch, old.replace(rv=rv, doc=doc), "MODIFIED", doc)
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


__all__ = [
    "StatusWrite",
    "WorkloadUpdate",
    "apply_workloads",
    "saved",
    "update_workload",
    "update_workloads",
    "write_admission_check_active",
    "write_status",
]
