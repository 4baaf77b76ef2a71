"""What the manager knows of each worker cluster, kept current by watching it.

Kueue's MultiKueue keeps an informer per worker: it lists the worker's Workloads and Jobs once,
then watches them, and every change wakes the reconciler for that workload. A ``Worker`` here does
the same with one thread per watched resource (Workloads and Jobs labelled with this manager's
origin): list, then watch from the list's resourceVersion, apply each event to its cache, call
``notify`` (the controller's wake-up, with the changed workload's key) when the event is news to
the controller (a new status, a deletion it did not assume: ``_news``), and on a failed call
mark the worker unreachable and list again after a short pause. The controller never reads a worker over the network in its pass: it
takes a ``snapshot`` of these caches. A worker is Active when all of its watches are listed and
answering; a dead worker is seen at once (the stream breaks and the relist is refused), a hung one
when its stream stays silent past the read timeout and the next watch gets no answer.

The job kinds watched are those of Kueue's MultiKueue adapters that gpuaas dispatches: batch
Jobs, RayClusters and RayJobs (``JOB_KINDS``), one watch each, all in one ``jobs`` cache by
workload key with the path each came from (``job_at``: where the Job is deleted). A worker that
answers 404 to the list of a job kind does not serve it (a Kubernetes cluster without KubeRay):
unlike Kueue, which keeps such a worker inactive while any adapter's watch fails, it stays
Active without that kind (``absent``: the controller leaves it out of those jobs' clusters),
and the list is tried again every ``ABSENT_RETRY_SECONDS``.

It owns the watch threads and caches only; what to do with a copy is the controller's business.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from gpuaas.engine.multikueue.remote import WORKLOADS, RemoteClient, RemoteError
from gpuaas.vocab.kinds import BY_KIND
from gpuaas.vocab.multikueue import ORIGIN_LABEL

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]
RETRY_SECONDS = 0.5  # pause after a failed list or watch before the next try
ABSENT_RETRY_SECONDS = 30.0  # pause before listing again a job kind the worker does not serve
JOB_KINDS = tuple(BY_KIND[k] for k in ("Job", "RayCluster", "RayJob"))
# (cache, API base path, plural) of every watched resource; the plural names it
_RESOURCES = (
    ("copies", WORKLOADS, "workloads"),
    *(("jobs", k.base_path(), k.plural) for k in JOB_KINDS),
)


def key_of(doc: JsonDoc) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker as a controller pass sees it: a copy of the caches, taken at once."""

    name: str
    client: RemoteClient | None
    active: bool
    reason: str
    message: str
    lost_since: float | None
    copies: dict[str, JsonDoc]
    jobs: dict[str, JsonDoc]
    job_at: dict[str, tuple[str, str]]  # ns/name -> (API base path, plural) of its job
    absent: frozenset[str] = frozenset()  # the plurals of the job kinds it does not serve


@dataclass(slots=True)
class Worker:
    """One MultiKueueCluster: its client, its Active state and its watched copies."""

    name: str
    clock: Callable[[], float]
    notify: Callable[[str | None], None]  # a workload's key, or None: the whole worker
    origin: str
    config: bytes | None = None
    client: RemoteClient | None = None
    active: bool = False
    reason: str = ""
    message: str = ""
    lost_since: float | None = None
    copies: dict[str, JsonDoc] = field(default_factory=dict)  # ns/name -> Workload
    jobs: dict[str, JsonDoc] = field(default_factory=dict)  # ns/name -> Job, RayCluster, ...
    job_at: dict[str, tuple[str, str]] = field(default_factory=dict)  # ns/name -> (base, plural)
    _synced: set[str] = field(default_factory=set)  # plurals listed (or not served) and watched
    _absent: set[str] = field(default_factory=set)  # plurals of job kinds it answers 404 for
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    # -- the controller's side ----------------------------------------------------------------
    def connect(self, config: bytes, client: RemoteClient) -> None:
        """Use a (new) kubeconfig: stop watching with the old client, watch with this one."""
        self.disconnect(None, "", "")
        with self._lock:
            self.config, self.client = config, client
            self.reason, self.message = "ClientConnectionFailed", "connecting"
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._watch,
                args=(client, self._stop, attr, base, plural),
                name=f"multikueue-watch-{self.name}-{plural}",
                daemon=True,
            )
            for attr, base, plural in _RESOURCES
        ]
        for t in self._threads:
            t.start()

    def disconnect(self, config: bytes | None, reason: str, message: str) -> None:
        """Stop watching (a bad kubeconfig, the cluster deleted, the server closing)."""
        self._stop.set()
        client = self.client
        if client is not None:
            client.close()  # its threads see the stop under the lock and leave the caches be
        self._threads = []
        with self._lock:
            self.config, self.client, self.active = config, None, False
            self.reason, self.message = reason, message
            self.copies, self.jobs, self.job_at = {}, {}, {}
            self._synced.clear()
            self._absent.clear()

    def snapshot(self, keys: Collection[str] | None = None) -> WorkerView:
        """The worker as it stands: its copies and Jobs, all of them or those of ``keys`` (a
        pass that plans a few workloads copies no cache of every workload the worker holds)."""
        with self._lock:
            if keys is None:
                copies, jobs = dict(self.copies), dict(self.jobs)
            else:
                copies = {k: d for k in keys if (d := self.copies.get(k)) is not None}
                jobs = {k: d for k in keys if (d := self.jobs.get(k)) is not None}
            job_at = {k: self.job_at[k] for k in jobs if k in self.job_at}
            return WorkerView(
                self.name, self.client, self.active, self.reason, self.message,
                self.lost_since, copies, jobs, job_at, frozenset(self._absent),
            )  # fmt: skip

    def has_job(self, key: str) -> bool:
        """Whether the worker has the workload's Job now (a pass's snapshot may predate it)."""
        with self._lock:
            return key in self.jobs

    def fresh_job(self, key: str, base: str, plural: str) -> JsonDoc | None:
        """One job (of the kind at ``base``/``plural``) read now: a finishing workload's last
        status; None if it is gone."""
        client = self.client
        if client is None:
            return None
        ns, _, name = key.partition("/")
        try:
            doc = client.get(base, plural, ns, name)
        except RemoteError:
            return None
        if doc is not None:
            with self._lock:
                if self.client is client:
                    self._take_job(doc, (base, plural))
        return doc

    def assume(self, removed: bool, key: str, base: str, plural: str, body: JsonDoc | None) -> None:
        """What a write the worker answered did, before its watch reports it: a removed copy
        and Job are gone, a created copy or Job is there (the watch's version replaces it)."""
        with self._lock:
            if removed:
                self.copies.pop(key, None)
                self.jobs.pop(key, None)
                self.job_at.pop(key, None)
            elif body is not None and plural == "workloads":
                self.copies.setdefault(key, body)
            elif body is not None and key not in self.jobs:
                self.jobs[key] = body
                self.job_at[key] = (base, plural)

    def _take_job(self, doc: JsonDoc, at: tuple[str, str]) -> bool:
        """A job read by a get: kept if the watch knows it and it is not older (one the watch
        saw deleted meanwhile stays deleted)."""
        key = key_of(doc)
        old = self.jobs.get(key)
        if old is None or _rv(doc) < _rv(old) or old.get("status") == doc.get("status"):
            return False
        self.jobs[key] = doc
        self.job_at[key] = at
        return True

    def _listed(self, attr: str, at: tuple[str, str], items: list[JsonDoc]) -> None:
        """What a list of one resource found replaces what its cache held of that resource."""
        if attr == "copies":
            self.copies = {key_of(d): d for d in items}
            return
        for key in [k for k, where in self.job_at.items() if where == at]:
            self.jobs.pop(key, None)
            del self.job_at[key]
        for d in items:
            key = key_of(d)
            self.jobs[key] = d
            self.job_at[key] = at

    # -- the watch threads -------------------------------------------------------------------
    def _watch(
        self, client: RemoteClient, stop: threading.Event, attr: str, base: str, plural: str
    ) -> None:
        at = (base, plural)
        while not stop.is_set():
            try:
                try:
                    items, rv = client.list_with_version(base, plural, ORIGIN_LABEL, self.origin)
                except RemoteError as exc:
                    if exc.status != 404 or attr == "copies":
                        raise
                    with self._lock:  # a job kind this worker does not serve (no KubeRay)
                        if stop.is_set():
                            return
                        self._listed(attr, at, [])
                        self._synced.add(plural)
                        self._absent.add(plural)
                        self._mark_answering()
                    self.notify(None)
                    stop.wait(ABSENT_RETRY_SECONDS)
                    continue
                with self._lock:
                    if stop.is_set():
                        return
                    self._listed(attr, at, items)
                    self._synced.add(plural)
                    self._absent.discard(plural)
                    self._mark_answering()
                self.notify(None)
                while not stop.is_set():
                    for type_, obj in client.watch(base, plural, ORIGIN_LABEL, self.origin, rv):
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if type_ == "BOOKMARK":
                            continue
                        key = key_of(obj)
                        with self._lock:
                            if stop.is_set():
                                return
                            cache: dict[str, JsonDoc] = getattr(self, attr)
                            if type_ == "DELETED":
                                changed = cache.pop(key, None) is not None
                                if attr == "jobs":
                                    self.job_at.pop(key, None)
                            else:
                                changed = _news(cache.get(key), obj)
                                cache[key] = obj
                                if attr == "jobs":
                                    self.job_at[key] = at
                        if changed:
                            self.notify(key)
            except RemoteError as exc:
                with self._lock:
                    if stop.is_set():
                        return
                    self._synced.discard(plural)
                    self.active = False
                    self.reason, self.message = "ClientConnectionFailed", str(exc)
                    if self.lost_since is None:
                        self.lost_since = self.clock()
                self.notify(None)
                stop.wait(RETRY_SECONDS)
            except Exception:  # a bug must not end the watch silently: log, list again
                log.exception("MultiKueue: watching %s on %s", plural, self.name)
                stop.wait(RETRY_SECONDS)

    def _mark_answering(self) -> None:
        if self._synced == {plural for _, _, plural in _RESOURCES}:
            self.active, self.reason, self.message = True, "Active", "Connected"
            if self._absent:  # said in its Active condition (``gpuaas cluster list``)
                kinds = ", ".join(sorted(self._absent))
                self.message = f"Connected; {kinds} not served there: none is sent to it"
            self.lost_since = None


def _news(old: JsonDoc | None, new: JsonDoc) -> bool:
    """Whether a watched change tells the controller something: a new status (all it reads
    of a copy or Job). A write it made and saw answered is in the cache already, a change of
    metadata alone (the worker's Job adopting its Workload) plans nothing, and neither does a
    copy or Job just created, with no status yet (the controller's own create, which wakes it
    when answered; one it did not make is garbage a full pass removes): none wakes it. At
    1,000 workloads a copy's creation reached the hub by its watch before its answer about
    half the time, and each such wake planned the workload once more for nothing."""
    if old is None:
        return bool(new.get("status"))
    return (old.get("status") or {}) != (new.get("status") or {})


def _rv(doc: JsonDoc) -> int:
    try:
        return int((doc.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


__all__ = ["JOB_KINDS", "RETRY_SECONDS", "Worker", "WorkerView", "key_of"]
