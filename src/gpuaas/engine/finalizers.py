"""Finalizers and ``deletionTimestamp`` as Kubernetes has them, and Kueue's ``resource-in-use``.

A DELETE of an object with finalizers does not remove it: it gets ``deletionTimestamp`` (and
``deletionGracePeriodSeconds: 0``) and stays, Terminating, until an update removes its last
finalizer; then it is gone. An update may not add a finalizer to a terminating object, nor set or
change ``deletionTimestamp``.

Kueue's webhooks put ``kueue.x-k8s.io/resource-in-use`` on every ResourceFlavor, ClusterQueue and
AdmissionCheck (and its controllers put it back if removed), and its controllers remove it from a
deleted one only once it is unused (``pkg/controller/core``): a ResourceFlavor or an
AdmissionCheck while no ClusterQueue names it, a ClusterQueue once no workload holds its quota
(``ClusterQueueEmpty``). A terminating ClusterQueue is inactive (reason Terminating) and admits
nothing new: the core's ``Cluster.delete`` marks it so. A terminating flavor or check stays in the
core, as in Kueue's cache, until the object is gone.

Functions over documents plus ``in_use``, which reads the core Cluster, and two engine steps
(``release``, ``mark_deleted``) that the engine runs under its lock, as ``engine.status`` does.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from gpuaas.core.cluster import Cluster
from gpuaas.engine.errors import Invalid
from gpuaas.store import Ack, ObjectRecord
from gpuaas.vocab import render
from gpuaas.vocab.kinds import Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine, _Batch

JsonDoc = dict[str, Any]

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
GUARDED = frozenset({"ResourceFlavor", "ClusterQueue", "AdmissionCheck"})


def finalizers_of(doc: JsonDoc) -> list[str]:
    value = (doc.get("metadata") or {}).get("finalizers") or []
    return [f for f in value if isinstance(f, str)] if isinstance(value, list) else []


def terminating(doc: JsonDoc) -> bool:
    return bool((doc.get("metadata") or {}).get("deletionTimestamp"))


def _check_list(kind: Kind, name: str, doc: JsonDoc) -> None:
    value = (doc.get("metadata") or {}).get("finalizers")
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(f, str) and f for f in value):
        raise Invalid(f"{kind.kind} {name}: metadata.finalizers: must be a list of names")
    for f in value:
        if "/" not in f and f not in ("kubernetes", "foregroundDeletion", "orphan"):
            raise Invalid(
                f'{kind.kind} {name}: metadata.finalizers: Invalid value: "{f}": name is neither '
                "a standard finalizer name nor is it fully qualified"
            )


def on_create(kind: Kind, name: str, doc: JsonDoc) -> None:
    """A new object: no deletion stamp from the client; Kueue's webhook adds its finalizer."""
    _check_list(kind, name, doc)
    meta = doc["metadata"]
    meta.pop("deletionTimestamp", None)
    meta.pop("deletionGracePeriodSeconds", None)
    if kind.kind in GUARDED:
        _add(meta, RESOURCE_IN_USE)


def on_update(kind: Kind, name: str, old: JsonDoc, new: JsonDoc) -> None:
    """An update: the deletion stamp stays as stored; a terminating object takes no new
    finalizer; a live Kueue object keeps Kueue's (its controller puts it back)."""
    _check_list(kind, name, new)
    meta, old_meta = new["metadata"], old.get("metadata") or {}
    for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if terminating(old):
        added = [f for f in finalizers_of(new) if f not in finalizers_of(old)]
        if added:
            raise Invalid(
                f"{kind.kind} {name}: metadata.finalizers: Forbidden: no new finalizers can be "
                f"added if the object is being deleted, found new finalizers {added}"
            )
    elif kind.kind in GUARDED:
        _add(meta, RESOURCE_IN_USE)


def _add(meta: JsonDoc, finalizer: str) -> None:
    current = meta.get("finalizers")
    if not isinstance(current, list):
        current = []
    if finalizer not in current:
        meta["finalizers"] = [*current, finalizer]


def marked_for_deletion(doc: JsonDoc, stamp: str) -> JsonDoc:
    """``doc`` as a DELETE leaves an object with finalizers: Terminating."""
    out = copy.deepcopy(doc)
    meta = out["metadata"]
    meta.setdefault("deletionTimestamp", stamp)
    meta.setdefault("deletionGracePeriodSeconds", 0)
    return out


def in_use(cluster: Cluster, kind: str, name: str) -> bool:
    """Whether Kueue's controller would keep ``resource-in-use`` on a deleted object."""
    if kind == "ClusterQueue":
        cq = cluster.cqs.get(name)
        return cq is not None and bool(cq.admitted)
    if kind == "ResourceFlavor":
        return any(
            fq.name == name
            for cq in cluster.cqs.values()
            for rg in cq.spec.resource_groups
            for fq in rg.flavors
        )
    if kind == "AdmissionCheck":
        return any(
            rule.name == name for cq in cluster.cqs.values() for rule in cq.spec.admission_checks
        )
    return False


def released(cluster: Cluster, kind: str, name: str, doc: JsonDoc) -> JsonDoc | None:
    """``doc`` without Kueue's finalizer when its controller would remove it now, else None."""
    names = finalizers_of(doc)
    if RESOURCE_IN_USE not in names or in_use(cluster, kind, name):
        return None
    out = copy.deepcopy(doc)
    out["metadata"]["finalizers"] = [f for f in names if f != RESOURCE_IN_USE]
    if not out["metadata"]["finalizers"]:
        del out["metadata"]["finalizers"]
    return out


def release(engine: Engine, batch: _Batch, now: float) -> None:
    """Kueue's controllers, before each settle: drop ``resource-in-use`` from deleted objects
    no longer used, and remove those left with no finalizer."""
    for key in sorted(engine.terminating, key=str):
        rec = engine.objects.get(key)
        kind = engine._kind_of(key)
        if rec is None or kind is None or kind.kind not in GUARDED:
            continue
        doc = released(engine._cluster, kind.kind, key.name, rec.doc)
        if doc is None:
            continue
        if finalizers_of(doc):
            rv = engine._next_rv()
            doc["metadata"]["resourceVersion"] = str(rv)
            engine._put(batch, rec.replace(rv=rv, doc=doc), "MODIFIED")
        else:
            engine._delete_one(batch, key, now)


def mark_deleted(
    engine: Engine, kind: Kind, old: ObjectRecord, now: float, batch: _Batch
) -> tuple[JsonDoc, Ack]:
    """A DELETE of an object with finalizers: Terminating until they are removed. A terminating
    ClusterQueue stops admitting at once, as in Kueue; the caller waits for the commit."""
    rv = engine._next_rv()
    doc = marked_for_deletion(old.doc, render.rfc3339(now))
    doc["metadata"]["resourceVersion"] = str(rv)
    engine._put(batch, old.replace(rv=rv, doc=doc), "MODIFIED")
    if kind.kind == "ClusterQueue":
        engine._cluster.delete("ClusterQueue", None, old.key.name, now)
    engine._settle(now, batch)
    return doc, engine._commit(batch)
