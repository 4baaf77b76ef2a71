"""Watch events for the jobs whose status is made when read: a batch Job, a RayCluster, a RayJob
and a Notebook show what their workload and their pods are doing now (``vocab.job_status`` and
friends), computed at each read rather than stored.

Kubernetes' controllers write such a status instead, so a watch of Jobs (``kubectl get jobs -w``,
an informer, a MultiKueue manager mirroring its worker's Job) hears of each change. A status made
only at read time gave a watch nothing after ADDED: a Job resumed, ran and completed unseen. Here,
after each settle, the jobs of the workloads that settle changed (their state, or their pods as
the runtime reported them) are rendered again; one whose status differs from the status its
watchers saw last is stored again with it, under a new resourceVersion, as a MODIFIED change, as
the job controller's status write would be. Reads still compute the status; the stored copy is
what the watch showed last, and the baseline after a restart.

A job a MultiKueue manager dispatched (a batch Job, a RayCluster, a RayJob) keeps its worker's
status, written by the controller that mirrors it: it is never rendered here. A RayCluster's or
RayJob's status also follows its Ray node records, which its pods write after they started, with
no pod event: the runtime bridge reads them every half second and adds a job whose records
changed to ``touched`` (``RuntimeBridge._watch_ray_records``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from gpuaas.engine import documents
from gpuaas.store import JsonDoc, ObjectKey, ObjectRecord
from gpuaas.vocab.kinds import BY_KIND, Kind
from gpuaas.vocab.multikueue import runs_pods_here

if TYPE_CHECKING:
    from gpuaas.engine.readmodel import ObjectIndex

_JOB_KINDS = tuple(k for k in BY_KIND.values() if k.job)
Put = Callable[[ObjectRecord, JsonDoc], None]


class _Engine(Protocol):
    """What the feed needs of the engine (``engine.Engine``), under its lock."""

    objects: ObjectIndex

    @property
    def epoch(self) -> int: ...

    def _next_rv(self) -> int: ...

    def _shown(self, kind: Kind, rec: ObjectRecord) -> JsonDoc: ...


class JobStatusFeed:
    """The workloads whose pods changed since the last settle (``touched``, filled by the
    runtime bridge) and the Jobs never rendered here. What a job's watchers saw last is its
    stored status: each change is stored as it is published. Used only under the engine lock."""

    def __init__(self) -> None:
        self.touched: set[str] = set()
        self._as_stored: set[ObjectKey] = set()  # a MultiKueue manager's jobs: never rendered
        self._epoch = -1

    def collect(self, engine: _Engine, keys: set[str], put: Put) -> None:
        """Render again the jobs of workloads ``keys`` and of those ``touched``; ``put(rec,
        doc)`` stores one whose status changed (the engine's ``_put`` of a MODIFIED change)."""
        if engine.epoch != self._epoch:  # rebuilt from the store: nothing known is kept
            self._epoch = engine.epoch
            self._as_stored.clear()
        if self.touched:
            keys = keys | self.touched
            self.touched = set()
        names = engine.objects.job_names
        for key in sorted(keys):
            ns, _, name = key.partition("/")
            has_job = key in names  # no job of this name: nothing to decode or render
            for kind in _JOB_KINDS:
                okey = ObjectKey(kind.gk, ns, name)
                rec = engine.objects.get(okey) if has_job else None
                if rec is None:
                    self._as_stored.discard(okey)
                elif okey not in self._as_stored:
                    self._render(engine, kind, okey, rec, put)

    def _render(
        self, engine: _Engine, kind: Kind, okey: ObjectKey, rec: ObjectRecord, put: Put
    ) -> None:
        doc = rec.doc
        if not runs_pods_here(doc):  # a MultiKueue manager's: its worker's status, mirrored
            self._as_stored.add(okey)  # managedBy cannot change once set
            return
        status = engine._shown(kind, rec).get("status")
        if status == doc.get("status"):  # what the watch showed last (None: nothing yet)
            return
        rv = engine._next_rv()
        new = documents.with_rv(doc, rv)
        new["status"] = status
        put(rec.replace(rv=rv, doc=new), new)


__all__ = ["JobStatusFeed"]
