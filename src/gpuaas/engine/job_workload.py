"""A job's own Workload written directly, not through its job: deleted, or deactivated.

``Engine`` inherits ``JobWorkload``. A Job (RayCluster, RayJob, ...) owns the Workload gpuaas
derives from it, and most of that Workload follows the job. Kueue lets two writes reach the
Workload itself, and users make both: ``kubectl delete workload`` (the job reconciler stops the
job and, unless it finished, creates a new Workload for it: ``handleJobWithNoWorkload``), and
setting ``spec.active`` (``kueuectl stop workload``, ``kubectl patch``: false stops the job and
releases its quota, true lets it queue again; the job's own updates never change it). Any other
change to such a Workload is refused, naming the job to change instead, as gpuaas did for every
write before: its spec is the job's, re-derived on each job update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import KueueObject, Workload
from gpuaas.engine import documents
from gpuaas.engine.errors import Conflict, Invalid
from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.store import Ack, JsonDoc, ObjectKey, ObjectRecord
from gpuaas.vocab.kinds import Kind
from gpuaas.vocab.multikueue import prebuilt_workload_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuaas.engine.engine import _Batch


class JobWorkload:
    """Deletes and ``spec.active`` changes of a job's own Workload; see the module docstring."""

    clock: Callable[[], float]
    _cluster: Cluster
    objects: ObjectIndex

    if TYPE_CHECKING:  # the engine's own, for the type checker only

        @staticmethod
        def _kind_of(key: ObjectKey) -> Kind | None: ...
        @staticmethod
        def _new_batch() -> _Batch: ...
        def _next_rv(self) -> int: ...
        def _owner_record(self, rec: ObjectRecord) -> ObjectRecord | None: ...
        def _put(
            self, batch: _Batch, rec: ObjectRecord, change_type: str, doc: JsonDoc | None = None
        ) -> None: ...
        def _put_derived(
            self,
            batch: _Batch,
            wl: Workload,
            owner: JsonDoc,
            now: float,
            *,
            created: bool,
            uid: str | None = None,
        ) -> None: ...
        def _apply(self, obj: KueueObject | None, now: float) -> None: ...
        def _remove(self, batch: _Batch, key: ObjectKey, doc: JsonDoc | None = None) -> None: ...
        def _settle(self, now: float, batch: _Batch) -> None: ...
        def _commit(self, batch: _Batch) -> Ack: ...

    def _job_workload(self, owner: ObjectRecord) -> Workload | None:
        """The Workload the job derives now, with the job's uid (None for a prebuilt copy's
        job: MultiKueue made that Workload, not the job)."""
        kind = self._kind_of(owner.key)
        if kind is None or prebuilt_workload_name(owner.doc["metadata"]) is not None:
            return None
        obj = documents.parse(owner.doc)
        if not isinstance(obj, Workload):
            return None
        documents.stamp_uid(obj, kind, owner.doc["metadata"])
        return obj

    def _delete_job_workload(
        self, old: ObjectRecord, namespace: str, name: str
    ) -> tuple[JsonDoc, Ack]:
        """Gone, and made anew for its job (new uid and creation time, queued afresh) unless
        the job finished or names a prebuilt Workload. Under the lock."""
        now = self.clock()
        batch = self._new_batch()
        shown = old.doc
        owner = self._owner_record(old)
        again = self._cluster.delete_workload_object(namespace, name, now)
        self._remove(batch, old.key, shown)
        obj = self._job_workload(owner) if again is not None and owner is not None else None
        if obj is not None and owner is not None:
            self._put_derived(batch, obj, owner.doc, now, created=True)
            self._apply(obj, now)
        self._settle(now, batch)
        return shown, self._commit(batch)

    def _replace_job_workload(self, old: ObjectRecord, doc: JsonDoc) -> tuple[JsonDoc, Ack | None]:
        """``doc`` (checked) may change ``spec.active`` and labels and annotations, nothing else
        of the spec. Under the lock; no Ack when nothing changed."""
        key = old.key
        where = f"Workload {key.namespace}/{key.name}"
        owner = self._owner_record(old)
        want_rv = doc["metadata"].get("resourceVersion")
        have_rv = old.doc["metadata"].get("resourceVersion")
        if want_rv not in (None, "", have_rv):
            raise Conflict(
                f"{where}: the object has been modified (resourceVersion {want_rv} is not the "
                f"current {have_rv}); read it again and retry"
            )
        spec = dict(doc.get("spec") or {})
        old_spec = dict(old.doc.get("spec") or {})
        active = spec.pop("active", True) is not False
        was_active = old_spec.pop("active", True) is not False
        if spec != old_spec or owner is None:
            what = owner.key.gk.rsplit("/", 1)[-1] if owner is not None else "job"
            raise Invalid(
                f"{where} is owned by its {what}; only spec.active may change here (and "
                f"labels, annotations): change the {what} for the rest"
            )
        meta = dict(old.doc["metadata"])
        for field in ("labels", "annotations"):
            if doc["metadata"].get(field):
                meta[field] = doc["metadata"][field]
            else:
                meta.pop(field, None)
        new = {**old.doc, "metadata": meta, "spec": {**old_spec, "active": active}}
        if active:
            new["spec"].pop("active")  # as the job's own Workload is written: active by default
        if active != was_active:
            meta["generation"] = int(meta.get("generation", 1)) + 1
        if new == old.doc:
            return old.doc, None
        now = self.clock()
        batch = self._new_batch()
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        self._put(batch, old.replace(rv=rv, doc=new), "MODIFIED", new)
        if active != was_active:
            obj = self._job_workload(owner)
            if obj is None:  # a prebuilt copy's job: the Workload is the core's object itself
                parsed = documents.parse(new)
                obj = parsed if isinstance(parsed, Workload) else None
            if obj is not None:
                obj.uid = str(meta.get("uid") or "")
                obj.active = active
                obj.active_given = True  # the Workload's own spec.active, not the job's default
                self._apply(obj, now)
        self._settle(now, batch)
        return new, self._commit(batch)


__all__ = ["JobWorkload"]
