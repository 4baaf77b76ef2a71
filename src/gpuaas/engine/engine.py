"""The shell around the core ``Cluster``: load, apply, schedule, persist, publish.

One ``Engine`` owns one core Cluster behind a lock. Every change follows the same steps: (1) check
the request against what is stored, (2) apply it to the Cluster, (3) ``schedule(now)`` with the
wall clock, (4) turn the new object, the changed workload statuses and the events into one batch of
writes, (5) hand the batch to the group committer and, outside the lock, wait until it is durable.
Watchers are told only after the commit.

With the scheduler thread started (``start_scheduler``, as the server does), a Workload create (or
a Job's) does only (1) and (5) for its own document: it is acknowledged once stored, and steps
(2)-(4) run later for every arrival in order, each at the instant it arrived, on the scheduler
thread or on whichever caller takes the lock first (``engine.settling``). The decisions are the
ones a synchronous create would have made; their statuses are persisted in one batch per catch-up. All admission and preemption rules stay in the core; this
module never decides who is admitted. On start (and after a failed commit) the Cluster is rebuilt
from the store: objects in creation order, admitted workloads restored on the same flavors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from gpuaas.core.config import SchedulerConfig
from gpuaas.core.manifest_notebook import notebook_stopped
from gpuaas.core.objects import AdmissionCheck, KueueObject, Workload
from gpuaas.core.state import Event
from gpuaas.engine import (
    admission_hooks,
    documents,
    dry_run,
    finalizers,
    generate_name,
    persisted,
    status,
    uids,
)
from gpuaas.engine.arrivals import Arrivals, Begun, Shared
from gpuaas.engine.deletion import Deletion
from gpuaas.engine.errors import AlreadyExists, Conflict, Invalid, NotFound, Unavailable
from gpuaas.engine.job_watch import JobStatusFeed
from gpuaas.engine.job_workload import JobWorkload
from gpuaas.engine.multikueue import webhook
from gpuaas.engine.observer import EngineObserver
from gpuaas.engine.readmodel import ObjectIndex, ReadModel
from gpuaas.engine.restore import Restore
from gpuaas.engine.settling import SettlingLock
from gpuaas.engine.updates import Updates
from gpuaas.engine.watch import WatchHub
from gpuaas.store import (
    Ack,
    AppendChange,
    AppendEvent,
    Change,
    DeleteObject,
    GroupCommitter,
    JsonDoc,
    ObjectKey,
    ObjectRecord,
    PutObject,
    Store,
    StoreError,
    Write,
    compact_held,
)
from gpuaas.vocab import render
from gpuaas.vocab.kinds import BY_KIND, NAMESPACE, NOTEBOOK, WORKLOAD, Kind

log = logging.getLogger(__name__)

_NS_LABEL = "kubernetes.io/metadata.name"
_OBSERVER_ROUNDS = 10  # observer -> cluster -> observer rounds in one settle, a safety bound


class _Batch:
    """Writes and changes gathered under the lock for one request."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.changes: list[Change] = []


class Engine(Restore, Updates, Deletion, JobWorkload, Arrivals, ReadModel):
    def __init__(
        self,
        store: Store,
        *,
        config: SchedulerConfig | None = None,
        clock: Callable[[], float] = time.time,
        commit_timeout: float = 60.0,
        live_runtime: bool = False,
    ) -> None:
        self.store = store
        # A live runtime releases an evicted workload's quota only once its pods are gone.
        self.instant_evictions = not live_runtime
        self.config = config or SchedulerConfig()
        self.clock = clock
        self.commit_timeout = commit_timeout
        # Records are deflated once stored, on the committer's thread (off the lock), but for a
        # created Workload's: its status replaces it within milliseconds.
        self.committer = GroupCommitter(
            store, stored=lambda w: compact_held(w, self.objects, self._fresh)
        )
        self.hub = WatchHub()
        self._lock = SettlingLock(self._catch_up, self._has_arrivals)
        # Creates stored and acknowledged, not yet applied to the Cluster: (object, instant).
        self._arrivals: deque[tuple[Workload, float]] = deque()
        self._scheduler: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._served_checks: set[str] = set()  # controllerNames a CheckDispatcher runs here
        self._cluster = self._new_cluster()
        self.objects = ObjectIndex()
        self.terminating: set[ObjectKey] = set()  # objects with a deletionTimestamp
        self.rv = 0
        self._event_id = 0
        self._loads = 0  # ReadModel.epoch: rebuilds from the store
        self._audit: list[Event] = []  # events taken early by ReadModel.record_event, in order
        self._fingerprints: dict[str, bytes] = {}
        # Jobs whose status is made when read get a MODIFIED change when it changes (job_watch).
        self.job_feed = JobStatusFeed()
        self._fresh: dict[ObjectKey, tuple[int, JsonDoc]] = {}  # created since the last pass
        self._last_event: dict[str, int] = {}
        self.restore_problems: list[str] = []
        self.observers: list[EngineObserver] = []
        # Set by a runtime bridge: what really runs for a job, shown in a RayCluster's status.
        self.job_status: Callable[[str], JsonDoc] | None = None
        # The same for every job at once (a list of Jobs reads the runtime once, not per Job).
        self.job_statuses: Callable[[], dict[str, JsonDoc]] | None = None
        with self._lock:
            self._load()

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def _kind_of(key: ObjectKey) -> Kind | None:
        return BY_KIND.get(key.gk.rsplit("/", 1)[-1])

    def _owner_record(self, rec: ObjectRecord) -> ObjectRecord | None:
        owner_gk = rec.internal.get("owner")
        if not owner_gk:
            return None
        return self.objects.get(ObjectKey(owner_gk, rec.key.namespace, rec.key.name))

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _put(
        self, batch: _Batch, rec: ObjectRecord, change_type: str, doc: JsonDoc | None = None
    ) -> None:
        """Store ``rec``; ``doc`` (``rec.doc``, when the caller has it) must not change after."""
        self.objects[rec.key] = rec
        doc = rec.doc if doc is None else doc
        if finalizers.terminating(doc):
            self.terminating.add(rec.key)
        else:
            self.terminating.discard(rec.key)
        change = Change(rec.rv, change_type, rec.key, doc)
        batch.writes += [PutObject(rec, doc), AppendChange(change)]
        batch.changes.append(change)

    def _remove(self, batch: _Batch, key: ObjectKey, doc: JsonDoc | None = None) -> None:
        rec = self.objects.pop(key, None)  # doc: rec.doc, when the caller decoded it already
        self.terminating.discard(key)
        if rec is None:
            return
        rv = self._next_rv()
        doc = documents.with_rv(rec.doc if doc is None else doc, rv)
        change = Change(rv, "DELETED", key, doc)
        batch.writes += [DeleteObject(key), AppendChange(change)]
        batch.changes.append(change)

    def _commit(self, batch: _Batch, waiting: bool = True) -> Ack:
        after = lambda c=batch.changes: self.hub.publish(c)  # noqa: E731
        return self.committer.submit(batch.writes, after, waiting=waiting)  # store.groupcommit

    def _wait(self, fut: Ack) -> None:
        try:
            fut.result(timeout=self.commit_timeout)
        except StoreError as exc:
            raise Unavailable(f"not stored, try again: {exc}") from exc
        except TimeoutError as exc:
            raise Unavailable("the store did not confirm the write in time") from exc

    # -- settle: schedule and persist the consequences ------------------------------------------
    def _settle(self, now: float, batch: _Batch) -> None:
        self._release_finalizers(now, batch)
        events = self._decide(now)
        self._collect_statuses(batch)
        self._collect_events(events, batch)

    def _decide(self, now: float) -> list[Event]:
        """Schedule at ``now`` and let the observers act, until quiet; the events, in order."""
        # Every decision and event since the last settle, those of apply/delete included; both
        # are drained so that they do not grow for the life of the server.
        decisions = self._cluster.schedule(now)
        events = self._take_events()
        for _ in range(_OBSERVER_ROUNDS):
            version = self._cluster.version
            for obs in self.observers:
                obs.on_decisions(self, decisions, now)
            events += self._take_events()
            if self._cluster.version == version and not self._cluster.decisions:
                break
            # Observers acted on the cluster (evict, confirm_stopped, finish): settle again and
            # show them what that caused (an admission after a stop), so they can act on it too.
            decisions = self._cluster.schedule(now)
            events += self._take_events()
        return events

    def _take_events(self) -> list[Event]:
        """The core's and the adapters' (``record_event``) events since the last call, in order."""
        events, self._audit = self._audit, []
        return events + self._cluster.take_events()

    @staticmethod
    def _new_batch() -> _Batch:
        return _Batch()

    # -- the status subresource (engine.status) -----------------------------------------------
    def update_check_states(self, namespace: str, name: str, doc: JsonDoc) -> JsonDoc:
        """A check controller outside the server sets states (``status.admissionChecks``)."""
        return status.update_check_states(self, namespace, name, doc)

    def update_admission_check_status(self, name: str, doc: JsonDoc) -> JsonDoc:
        """A check controller outside the server writes its check's Active condition."""
        return status.update_admission_check_status(self, name, doc)

    def add_observer(self, observer: EngineObserver) -> None:
        """Let ``observer`` ride on this engine from the next settle on; it catches up first."""
        with self._lock:
            observer.on_attach(self, self.clock())
            self.observers.append(observer)

    def _collect_statuses(self, batch: _Batch) -> None:
        """Store the status of each workload the core marked as possibly changed (comparing
        every workload after each request would make a write cost O(workloads)), then that of
        their jobs and of those whose pods changed, where a read makes it (``job_watch``)."""
        dirty, self._cluster.dirty = self._cluster.dirty, set()
        fresh, self._fresh = self._fresh, {}
        for key in sorted(dirty):
            st = self._cluster.workloads.get(key)
            if st is None:
                self._fingerprints.pop(key, None)
                continue
            fp = persisted.fingerprint(st)
            if self._fingerprints.get(key) == fp:
                continue
            ns, _, name = key.partition("/")
            okey = ObjectKey(WORKLOAD.gk, ns, name)
            rec = self.objects.get(okey)
            if rec is None:
                continue
            self._fingerprints[key] = fp
            rv = self._next_rv()
            known = fresh.get(okey)
            doc = documents.with_rv(known[1] if known and known[0] == rec.rv else rec.doc, rv)
            doc["status"] = render.workload_status(st)
            spec = doc.get("spec")
            if (
                not st.workload.active
                and isinstance(spec, dict)
                and spec.get("active") is not False
            ):
                # The core deactivated it (Kueue writes spec.active=false): kept across restarts.
                doc["spec"] = {**spec, "active": False}
                doc["metadata"]["generation"] = int(doc["metadata"].get("generation", 1)) + 1
            internal = {**rec.internal, **persisted.internal_state(st)}
            if st.admission is None:
                internal.pop("admission", None)
                internal.pop("admittedAt", None)
            self._put(batch, rec.replace(rv=rv, doc=doc, internal=internal), "MODIFIED", doc)
        self.job_feed.collect(self, dirty, lambda rec, doc: self._put(batch, rec, "MODIFIED", doc))

    def _collect_events(self, events: list[Event], batch: _Batch) -> None:
        for ev in events:
            # A hash, not the strings (kept per object for its life; a clash drops one event).
            sig = hash((ev.type, ev.reason, ev.message))
            if self._last_event.get(ev.object) == sig:
                continue  # as Kubernetes aggregates a repeated event
            self._last_event[ev.object] = sig
            self._event_id += 1
            batch.writes.append(AppendEvent(persisted.event_record(self._event_id, ev)))

    def tick(self) -> None:
        """Schedule at the current time; the server calls this about once a second."""
        with self._lock:
            self._reload_if_failed()
            batch = _Batch()
            now = self.clock()
            for obs in self.observers:
                obs.on_tick(self, now)
            self._settle(now, batch)
            if batch.writes:
                self._commit(batch, waiting=False)

    def poll_observers(self) -> None:
        """Between ticks: observers report what happened outside; settle only if that changed
        the cluster or the core asked to be woken by now (a requeue batch or a back-off ran
        out), so a runtime can be polled often without re-rendering every workload."""
        with self._lock:
            self._reload_if_failed()
            now = self.clock()
            version = self._cluster.version
            for obs in self.observers:
                obs.on_tick(self, now)
            changed = self._cluster.version != version or self._cluster.dirty
            wake = self._cluster.next_wakeup()
            due = wake is not None and wake <= now
            if not (
                changed or due or self._cluster.decisions or self._audit or self.job_feed.touched
            ):
                return
            batch = _Batch()
            self._settle(now, batch)
            if batch.writes:
                self._commit(batch, waiting=False)

    def job_inputs_changed(self, key: str) -> None:
        """What workload ``key``'s job status is made from changed outside the core: a runtime
        started, restarted or ended its pods, or its Ray node records changed. The status (made
        when read) is rendered again at the next settle, and watchers hear of a change. Called
        by an observer, under the lock."""
        self.job_feed.touched.add(key)

    def finish(self, namespace: str, name: str) -> bool:
        """A workload completed (runtimes call this): release its quota and persist."""
        with self._lock:
            self._reload_if_failed()
            now = self.clock()
            if not self._cluster.finish(f"{namespace}/{name}", now):
                return False
            batch = _Batch()
            self._settle(now, batch)
            fut = self._commit(batch)
        self._wait(fut)
        return True

    # -- writes ---------------------------------------------------------------------------------
    def create(self, kind: Kind, namespace: str | None, doc: JsonDoc) -> JsonDoc:
        return self._finish_create(self._begin_create(kind, namespace, doc))

    def _begin_create(
        self, kind: Kind, namespace: str | None, doc: JsonDoc, shared: Shared | None = None
    ) -> Begun:
        """``create`` up to its commit, submitted (or added to ``shared``) but not waited for."""
        # A Workload (or a Job's) is queued for the scheduler thread when it runs; anything else
        # changes what the scheduler sees (quota, queues, namespaces) and settles at once.
        deferred = self._scheduler is not None and (kind is WORKLOAD or kind.job)
        # Drawn before the lock (but in create_many's hold): os.urandom releases the GIL, and a
        # release under the lock let other request threads queue there; once per uids.BLOCK now.
        uid, derived_uid = uids.new(), uids.new() if kind.job else None
        with self._lock.quick() if deferred else self._lock:
            self._reload_if_failed()
            doc = generate_name.named(
                doc, lambda n: self.key_of(kind, namespace, n) in self.objects
            )
            doc = documents.checked(kind, namespace, None, doc)
            name = doc["metadata"]["name"]
            finalizers.on_create(kind, name, doc)
            key = self.key_of(kind, namespace, name)
            if key in self.objects:
                raise AlreadyExists(f"{documents.describe(kind, namespace, name)} already exists")
            self._check_namespace(kind, namespace)
            if kind is NAMESPACE:
                doc["metadata"].setdefault("labels", {})[_NS_LABEL] = name
            if kind.kind == "AdmissionCheck":
                doc.pop("status", None)  # written through its status subresource only
            doc = admission_hooks.admit(self, kind, namespace, doc)
            webhook.default_managed_by(self.objects, kind, namespace, doc)
            prebuilt = webhook.prebuilt_workload(self.objects, kind, namespace, doc)
            obj = documents.parse(doc)
            wl_key = self.key_of(WORKLOAD, namespace, name)
            if (kind.job or kind is WORKLOAD) and wl_key in self.objects and prebuilt is None:
                raise AlreadyExists(f"Workload {namespace}/{name} already exists")
            now = self.clock()
            batch = _Batch()
            rv = self._next_rv()
            meta = doc["metadata"]
            meta.update(
                uid=uid,
                resourceVersion=str(rv),
                creationTimestamp=render.rfc3339(now),
                generation=1,
            )
            doc.pop("status", None)
            documents.stamp_uid(obj, kind, meta)
            rec = ObjectRecord(key, rv, rv, now, doc)
            self._put(batch, rec, "ADDED", doc)
            stopped = kind is NOTEBOOK and notebook_stopped(doc)
            if prebuilt is not None:  # the worker's copy runs this job's pods: it is its owner
                # Kueue's EnsurePrebuiltWorkloadOwnership: the job becomes the copy's controller
                wl_rv = self._next_rv()
                wl_doc = documents.with_rv(prebuilt.doc, wl_rv)
                wl_meta = wl_doc["metadata"]
                refs = [r for r in wl_meta.get("ownerReferences") or [] if not r.get("controller")]
                wl_meta["ownerReferences"] = [*refs, render.controller_reference(doc)]
                adopted = prebuilt.replace(
                    rv=wl_rv, doc=wl_doc, internal={**prebuilt.internal, "owner": kind.gk}
                )
                self._put(batch, adopted, "MODIFIED", wl_doc)
            elif kind.job and isinstance(obj, Workload) and not stopped:
                self._put_derived(batch, obj, doc, now, created=True, uid=derived_uid)
            if deferred and prebuilt is None and isinstance(obj, Workload) and not stopped:
                self._arrivals.append((obj, now))
                fut = self._commit(batch) if shared is None else shared.add(batch)
                if not self._wake.is_set():  # set already while the scheduler gathers
                    self._wake.set()
                # The document in hand: the reply and the first status write decode nothing.
                shown = doc if kind is WORKLOAD else self._shown(kind, rec)
                if kind is WORKLOAD:  # a job's own record gets no status write
                    self._fresh[key] = (rv, doc)
            else:
                if shared is not None:  # what it holds is stored before what this decides
                    shared.flush()
                if deferred and self._has_arrivals():  # quick() did not settle: earlier first
                    self._catch_up()
                if prebuilt is None and not stopped:  # a stopped Notebook has no Workload
                    self._apply(obj, now)
                elif prebuilt is not None and isinstance(obj, Workload):
                    # Kueue's ensurePrebuiltWorkloadInSync: out of sync, the copy finishes
                    self._cluster.sync_prebuilt(obj, prebuilt.key.name, now)
                self._settle(now, batch)
                fut = self._commit(batch)
                shown = None
        return Begun(kind, key, doc, shown, fut)

    def _put_derived(
        self,
        batch: _Batch,
        wl: Workload,
        owner: JsonDoc,
        now: float,
        *,
        created: bool,
        uid: str | None = None,
    ) -> None:
        key = ObjectKey(WORKLOAD.gk, wl.namespace, wl.name)
        doc = render.derived_workload_doc(wl, owner, WORKLOAD.api_version)
        rv = self._next_rv()
        old = self.objects.get(key)
        if old is not None and not created:
            meta = old.doc["metadata"]
            doc["metadata"].update(
                uid=meta.get("uid"),
                creationTimestamp=meta.get("creationTimestamp"),
                generation=int(meta.get("generation", 1)) + 1,
                resourceVersion=str(rv),
            )
            if "status" in old.doc:
                doc["status"] = old.doc["status"]
            if (old.doc.get("spec") or {}).get("active") is False:  # the Workload's own
                doc["spec"]["active"] = False  # (engine.job_workload), not the job's
            wl.uid = str(meta.get("uid") or "")
            self._put(batch, old.replace(rv=rv, doc=doc), "MODIFIED")
            return
        doc["metadata"].update(
            uid=uid or uids.new(),
            resourceVersion=str(rv),
            creationTimestamp=render.rfc3339(now),
            generation=1,
        )
        wl.uid = doc["metadata"]["uid"]
        owner_gk = BY_KIND[str(owner["kind"])].gk
        self._put(batch, ObjectRecord(key, rv, rv, now, doc, {"owner": owner_gk}), "ADDED")

    def _apply_job_or_object(
        self,
        batch: _Batch,
        kind: Kind,
        obj: KueueObject | None,
        doc: JsonDoc,
        now: float,
        *,
        created: bool,
    ) -> None:
        """A job kind gets its derived Workload, except a stopped Notebook: its pods are gone,
        and with them the Workload of Kueue's StatefulSet pod group (core.manifest_notebook)."""
        if kind is NOTEBOOK and notebook_stopped(doc):
            assert isinstance(obj, Workload)
            wl_key = ObjectKey(WORKLOAD.gk, obj.namespace, obj.name)
            if wl_key in self.objects:
                self._remove(batch, wl_key)
                self._cluster.delete("Workload", obj.namespace, obj.name, now)
            return
        if kind.job and isinstance(obj, Workload):
            self._put_derived(batch, obj, doc, now, created=created)
        self._apply(obj, now)

    def _apply(self, obj: KueueObject | None, now: float) -> None:
        if obj is None:  # a gpuaas kind (GpuaasConfiguration): stored, not for the core
            return
        if isinstance(obj, AdmissionCheck):
            self._cluster.apply(obj, now)
            self._mark_served(obj)
            return
        try:
            self._cluster.apply(obj, now)
        except (ValueError, KeyError, TypeError) as exc:
            # The core refused after parsing accepted it; its state may be half-changed, so it is
            # rebuilt from the store (this request's writes were never submitted).
            self._load_after_failure()
            raise Invalid(f"{type(obj).__name__} {documents.obj_name(obj)}: {exc}") from exc

    def _check_namespace(self, kind: Kind, namespace: str | None) -> None:
        missing = ObjectKey(NAMESPACE.gk, "", namespace or "") not in self.objects
        if kind.namespaced and namespace is not None and missing:
            raise NotFound(f"namespace {namespace} not found; create it first")

    def _existing_unowned(
        self, kind: Kind, namespace: str | None, name: str, key: ObjectKey, verb: str
    ) -> ObjectRecord:
        """The stored object, refusing a Workload its Job (or RayCluster) owns."""
        old = self.objects.get(key)
        if old is None:
            raise NotFound(f"{documents.describe(kind, namespace, name)} not found")
        if kind is WORKLOAD and old.internal.get("owner"):
            raise Invalid(
                f"Workload {namespace}/{name} is owned by its {old.internal['owner']}; "
                f"{verb} that object instead"
            )
        return old

    def replace(self, kind: Kind, namespace: str | None, name: str, doc: JsonDoc) -> JsonDoc:
        with self._lock:
            self._reload_if_failed()
            key = self.key_of(kind, namespace, name)
            owned = self.objects.get(key) if kind is WORKLOAD else None
            if owned is not None and owned.internal.get("owner"):
                checked = documents.checked(kind, namespace, name, doc)
                shown, fut = self._replace_job_workload(owned, checked)  # engine.job_workload
            else:
                shown, fut = self._replace_locked(kind, namespace, name, key, doc)
            if fut is None:  # nothing changes: no write, no new resourceVersion
                return self._shown(kind, self.objects[key])
        self._wait(fut)
        with self._lock:
            current = self.objects.get(key)
            return self._shown(kind, current) if current is not None else shown

    def _replace_locked(
        self, kind: Kind, namespace: str | None, name: str, key: ObjectKey, doc: JsonDoc
    ) -> tuple[JsonDoc, Ack | None]:
        """``replace`` of anything but a job's own Workload, under the lock: the new document
        and its commit, or no commit when nothing changes."""
        old = self._existing_unowned(kind, namespace, name, key, "change")
        doc = documents.checked(kind, namespace, name, doc)
        want_rv = doc["metadata"].get("resourceVersion")
        if want_rv not in (None, "", old.doc["metadata"].get("resourceVersion")):
            raise Conflict(
                f"{documents.describe(kind, namespace, name)}: the object has been modified "
                f"(resourceVersion {want_rv} is not the current "
                f"{old.doc['metadata'].get('resourceVersion')}); read it again and retry"
            )
        if kind is NAMESPACE:
            doc["metadata"].setdefault("labels", {})[_NS_LABEL] = name
        if kind.kind == "AdmissionCheck":  # its status (Active) stays what was written
            doc.pop("status", None)
            if "status" in old.doc:
                doc["status"] = old.doc["status"]
        doc = admission_hooks.admit(self, kind, namespace, doc)
        finalizers.on_update(kind, name, old.doc, doc)
        documents.keep_identity(doc, old.doc)
        if doc == old.doc:
            return doc, None
        if finalizers.terminating(doc) and not finalizers.finalizers_of(doc):
            return doc, self._finalized(kind, key)
        return doc, self._replaced(kind, old, doc)

    def _replaced(self, kind: Kind, old: ObjectRecord, doc: JsonDoc) -> Ack:
        obj = documents.parse(doc)
        now = self.clock()
        batch = _Batch()
        rv = self._next_rv()
        doc["metadata"]["resourceVersion"] = str(rv)
        documents.stamp_uid(obj, kind, doc["metadata"])
        self._put(batch, old.replace(rv=rv, doc=doc), "MODIFIED")
        self._apply_job_or_object(batch, kind, obj, doc, now, created=False)
        self._settle(now, batch)
        return self._commit(batch)

    def preview(
        self,
        kind: Kind,
        namespace: str | None,
        name: str | None,
        compute: Callable[[JsonDoc | None], JsonDoc],
        *,
        create_missing: bool = False,
    ) -> JsonDoc:
        """A server-side dry run (``dryRun=All``) of a create, replace, patch or apply."""
        return dry_run.preview(self, kind, namespace, name, compute, create_missing)

    def preview_delete(self, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
        """What a DELETE would answer, with nothing deleted (``dryRun=All``)."""
        return dry_run.preview_delete(self, kind, namespace, name)

    # -- finalizers (engine.finalizers; deletes are engine.deletion's) ------------------------
    def _release_finalizers(self, now: float, batch: _Batch) -> None:
        finalizers.release(self, batch, now)

    def _mark_deleted(
        self, kind: Kind, old: ObjectRecord, now: float, batch: _Batch
    ) -> tuple[JsonDoc, Ack]:
        return finalizers.mark_deleted(self, kind, old, now, batch)

    def close(self) -> None:
        if self._scheduler is not None:
            self._stopping = True
            self._wake.set()
            self._scheduler.join(timeout=30)
            self._scheduler = None
        self.committer.close()
        self.hub.close()
