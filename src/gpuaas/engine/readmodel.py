"""The engine's public read model and the actions its observers may take, as one mixin.

``Engine`` inherits ``ReadModel``. Reads take the engine lock and return either documents as the
API shows them (``get``, ``list_objects``, ``explain``, ``cluster_queue_summary``: stored docs
with live status) or immutable views (``engine.views``) of only what was asked for; no caller
outside the engine gets its lock, its ``Cluster`` or a live record. Actions (``evict``,
``confirm_stopped``, ``finish_now``, ``set_condition``, ``record_event``) are for observers: they
run inside an observer hook (the lock is re-entrant), change the Cluster through its public
methods, and leave the consequences to the settle that is running (rescheduling, persisting, the
audit trail). This module makes no scheduling decision and does no I/O (``events`` reads the
store, outside the lock); it lives apart from ``engine.py`` so that the write path there stays
readable.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from gpuaas.core.backoff import BackoffStep
from gpuaas.core.cluster import Cluster
from gpuaas.core.manifest_notebook import notebook_stopped
from gpuaas.core.objects import ClusterQueue, ResourceFlavor
from gpuaas.core.state import Event, Phase
from gpuaas.engine import documents, queries, views
from gpuaas.engine.errors import NotFound
from gpuaas.engine.explain import explain_workload
from gpuaas.engine.listed import ListedDocs
from gpuaas.engine.multikueue import placements
from gpuaas.engine.settling import SettlingLock
from gpuaas.engine.views import ClusterView, WorkloadView
from gpuaas.store import EventRecord, GroupCommitter, JsonDoc, ObjectKey, ObjectRecord, Store
from gpuaas.vocab import notebook_status, ray_status
from gpuaas.vocab.job_status import job_status as render_job_status
from gpuaas.vocab.kinds import BY_KIND, WORKLOAD, Kind
from gpuaas.vocab.multikueue import is_worker_copy, runs_pods_here

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

# Kinds whose documents are shown with live status (never stored) beside the Job and Notebook
# handled apart: every other kind is shown exactly as stored.
_SHOWN_LIVE = ("ClusterQueue", "LocalQueue", "RayCluster", "RayJob")


# Kinds that own a workload (Job, RayCluster, ...): their names are indexed apart (``job_names``).
_JOB_GKS = frozenset(k.gk for k in BY_KIND.values() if k.job)
_RAY_KINDS = ("RayCluster", "RayJob")


def _job_ended(doc: JsonDoc) -> bool:
    """Whether a Job's stored status (``engine.job_watch`` stores each change) is terminal:
    Complete or Failed, which Kubernetes never changes again. It is shown as stored: made again
    after a restart, it lost the resume that a finished workload no longer records."""
    status = doc.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") in ("Complete", "Failed")
        and c.get("status") == "True"
        for c in conditions
    )


class ObjectIndex(dict[ObjectKey, ObjectRecord]):
    """The engine's objects by key, and each kind's apart: listing one kind (the MultiKueue
    controller lists three kinds every second, a watch or a list any kind) reads only that
    kind's objects, where a scan of every object cost O(workloads) under the engine lock.

    ``job_names`` counts the stored job objects (``_JOB_GKS``) by ``namespace/name``, so the
    runtime bridge finds which of a MultiKueue worker's copies now have their Job with one set
    intersection; asking for each waiting copy and each job kind at every settle was 40 % of a
    worker's CPU in a burst of 600 Jobs.

    The engine changes its objects only by ``[key] = record`` and ``pop``; both keep the
    per-kind maps and the job names in step."""

    __slots__ = ("_kinds", "job_names")

    def __init__(self, records: Collection[ObjectRecord] = ()) -> None:
        super().__init__()
        self._kinds: dict[str, dict[ObjectKey, ObjectRecord]] = {}
        self.job_names: dict[str, int] = {}
        for rec in records:
            self[rec.key] = rec

    def __setitem__(self, key: ObjectKey, rec: ObjectRecord) -> None:
        if key.gk in _JOB_GKS and key not in self:
            name = f"{key.namespace}/{key.name}"
            self.job_names[name] = self.job_names.get(name, 0) + 1
        super().__setitem__(key, rec)
        self._kinds.setdefault(key.gk, {})[key] = rec

    def _forget_job(self, key: ObjectKey) -> None:
        name = f"{key.namespace}/{key.name}"
        left = self.job_names.get(name, 0) - 1
        if left > 0:
            self.job_names[name] = left
        else:
            self.job_names.pop(name, None)

    def __delitem__(self, key: ObjectKey) -> None:
        super().__delitem__(key)
        self._kinds[key.gk].pop(key, None)
        if key.gk in _JOB_GKS:
            self._forget_job(key)

    def pop(self, key: ObjectKey, default: Any = None) -> Any:
        self._kinds.get(key.gk, {}).pop(key, None)
        if key.gk in _JOB_GKS and key in self:
            self._forget_job(key)
        return super().pop(key, default)

    def of_kind(self, gk: str) -> Mapping[ObjectKey, ObjectRecord]:
        """The objects of group/kind ``gk`` (read only: change them through the index)."""
        return self._kinds.get(gk, {})


@dataclass(frozen=True, slots=True)
class StoredView:
    """A stored object as last written: its key, resourceVersion and document (read only)."""

    key: ObjectKey
    rv: int
    doc: Mapping[str, Any]


class ReadModel:
    """Reads (stored documents as shown, and views) and observer actions; see the module
    docstring."""

    # Kueue's namespace where OCM's placement add-on reads Placements; set by its controller.
    placement_namespace: str | None = None

    _cluster: Cluster
    objects: ObjectIndex
    rv: int
    store: Store
    committer: GroupCommitter
    job_status: Callable[[str], JsonDoc] | None
    job_statuses: Callable[[], dict[str, JsonDoc]] | None
    _lock: SettlingLock
    _loads: int
    _audit: list[Event]

    @staticmethod
    def key_of(kind: Kind, namespace: str | None, name: str) -> ObjectKey:
        return ObjectKey(kind.gk, namespace or "" if kind.namespaced else "", name)

    # -- documents as the API shows them -------------------------------------------------------
    def get(self, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
        with self._lock:
            rec = self.objects.get(self.key_of(kind, namespace, name))
            if rec is None:
                raise NotFound(f"{documents.describe(kind, namespace, name)} not found")
            # A copy: a caller that edits what it read and writes it back must not have edited
            # the stored document in place (a replace would then see nothing to change).
            return copy.deepcopy(self._shown(kind, rec))

    def _notebook_status(self, rec: ObjectRecord, known: dict[str, int] | None) -> JsonDoc:
        """Kubeflow's Notebook status from its workload and its pod (vocab.notebook_status);
        ``known``: queue places computed once for a whole list."""
        key = f"{rec.key.namespace}/{rec.key.name}"
        st = self._cluster.workloads.get(key)
        stopped = notebook_stopped(rec.doc)
        live = None
        why = ""
        if st is not None and not stopped:
            if st.phase in (Phase.PENDING, Phase.INACTIVE):
                why = self._cluster.why_pending(key, known)
            elif self.job_status is not None:
                live = self.job_status(key)
        return notebook_status.notebook_status(
            rec.key.namespace, rec.key.name, st, live, why, stopped
        )

    def _job_shown(self, rec: ObjectRecord, all_live: dict[str, JsonDoc] | None = None) -> JsonDoc:
        """A Job with the status Kubernetes' job controller would give it (vocab.job_status),
        except one a MultiKueue manager dispatched (its stored status is its worker's) and one
        that ended (its stored status is final). ``engine.job_watch`` stores each change of
        this status, so watchers hear of it. ``all_live``: every job's pods, read once for a
        whole list. The stored document is decoded once (each read of ``rec.doc`` decodes it
        anew: twice here was most of a list of a MultiKueue worker's Jobs)."""
        doc = rec.doc
        if not runs_pods_here(doc) or _job_ended(doc):  # managed by MultiKueue, or final
            return doc
        key = f"{rec.key.namespace}/{rec.key.name}"
        if all_live is not None:
            live = all_live.get(key) or {}
        else:
            live = self.job_status(key) if self.job_status is not None else {}
        restarts = live.get("restarts") or {}
        pods = [
            {"phase": phase, "restarts": restarts.get(name, 0)}
            for name, phase in (live.get("pods") or {}).items()
        ]
        st = self._cluster.workloads.get(key)
        return {**doc, "status": render_job_status(st, pods)}

    def list_objects(
        self, kind: Kind, namespaces: set[str] | None = None
    ) -> tuple[ListedDocs, int]:
        """Objects of ``kind`` (in ``namespaces`` if given), by namespace and name; each
        decoded when it is read (``engine.listed``)."""
        with self._lock:
            recs = [
                r
                for k, r in self.objects.of_kind(kind.gk).items()
                if namespaces is None or k.namespace in namespaces
            ]
            recs.sort(key=lambda r: (r.key.namespace, r.key.name))
            if kind.kind == "Notebook":  # each queue ordered once, not once per Notebook
                known = self._cluster.positions()
                docs = [{**r.doc, "status": self._notebook_status(r, known)} for r in recs]
                return ListedDocs(docs), self.rv
            if kind.kind == "Job" and kind.group == "batch":
                live = self.job_statuses() if self.job_statuses is not None else {}
                return ListedDocs([self._job_shown(r, live) for r in recs]), self.rv
            if kind.kind in _SHOWN_LIVE:
                return ListedDocs([self._shown(kind, r) for r in recs]), self.rv
            return ListedDocs(recs), self.rv  # shown as stored: decoded when read

    def _shown(self, kind: Kind, rec: ObjectRecord) -> JsonDoc:
        """The stored doc; queues get their live counters as status (never stored), and a
        RayCluster or RayJob gets KubeRay's status from its workload and what runs for it,
        unless a MultiKueue manager dispatched it: its stored status is its worker's."""
        if kind.kind in _RAY_KINDS and not runs_pods_here(rec.doc):
            return rec.doc
        if kind.kind == "RayCluster":
            key = f"{rec.key.namespace}/{rec.key.name}"
            live = self.job_status(key) if self.job_status is not None else None
            st = self._cluster.workloads.get(key)
            return {**rec.doc, "status": ray_status.ray_cluster_status(st, live)}
        if kind.kind == "RayJob":
            key = f"{rec.key.namespace}/{rec.key.name}"
            live = self.job_status(key) if self.job_status is not None else None
            st = self._cluster.workloads.get(key)
            spec = rec.doc.get("spec")
            spec = spec if isinstance(spec, dict) else {}
            return {**rec.doc, "status": ray_status.ray_job_status(st, live, spec)}
        if kind.kind == "Notebook":
            return {**rec.doc, "status": self._notebook_status(rec, None)}
        if kind.kind == "Job" and kind.group == "batch":
            return self._job_shown(rec)
        if kind.kind not in _SHOWN_LIVE:
            return rec.doc
        doc = dict(rec.doc)  # a queue's
        if kind.kind == "ClusterQueue":
            doc["status"] = self._cq_status(rec.key.name)
        else:
            cq = str((rec.doc.get("spec") or {}).get("clusterQueue", ""))
            doc["status"] = queries.local_queue_status(
                self._cluster, rec.key.namespace, rec.key.name, cq
            )
        return doc

    def _core_cq(self, name: str) -> ClusterQueue | None:
        return queries.core_cq(self._cluster, name)

    def _cq_status(self, name: str) -> JsonDoc:
        return queries.cq_status(self._cluster, name)

    def cluster_queue_summary(self) -> list[JsonDoc]:
        """Per ClusterQueue: cohort, quotas and limits, usage, pending and admitted counts."""
        with self._lock:
            names = [k.name for k in self.objects if k.gk == BY_KIND["ClusterQueue"].gk]
            return queries.cluster_queue_summary(self._cluster, names)

    def events(self, namespace: str | None = None, obj: str | None = None) -> list[EventRecord]:
        """The audit trail; for one object (``"Kind ns/name"``) that exists, only the events since
        it was created, so a deleted namesake's events never show on a new object. Everything
        acknowledged before the call is settled and its events stored first."""
        with self._lock:  # settles what arrived, and queues its events behind the rest
            stored = self.committer.submit([])
        with contextlib.suppress(Exception):  # a failed commit: the store has what it has
            stored.result(timeout=60)
        records = self.store.events(namespace=namespace, obj=obj)
        since = self._created(obj) if obj is not None else None
        return records if since is None else [r for r in records if r.time >= since]

    def _created(self, obj: str) -> float | None:
        kind_name, _, ref = obj.partition(" ")
        kind = BY_KIND.get(kind_name)
        if kind is None or not ref:
            return None
        ns, _, name = ref.rpartition("/")
        with self._lock:
            rec = self.objects.get(self.key_of(kind, ns or None, name))
            return rec.created if rec is not None else None

    def explain(self, namespace: str, name: str) -> JsonDoc:
        """Why a workload is pending, where it stands in its queue, and what would admit it."""
        with self._lock:
            key = f"{namespace}/{name}"
            if key not in self._cluster.workloads:
                raise NotFound(f"Workload {key} not found")
            out = explain_workload(self._cluster, key, self._core_cq)
        if self.placement_namespace is not None:  # OCM's placement checks: where, and why
            engine = cast("Engine", self)
            out["placements"] = placements.explain_checks(
                engine, out, self.placement_namespace, engine.clock()
            )
        return out

    # -- reads ----------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """How many times the engine rebuilt its state from the store (at start, after a failed
        commit). An observer that keeps its own copy of engine state reconciles when it changes."""
        return self._loads

    def view(
        self,
        *,
        workloads: bool = False,
        namespaces: Collection[str] | None = None,
        why_pending: bool = False,
        local_queues: bool = False,
        phases: Collection[Phase] | None = None,
    ) -> ClusterView:
        """ClusterQueues, cohorts and flavors at one resourceVersion; with ``workloads`` also
        the workloads (in ``namespaces`` if given, with their queue positions, and with "why
        pending" if ``why_pending``; only in ``phases`` if given); with ``local_queues`` the
        LocalQueues' counts and usage."""
        with self._lock:
            return views.cluster_view(
                self._cluster,
                self.rv,
                workloads=workloads,
                namespaces=namespaces,
                why_pending=why_pending,
                local_queues=local_queues,
                phases=phases,
            )

    def workload(self, key: str, *, why_pending: bool = False) -> WorkloadView | None:
        """One workload (``namespace/name``), or None if the core has no such workload."""
        with self._lock:
            st = self._cluster.workloads.get(key)
            return None if st is None else views.workload_view(self._cluster, st, why=why_pending)

    def workloads(
        self,
        *,
        keys: Collection[str] | None = None,
        namespaces: Collection[str] | None = None,
        phases: Collection[Phase] | None = None,
    ) -> tuple[WorkloadView, ...]:
        """Workloads in creation order, narrowed by key, namespace and phase."""
        with self._lock:
            return views.workload_views(
                self._cluster, keys=keys, namespaces=namespaces, phases=phases
            )

    def flavor(self, name: str) -> ResourceFlavor | None:
        """A ResourceFlavor's parsed spec (shared: the core replaces it on apply)."""
        with self._lock:
            return self._cluster.flavors.get(name)

    def stored(self, key: ObjectKey) -> StoredView | None:
        """The stored object at ``key`` (its document as last written), if any."""
        with self._lock:
            rec = self.objects.get(key)
            return None if rec is None else StoredView(rec.key, rec.rv, rec.doc)

    def with_job(self, keys: Collection[str]) -> set[str]:
        """Which of the workload ``keys`` (``namespace/name``) have a job object (Job,
        RayCluster, ...) of the same name stored: one intersection, nothing decoded."""
        with self._lock:
            return self.objects.job_names.keys() & keys

    def holding(self, keys: Collection[str]) -> set[str]:
        """Which of ``keys`` hold quota now (admitted or being evicted): the phase alone, no
        view built (the runtime's once-a-second pass over every running workload)."""
        with self._lock:
            found = (self._cluster.workloads.get(k) for k in keys)
            return {st.key for st in found if st is not None and st.phase in views.HOLDING}

    def copies_awaiting_job(self, keys: Collection[str]) -> set[str]:
        """Which of ``keys`` are a MultiKueue worker's admitted copies whose Job has not come
        yet: Workloads with the origin label and no job object of their name stored. Their pods
        come with that Job, so there is nothing to start (``vocab.multikueue.runs_pods_here``);
        told from the parsed workload, not its view and stored document, which a worker built
        for each of the three copies of every workload it was sent."""
        with self._lock:
            out = set()
            jobs = self.objects.job_names
            for key in keys:  # not ``keys - jobs.keys()``: a set minus a view walks the view
                st = self._cluster.workloads.get(key)
                if (
                    key not in jobs
                    and st is not None
                    and st.phase == Phase.ADMITTED
                    and is_worker_copy(st.workload.kind, st.workload.labels)
                ):
                    out.add(key)
            return out

    def source_manifest(self, key: str) -> Mapping[str, Any] | None:
        """The document a workload's pods come from: its owning Job, RayCluster or RayJob if it
        was derived from one, else the Workload itself; None if neither is stored."""
        ns, _, name = key.partition("/")
        with self._lock:
            rec = self.objects.get(ObjectKey(WORKLOAD.gk, ns, name))
            if rec is None:
                return None
            owner_gk = rec.internal.get("owner")
            if not owner_gk:
                return rec.doc
            owner = self.objects.get(ObjectKey(str(owner_gk), ns, name))
            return owner.doc if owner is not None else None

    # -- actions for observers (inside a hook; the running settle persists the consequences) ----
    def evict(self, key: str, reason: str, message: str, now: float) -> bool:
        """Begin evicting an admitted workload (Kueue's Evicted reason ``reason``)."""
        with self._lock:
            return self._cluster.evict(key, reason, message, now)

    def evict_with_backoff(
        self,
        key: str,
        reason: str,
        message: str,
        now: float,
        *,
        limit: int | None,
        base_seconds: float,
        max_seconds: float,
    ) -> BackoffStep | None:
        """Evict with Kueue's growing requeue back-off, deactivating past ``limit`` back-off
        evictions (``Cluster.evict_with_backoff``); None when the workload is not admitted."""
        with self._lock:
            return self._cluster.evict_with_backoff(
                key,
                reason,
                message,
                now,
                limit=limit,
                base_seconds=base_seconds,
                max_seconds=max_seconds,
            )

    def confirm_stopped(self, key: str, now: float) -> None:
        """An evicted workload's pods are gone: its quota is released and it is requeued."""
        with self._lock:
            self._cluster.confirm_stopped(key, now)

    def finish_now(self, key: str, now: float, *, succeeded: bool = True) -> bool:
        """A workload's pods ended: it finishes and releases its quota."""
        with self._lock:
            return self._cluster.finish(key, now, succeeded=succeeded)

    def set_pods_ready(self, key: str, ready: bool, now: float) -> bool:
        """The runtime says whether every pod of an admitted workload runs (Kueue's
        waitForPodsReady judges the timeout in the core); True if PodsReady changed."""
        with self._lock:
            return self._cluster.set_pods_ready(key, ready, now)

    def check_controller_name(self, check: str) -> str | None:
        """The ``controllerName`` of AdmissionCheck ``check``, if it exists."""
        with self._lock:
            ac = self._cluster.admission_checks.get(check)
            return ac.controller_name if ac is not None else None

    def set_check_state(
        self,
        key: str,
        check: str,
        state: str,
        message: str,
        now: float,
        requeue_after_seconds: int | None = None,
    ) -> None:
        """A check controller sets its check's state on a workload holding quota.

        Raises the core's ``ApplyError`` (workload without quota, check that does not apply).
        """
        with self._lock:
            self._cluster.set_check_state(key, check, state, message, now, requeue_after_seconds)

    def set_condition(
        self, key: str, type_: str, status: str, reason: str, message: str, now: float
    ) -> bool:
        """Set an adapter's condition (e.g. ``GPUIdle``) on a workload; True if it changed."""
        with self._lock:
            st = self._cluster.workloads.get(key)
            if st is None or not st.set_condition(type_, status, reason, message, now):
                return False
            self._cluster.dirty.add(key)  # its status is written at the end of this settle
            return True

    def record_event(self, event: Event) -> None:
        """Add an adapter's event (Started, Stopped, FailedScheduling, GPUIdle, ...) to the
        audit trail; it is stored with the core's events of the running settle."""
        with self._lock:
            # The core's events so far go first, so the trail keeps the order things happened
            # in (a pod's Stopped before the Requeued its confirm_stopped causes).
            self._audit += self._cluster.take_events()
            self._audit.append(event)
