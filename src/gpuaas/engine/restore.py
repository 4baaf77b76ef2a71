"""Rebuilding the engine's core Cluster from the store: on start, and after a failed commit.

``Engine`` inherits ``Restore``. Objects come back in creation order as they were created; admitted
workloads keep their admission (same flavors, same admission time) and pending ones re-queue with
their original creation time, so the pending order is what it was; what cannot be parsed any more
is reported in ``restore_problems`` instead of stopping the server. Nothing here decides an
admission: the restored Cluster is settled by the engine's own ``_settle``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuaas.core.cluster import Cluster
from gpuaas.core.config import SchedulerConfig
from gpuaas.core.manifests import ManifestError, parse_object
from gpuaas.core.objects import AdmissionCheck, Workload
from gpuaas.core.state import Event, Phase
from gpuaas.engine import documents, finalizers, persisted
from gpuaas.engine.errors import Unavailable
from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.engine.settling import SettlingLock
from gpuaas.store import Ack, GroupCommitter, JsonDoc, ObjectKey, ObjectRecord, Store, StoreError
from gpuaas.vocab import render
from gpuaas.vocab.kinds import WORKLOAD, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import _Batch

REQUEUE_BATCH_SECONDS = 1.0  # Kueue's requeueBatchPeriod


class Restore:
    """Loading the store into a new Cluster; see the module docstring."""

    store: Store
    committer: GroupCommitter
    config: SchedulerConfig
    instant_evictions: bool
    clock: Callable[[], float]
    commit_timeout: float
    _lock: SettlingLock
    _cluster: Cluster
    _arrivals: deque[tuple[Workload, float]]
    _served_checks: set[str]
    _loads: int
    _event_id: int
    _fingerprints: dict[str, bytes]
    _last_event: dict[str, int]
    _fresh: dict[ObjectKey, tuple[int, JsonDoc]]
    objects: ObjectIndex
    terminating: set[ObjectKey]
    rv: int
    restore_problems: list[str]

    if TYPE_CHECKING:  # the engine's own, for the type checker only

        @staticmethod
        def _kind_of(key: ObjectKey) -> Kind | None: ...
        def _owner_record(self, rec: ObjectRecord) -> ObjectRecord | None: ...
        def _settle(self, now: float, batch: _Batch) -> None: ...
        @staticmethod
        def _new_batch() -> _Batch: ...
        def _commit(self, batch: _Batch) -> Ack: ...
        def _decide(self, now: float) -> list[Event]: ...

    # -- restart --------------------------------------------------------------------------------
    def _load(self) -> None:
        """Rebuild the Cluster from the store, then settle it at the current time."""
        loaded = self.store.load()
        self._loads += 1
        self._arrivals = deque()  # stored ones come back from the store below; the rest failed
        self._cluster = self._new_cluster()
        repaired = []
        for i, rec in enumerate(loaded.objects):
            doc, changed = documents.finite_json(rec.doc_json)
            if changed:  # stored by an older version: served (and next written) without NaN
                loaded.objects[i] = rec = rec.replace(doc=doc)
                rec.compact()  # held for good without a commit, which would compact it
                repaired.append(f"{rec.key.gk} {rec.key.namespace}/{rec.key.name}")
        self.objects = ObjectIndex(loaded.objects)
        self.terminating = {k for k, r in self.objects.items() if finalizers.terminating(r.doc)}
        self.rv, self._event_id = loaded.max_rv, loaded.max_event_id
        self._fingerprints, self._last_event, self.restore_problems = {}, {}, []
        self._fresh = {}
        self.restore_problems += [f"{r}: NaN or infinite numbers read as null" for r in repaired]
        workloads: list[ObjectRecord] = []
        # 1. Every non-workload object, in creation order, as it was created.
        for rec in loaded.objects:
            kind = self._kind_of(rec.key)
            if kind is WORKLOAD:
                workloads.append(rec)
            elif kind is not None and not kind.job and not kind.stored:
                self._restore_apply(rec, rec.doc)
        # 2. Workloads in creation order: admitted ones keep their admission, others re-queue
        #    with their original creation time, so pending order is what it was.
        for rec in workloads:
            owner = self._owner_record(rec)
            doc = rec.doc
            source = owner.doc if owner is not None else doc
            try:
                obj = documents.shared_strings(parse_object(source))
            except ManifestError as exc:
                self.restore_problems.append(f"not restored: {exc}")
                continue
            if not isinstance(obj, Workload):
                continue
            obj.uid = str(doc.get("metadata", {}).get("uid") or "")
            if owner is not None and (doc.get("spec") or {}).get("active") is False:
                obj.active = False  # deactivated by gpuaas (idle GPUs): the Job says nothing
            restored = persisted.admission_from_internal(rec.internal)
            phase = rec.internal.get("phase")
            if restored is not None and phase in (Phase.ADMITTED, Phase.EVICTING):
                admission, admitted_at = restored
                checks = persisted.checks_from_internal(rec.internal)
                self._cluster.restore_admission(obj, admission, admitted_at, rec.created, checks)
                nominated, cluster_name = persisted.placement_from_internal(rec.internal)
                if (nominated or cluster_name) and phase == Phase.ADMITTED:
                    self._cluster.set_cluster_nomination(obj.key, nominated, cluster_name)
            else:
                self._cluster.apply(obj, rec.created)
                if phase == Phase.FINISHED:  # with its stored Finished reason and message
                    conds = (doc.get("status") or {}).get("conditions") or []
                    done: JsonDoc = next((c for c in conds if c.get("type") == "Finished"), {})
                    reason, message = str(done.get("reason") or ""), str(done.get("message") or "")
                    self._cluster.finish(obj.key, rec.created, reason != "Failed", reason, message)
            st = self._cluster.workloads.get(obj.key)
            if st is not None:
                st.requeue_state_count = persisted.requeue_count_from_status(rec.doc)
                past = persisted.past_execution_from_status(rec.doc)
                self._cluster.restore_past_execution(obj.key, past)
            if st is not None and render.workload_status(st) == rec.doc.get("status"):
                self._fingerprints[obj.key] = persisted.fingerprint(st)
        # 3. A ClusterQueue deleted but kept by its finalizer is terminating again.
        for key in sorted(self.terminating, key=str):
            if key.gk.endswith("/ClusterQueue"):
                self._cluster.delete("ClusterQueue", None, key.name, self.clock())
        # 4. Settle at the current time and persist what changed.
        batch = self._new_batch()
        self._settle(self.clock(), batch)
        if batch.writes:
            self.committer.submit(batch.writes).result(timeout=self.commit_timeout)

    def _new_cluster(self) -> Cluster:
        # Kueue's 1 s requeueBatchPeriod on the wall clock (the README says so).
        batch = REQUEUE_BATCH_SECONDS
        return Cluster(
            self.config, instant_evictions=self.instant_evictions, requeue_batch_seconds=batch
        )

    def serve_checks(self, controller_name: str) -> None:
        """A check controller for ``controller_name`` runs in this server: its checks are
        Active (Kueue's controllers set that condition when they can evaluate the check)."""
        with self._lock:
            self._served_checks.add(controller_name)
            for ac in list(self._cluster.admission_checks.values()):
                self._mark_served(ac)

    def _mark_served(self, ac: AdmissionCheck) -> None:
        if ac.controller_name in self._served_checks:
            self._cluster.set_check_active(ac.name, True)

    def _restore_apply(self, rec: ObjectRecord, doc: JsonDoc) -> None:
        try:
            obj = documents.shared_strings(parse_object(doc))
            self._cluster.apply(obj, rec.created)
            if isinstance(obj, AdmissionCheck):
                self._mark_served(obj)
        except ManifestError as exc:
            self.restore_problems.append(f"not restored: {exc}")

    def _reload_if_failed(self) -> None:
        if not self.committer.failed:
            return
        # Everything queued before now was decided on lost writes: let it drain (and fail).
        self.committer.submit([]).exception(timeout=self.commit_timeout)
        self._load_after_failure()

    def _load_after_failure(self) -> None:
        self.committer.reset()
        try:
            self._load()
        except StoreError as exc:
            raise Unavailable(f"the store is unavailable: {exc}") from exc
