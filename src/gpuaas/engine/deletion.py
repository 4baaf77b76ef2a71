"""Deleting objects: at once, or marked with a deletionTimestamp while finalizers remain.

``Engine`` inherits ``Deletion``. A delete without finalizers removes the object (a Namespace with
everything in it; a Job with its Workload) and settles what that frees in the same batch; one with
finalizers only gets its deletionTimestamp (``engine.finalizers``), and goes when the last one is
removed. What a deletion frees is decided by the core's ``delete``, never here.

``delete_many`` makes the deletes of several objects of one kind from one thread, as
``create_many`` does for creates: the server hands it the DELETEs that arrive in one event-loop
step (``api.write_workers.offload_many``). Those without finalizers share one settle and one
commit, as deletes that reach Kueue between two of its scheduling cycles are seen together by
the next one. A MultiKueue hub removes the copies its workers did not win that way (two per
workload on three workers), each on its own connection at once: one at a time, each delete ran
its own scheduling cycle, gathered the statuses, submitted its commit and woke its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gpuaas.core.cluster import Cluster
from gpuaas.engine import finalizers
from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.engine.settling import SettlingLock
from gpuaas.store import Ack, JsonDoc, ObjectKey, ObjectRecord
from gpuaas.vocab.kinds import NAMESPACE, WORKLOAD, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import _Batch


class Deletion:
    """Deletes and finalizers; see the module docstring."""

    clock: Callable[[], float]
    _lock: SettlingLock
    _cluster: Cluster
    objects: ObjectIndex

    if TYPE_CHECKING:  # the engine's own, for the type checker only

        @staticmethod
        def _kind_of(key: ObjectKey) -> Kind | None: ...
        def key_of(self, kind: Kind, namespace: str | None, name: str) -> ObjectKey: ...
        def _existing_unowned(
            self, kind: Kind, namespace: str | None, name: str, key: ObjectKey, verb: str
        ) -> ObjectRecord: ...
        def _reload_if_failed(self) -> None: ...
        def _delete_job_workload(
            self, old: ObjectRecord, namespace: str, name: str
        ) -> tuple[JsonDoc, Ack]: ...
        def _settle(self, now: float, batch: _Batch) -> None: ...
        @staticmethod
        def _new_batch() -> _Batch: ...
        def _commit(self, batch: _Batch) -> Ack: ...
        def _wait(self, fut: Ack) -> None: ...
        def _remove(self, batch: _Batch, key: ObjectKey, doc: JsonDoc | None = None) -> None: ...
        def _mark_deleted(
            self, kind: Kind, old: ObjectRecord, now: float, batch: _Batch
        ) -> tuple[JsonDoc, Ack]: ...

    def _finalized(self, kind: Kind, key: ObjectKey) -> Ack:
        """The last finalizer of a terminating object was removed: it is gone now (a
        Namespace with what is in it). Under the lock; the caller waits for the commit."""
        now = self.clock()
        batch = self._new_batch()
        if kind is NAMESPACE:
            for k in [k for k in self.objects if k.namespace == key.name]:
                self._delete_one(batch, k, now)
        self._delete_one(batch, key, now)
        self._settle(now, batch)
        return self._commit(batch)

    def delete(self, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
        with self._lock:
            self._reload_if_failed()
            key = self.key_of(kind, namespace, name)
            owned = self.objects.get(key) if kind is WORKLOAD else None
            made_anew = owned is not None and bool(owned.internal.get("owner"))
            if owned is not None and made_anew and namespace is not None:
                # a job's own Workload: gone, and made anew for its job (engine.job_workload);
                # the answer is the Workload deleted, not the one made after it
                shown, fut = self._delete_job_workload(owned, namespace, name)
            else:
                shown, maybe = self._delete_locked(kind, namespace, name, key)
                if maybe is None:  # terminating already: nothing to write
                    return shown
                fut = maybe
        self._wait(fut)
        if made_anew:
            return shown
        with self._lock:
            current = self.objects.get(key)
            return current.doc if current is not None else shown

    def _delete_locked(
        self, kind: Kind, namespace: str | None, name: str, key: ObjectKey
    ) -> tuple[JsonDoc, Ack | None]:
        """``delete`` of anything but a job's own Workload, under the lock: the answer and its
        commit (none for an object already terminating)."""
        old = self._existing_unowned(kind, namespace, name, key, "delete")
        now = self.clock()
        batch = self._new_batch()
        shown = old.doc  # decoded once (each read of a record's doc decodes it anew)
        if finalizers.terminating(shown):
            return shown, None
        if finalizers.finalizers_of(shown):
            return self._mark_deleted(kind, old, now, batch)
        if kind is NAMESPACE:
            for k in [k for k in self.objects if k.namespace == name]:
                self._delete_one(batch, k, now)
        self._delete_one(batch, key, now, shown)  # not decoded again for its change
        self._settle(now, batch)
        return shown, self._commit(batch)

    def delete_many(
        self, kind: Kind, items: Sequence[tuple[str | None, str]]
    ) -> list[JsonDoc | Exception]:
        """``delete(kind, namespace, name)`` for each item, in order, waited for together: each
        answer, or what its delete raised. Namespaces (whose delete takes everything in them) are
        deleted one by one."""
        with self._lock:  # a job's own Workload is made anew: one by one, as delete does
            one_by_one = kind is WORKLOAD and self._any_owned(items)
        if kind is NAMESPACE or len(items) == 1 or one_by_one:
            return [_answer(self.delete, kind, namespace, name) for namespace, name in items]
        out: list[JsonDoc | Exception | None] = [None] * len(items)
        gone: list[tuple[int, ObjectKey, JsonDoc]] = []  # removed: answered once stored
        commits: list[tuple[Ack, list[int]]] = []  # each commit and the deletes it carries
        with self._lock:
            self._reload_if_failed()
            now = self.clock()
            batch, carried = self._new_batch(), list[int]()
            for i, (namespace, name) in enumerate(items):
                try:
                    key = self.key_of(kind, namespace, name)
                    old = self._existing_unowned(kind, namespace, name, key, "delete")
                except Exception as exc:  # that delete's answer; the others go on
                    out[i] = exc
                    continue
                shown = old.doc  # decoded once (each read of a record's doc decodes it anew)
                if finalizers.terminating(shown):
                    out[i] = shown
                elif finalizers.finalizers_of(shown):
                    # Committed on its own, after what was removed before it: resourceVersions
                    # reach the store and the watches in the order they were given.
                    if carried:
                        self._settle(now, batch)
                        commits.append((self._commit(batch), carried))
                        batch, carried = self._new_batch(), []
                    out[i], ack = self._mark_deleted(kind, old, now, self._new_batch())
                    commits.append((ack, [i]))
                else:
                    self._delete_one(batch, key, now, shown)  # not decoded again
                    gone.append((i, key, shown))
                    carried.append(i)
            if carried:
                self._settle(now, batch)
                commits.append((self._commit(batch), carried))
        for ack, carried in commits:
            try:
                self._wait(ack)
            except Exception as exc:  # not stored: each delete it carried says so
                for i in carried:
                    out[i] = exc
        with self._lock:
            for i, key, shown in gone:
                if out[i] is None:
                    current = self.objects.get(key)
                    out[i] = current.doc if current is not None else shown
        answers = [o for o in out if o is not None]
        assert len(answers) == len(items), "a delete without an answer"
        return answers

    def _delete_one(
        self, batch: _Batch, key: ObjectKey, now: float, doc: JsonDoc | None = None
    ) -> None:
        """``doc``: the object's document, when the caller has it decoded (and leaves it be)."""
        kind = self._kind_of(key)
        if kind is None or key not in self.objects:
            return
        self._remove(batch, key, doc)
        ns = key.namespace or None
        if kind.job:
            wl_key = ObjectKey(WORKLOAD.gk, key.namespace, key.name)
            if wl_key in self.objects:
                self._remove(batch, wl_key)
            self._cluster.delete("Workload", ns, key.name, now)
        elif kind is not WORKLOAD or not self._is_owned(key):
            self._cluster.delete(kind.kind, ns, key.name, now)

    def _any_owned(self, items: Sequence[tuple[str | None, str]]) -> bool:
        return any(self._is_owned(self.key_of(WORKLOAD, ns, name)) for ns, name in items)

    def _is_owned(self, key: ObjectKey) -> bool:
        rec = self.objects.get(key)
        return rec is not None and bool(rec.internal.get("owner"))


def _answer(
    delete: Callable[[Kind, str | None, str], JsonDoc], kind: Kind, namespace: str | None, name: str
) -> JsonDoc | Exception:
    try:
        return delete(kind, namespace, name)
    except Exception as exc:
        return exc
