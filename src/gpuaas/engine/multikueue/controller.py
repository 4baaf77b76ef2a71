"""MultiKueue's admission check controller in the server: workers, their Active condition, the
check's Active condition, and dispatching workloads to workers and back.

It is a ``CheckController`` (``engine.checks``) for ``kueue.x-k8s.io/multikueue`` that writes its
checks' Active condition itself (``sets_active``), as Kueue's ``ACReconciler`` does. All remote
I/O runs on its own thread (and a pool for calls to several workers at once), never under the
engine lock. Each worker is watched (``workers``: list, then watch its Workloads and Jobs by the
origin label), so a pass reads no worker over the network: it (1) reads the manager's workloads
(``hub``: each decoded once per change) and takes a snapshot of each worker's watched copies and
whether it answers, (2) writes each MultiKueueCluster's and AdmissionCheck's Active
(``clusters``), (3) plans each workload group with the pure ``core.multikueue.reconcile``, (4)
starts the remote writes in parallel on each worker's persistent connections, once the last
pass's commit is stored (``_flush``), then (5) writes the manager's side (check states,
nomination, ``clusterName``, finishing, Job status) through ``writes``, all of a pass's
workloads in one commit, which it does not wait for. Passes are event-driven: a Reserve on
the hub, every change a worker's watch sees and every answered write mark their workload and wake
the thread, whose next pass plans those workloads only (as Kueue reconciles each workload on its
own events); a full pass (every workload, the workers' Active, garbage copies, worker-lost
timeouts, Incremental rounds) runs at least every ``idle_interval``
and whenever a worker's connection changes. Either plans a workload only when something it is
planned from changed since its last plan, or a remote write for it failed (``memo``). What it decides is Kueue's; how it
reaches a worker is ``remote``'s.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuaas.core import multikueue as plan_mk
from gpuaas.engine.multikueue import clusters, writes
from gpuaas.engine.multikueue.hub import Hub, HubReader
from gpuaas.engine.multikueue.memo import PlanMemo
from gpuaas.engine.multikueue.memo import condition as _cond
from gpuaas.engine.multikueue.memo import is_true as _true
from gpuaas.engine.multikueue.memo import leads_nowhere as _leads_nowhere
from gpuaas.engine.multikueue.memo import owner_ref as _owner
from gpuaas.engine.multikueue.operations import (
    CREATE_COPY,
    CREATE_JOB,
    REMOVE,
    InFlight,
    Operation,
    job_copy,
    workload_copy,
)
from gpuaas.engine.multikueue.reads import read_docs
from gpuaas.engine.multikueue.remote import (
    WORKLOADS,
    KubeConfigError,
    RemoteClient,
    parse_kubeconfig,
)
from gpuaas.engine.multikueue.workers import Worker, WorkerView
from gpuaas.engine.views import WorkloadView
from gpuaas.vocab import multikueue as mk
from gpuaas.vocab.kinds import (
    BY_KIND,
    MULTIKUEUE_CLUSTER,
    Kind,
)
from gpuaas.vocab.render import parse_rfc3339

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine
    from gpuaas.store.groupcommit import Ack

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class MultiKueueOptions:
    """Kueue's ``multiKueue`` configuration, as server options."""

    namespace: str = mk.DEFAULT_NAMESPACE  # where kubeconfig Secrets are (Kueue's own)
    worker_lost_timeout: float = mk.DEFAULT_WORKER_LOST_TIMEOUT
    dispatcher: str = mk.DISPATCHER_ALL_AT_ONCE
    origin: str = mk.DEFAULT_ORIGIN
    interval: float = 0.005  # after a wake-up, gather this long's further events in one pass
    idle_interval: float = 1.0  # seconds between passes with no event (timeouts, rounds)


def _job_kind(doc: JsonDoc) -> Kind | None:
    """The kind of the Job (or RayCluster, ...) that owns a workload; None for a bare one,
    whose copy is all that runs."""
    kind = BY_KIND.get(str(_owner(doc).get("kind", "")))
    return kind if kind is not None and kind.job else None


def eligible(
    clusters: list[str], job: Kind | None, absent: Mapping[str, frozenset[str]]
) -> list[str]:
    """The config's clusters that can run a job of kind ``job``: not those that answered 404
    for its kind (``absent``: worker -> plurals; no KubeRay there: a RayCluster could reserve
    quota there but never be created). A left-out worker is as one the config does not list:
    no copy goes there."""
    if job is None:
        return clusters
    return [n for n in clusters if job.plural not in absent.get(n, ())]


@functools.lru_cache(maxsize=4096)
def _since(text: str) -> float:
    """A condition's lastTransitionTime in seconds (0 when unreadable). Remembered: copies
    admitted in the same second share it, and ``strptime`` was a tenth of the hub's planning."""
    return parse_rfc3339(text) or 0.0


def remote_copy(doc: JsonDoc, has_job: bool) -> plan_mk.RemoteCopy:
    """What ``reconcile`` needs of a worker's Workload."""
    admitted = _cond(doc, "Admitted")
    admitted_at = None
    if admitted is not None and admitted.get("status") == "True":
        admitted_at = _since(str(admitted.get("lastTransitionTime", "")))
    finished = None
    fin = _cond(doc, "Finished")
    if fin is not None and fin.get("status") == "True":
        reason = str(fin.get("reason", ""))
        finished = (reason != "Failed", reason, str(fin.get("message", "")))
    pending = ""
    reserved = _cond(doc, "QuotaReserved")
    if reserved is not None and reserved.get("status") == "False":
        pending = str(reserved.get("message", ""))
    return plan_mk.RemoteCopy(admitted_at, finished, _true(doc, "Evicted"), pending, has_job)


class MultiKueueController:
    """The ``CheckController`` for ``kueue.x-k8s.io/multikueue``."""

    sets_active = True  # Active comes from its workers, not from running in this server

    def __init__(self, options: MultiKueueOptions | None = None) -> None:
        self.options = options or MultiKueueOptions()
        self.engine: Engine | None = None
        self.workers: dict[str, Worker] = {}
        self._rounds: dict[str, float] = {}  # Incremental: workload -> round start
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="multikueue")
        self.clock: Callable[[], float] = time.time
        # What each workload's last plan was made of: a pass plans it again only once
        # something of that changed, or a remote write for it failed (``memo``).
        self._memo = PlanMemo()
        self._in_flight = InFlight(self._pool, self.workers, self._touch, self._memo.failed)
        # What changed since the last pass: workload keys, or everything (a full pass).
        self._dirty: set[str] = set()
        self._full = True
        self._full_at = 0.0  # monotonic time of the last full pass
        self._dirty_lock = threading.Lock()
        # workload -> the worker its Job was sent to, until the hub records it as clusterName:
        # the choice holds meanwhile, so a copy admitted elsewhere later never wins too.
        self._placing: dict[str, str] = {}
        # hub Job uid -> the worker's Job status last mirrored onto it: an unchanged status is
        # not read from the hub again, pass after pass, for every running workload.
        self._mirrored: dict[str, JsonDoc] = {}
        # (worker, workload) -> its copy as last read and what remote_copy made of it
        self._copies_read: dict[tuple[str, str], tuple[JsonDoc, plan_mk.RemoteCopy]] = {}
        self._hub = HubReader()  # the manager's workloads, each decoded once per change
        # The remote writes a pass planned, started together once what they follow is stored,
        # and the commit of the last pass's updates, not waited for at its end (see _flush).
        self._queued: list[Operation] = []
        self._unsaved: Ack | None = None

    # -- CheckController ------------------------------------------------------------------------
    def on_reserved(self, engine: Engine, workload: WorkloadView, check: str, now: float) -> None:
        self._touch(workload.key)  # under the engine lock: only note it and wake the thread

    def start(self, engine: Engine) -> None:
        self.engine = engine
        self._thread = threading.Thread(target=self._loop, name="multikueue", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True)
        for w in self.workers.values():
            w.disconnect(None, "", "")

    def _touch(self, key: str | None) -> None:
        """Something changed for workload ``key`` (None: for a whole worker); wake the thread."""
        with self._dirty_lock:
            if key is None:
                self._full = True
            else:
                self._dirty.add(key)
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(self.options.idle_interval):
                self._stop.wait(self.options.interval)  # let a burst of events gather
            self._wake.clear()
            with self._dirty_lock:
                keys, full = self._dirty, self._full
                self._dirty, self._full = set(), False
            if time.monotonic() - self._full_at >= self.options.idle_interval:
                full = True
            try:
                self.sync_once(None if full else keys)
            except Exception:  # keep dispatching: the next full pass reads everything again
                log.exception("MultiKueue pass failed")
                with self._dirty_lock:
                    self._full = True  # at the next wake-up or idle_interval, not at once

    # -- one pass ---------------------------------------------------------------------------------
    def sync_once(self, keys: set[str] | None = None) -> None:
        """One pass over the workloads ``keys`` (those something changed for), or a full pass
        (None): every workload, the workers' Active, garbage copies, lost workers, Incremental
        rounds, at least every ``idle_interval``. What a pass
        writes on the hub marks its workloads for the next pass."""
        engine = self.engine
        assert engine is not None
        now = self.clock()
        full = keys is None
        self._queued = []  # left by a pass that failed: the next full pass plans them again
        self._saved(engine, wait=False)
        if full:
            self._full_at = time.monotonic()
            self._memo.retry_failed()
            self._load_workers(engine)
        hub = self._hub.read(engine, keys)
        views = {name: w.snapshot(keys) for name, w in self.workers.items()}
        if full:
            clusters.write_cluster_status(engine, views, now)
        for key in self._dispatch(engine, hub, views, now, full):
            self._touch(key)

    def _load_workers(self, engine: Engine) -> None:
        docs, _ = engine.list_objects(MULTIKUEUE_CLUSTER)
        seen = set()
        for doc in docs:
            name = str(doc["metadata"]["name"])
            seen.add(name)
            w = self.workers.get(name)
            if w is None:
                w = Worker(name, self.clock, self._touch, self.options.origin)
                self.workers[name] = w
            try:
                raw = clusters.kubeconfig(engine, doc, self.options.namespace)
                if raw != w.config or w.client is None:
                    w.connect(raw, RemoteClient(parse_kubeconfig(raw)))
            except KubeConfigError as exc:
                message = f"load client config failed: {exc}"
                if w.client is not None or (w.reason, w.message) != (exc.reason, message):
                    w.disconnect(None, exc.reason, message)
        for name in set(self.workers) - seen:
            self.workers.pop(name).disconnect(None, "", "")

    # -- dispatch -------------------------------------------------------------------------------
    def _dispatch(
        self, engine: Engine, hub: Hub, views: dict[str, WorkerView], now: float, full: bool
    ) -> list[str]:
        """Plan ``hub``'s workloads, start the remote writes, apply the hub's side; the keys of
        the workloads it updated on the hub."""
        results: list[tuple[str, plan_mk.Plan, JsonDoc]] = []
        sends: list[tuple[Kind, str, WorkerView]] = []  # Jobs to send to their worker
        copies: list[tuple[str, WorkerView]] = []  # Workload copies to create
        on_way: set[str] = set()  # workloads whose Job an earlier pass sent, not answered yet
        connected = {n: w for n, w in views.items() if w.client is not None and w.active}
        unavailable = [n for n, w in views.items() if not w.active]
        if full:  # copies on workers whose manager workload no longer needs them: garbage
            for w in connected.values():
                for key in list(w.copies):
                    if key not in hub.workloads:
                        self._remove(w, key)
            self._forget(hub, views)
        kind = {"Incremental": plan_mk.INCREMENTAL, "External": plan_mk.EXTERNAL}.get(
            mk.dispatcher_kind(self.options.dispatcher), plan_mk.ALL_AT_ONCE
        )
        inputs: dict[str, tuple[Any, ...]] = {}
        absent = {n: w.absent for n, w in views.items() if w.absent}  # job kinds not served
        for key, doc in hub.workloads.items():
            check = hub.check_of[key]
            clusters = hub.clusters_of.get(check, [])
            if absent:
                clusters = eligible(clusters, _job_kind(doc), absent)
            if kind != plan_mk.INCREMENTAL:  # whose nomination moves with the clock
                inputs[key] = self._memo.inputs(
                    key, doc, check, clusters, views, self._remote_copy, self._placing.get(key)
                )
                if self._memo.unchanged(key, inputs[key]):
                    continue
            status = doc.get("status") or {}
            state: JsonDoc = next(
                (e for e in status.get("admissionChecks", []) if e.get("name") == check), {}
            )
            local = plan_mk.Local(
                holds_quota=_true(doc, "QuotaReserved"),
                finished=_true(doc, "Finished"),
                check_state=str(state.get("state", "Pending")),
                cluster_name=status.get("clusterName") or self._placed(key, doc, connected),
                nominated=tuple(status.get("nominatedClusterNames") or ()),
            )
            remotes = {
                n: (self._remote_copy(n, key, w) if key in w.copies else None)
                for n, w in connected.items()
                if n in clusters
            }
            # A worker dropped from the config (a Placement's new decision) keeps no copy, so a
            # redispatched workload never runs on two workers. Kueue leaves such a copy to its
            # garbage collector, which keeps it while the manager's workload exists; gpuaas
            # removes it (docs/placement.md).
            for n, w in connected.items():
                if n not in clusters and key in w.copies:
                    self._remove(w, key)
            nomination, started = plan_mk.nominate(
                kind,
                clusters,
                [n for n in clusters if n in connected],
                local.nominated,
                self._rounds.get(key),
                now,
                mk.INCREMENTAL_STEP,
                mk.INCREMENTAL_ROUND_SECONDS,
            )
            if started is not None:
                self._rounds[key] = started
            lost_for = None
            chosen = views.get(local.cluster_name or "")
            if chosen is not None and chosen.lost_since is not None:
                lost_for = now - chosen.lost_since
            p = plan_mk.reconcile(
                local, remotes, unavailable, nomination, lost_for,
                self.options.worker_lost_timeout,
            )  # fmt: skip
            # The copies of workers not chosen, once a worker was: their removal's answer
            # wakes nothing (the workload's next plan would find nothing to do). A removal
            # for a workload finished or without quota, or off the nomination, wakes it: a
            # workload that reserves quota again plans its new copies once the old are gone.
            losers = (
                local.holds_quota
                and not local.finished
                and not (p.check is not None and p.check[0] == plan_mk.PENDING)
            )
            for n in p.delete_on:
                self._remove(connected[n], key, wake=not losers)
            busy = self._in_flight.busy
            copies.extend((key, connected[n]) for n in p.create_on if not busy(CREATE_COPY, n, key))
            if p.create_job_on is not None and (job_kind := _job_kind(doc)) is not None:
                if busy(CREATE_JOB, p.create_job_on, key):
                    on_way.add(key)  # sent by an earlier pass: Ready still waits for it
                else:
                    sends.append((job_kind, key, connected[p.create_job_on]))
            results.append((key, p, doc))
            if key in inputs:
                self._memo.planned(key, inputs[key])
        bodies = HubReader.full_docs(engine, {key for key, _ in copies})
        for key, w in copies:
            if key in bodies:
                self._submit(CREATE_COPY, w, key, workload_copy(bodies[key], self.options.origin))
        sent = self._send_jobs(engine, sends) | on_way
        self._flush(engine)
        # A finishing workload's job is read once more, so the hub's ends with its last status.
        finishing = [
            (views[str(doc["status"]["clusterName"])], key, owner)
            for key, p, doc in results
            if p.finish is not None
            and (doc.get("status") or {}).get("clusterName") in views
            and (owner := _job_kind(doc)) is not None
        ]
        reads = self._pool.map(
            lambda wkk: self.workers[wkk[0].name].fresh_job(
                wkk[1], wkk[2].base_path(), wkk[2].plural
            ),
            finishing,
        )
        for (w, key, _), job in zip(finishing, list(reads), strict=True):
            if job is not None:
                w.jobs[key] = job
        updates: list[writes.WorkloadUpdate] = []
        mirrors: list[writes.StatusWrite] = []
        for key, p, doc in results:
            u, mirror = self._write_back(hub, key, p, doc, key in sent, connected)
            if u is not None:
                updates.append(u)
            if mirror is not None:
                mirrors.append(mirror)
            if p.wait_lost is not None:  # the clock moves it: never skipped
                self._memo.forget(key)
        try:
            done, ack = writes.apply_workloads(engine, updates, mirrors)
        except Exception:  # not stored: the next pass mirrors these statuses again
            self._mirrored.clear()
            self._memo.clear()
            raise
        applied = set(done)
        self._memo.applied(updates, applied)  # its own update not planned again for
        if ack is not None:  # commits are stored in order: waiting for the last waits for all
            self._unsaved = ack
        # The next pass plans again what these writes may lead to; a nomination, a Pending
        # message and the chosen worker lead to nothing of their own (_leads_nowhere).
        return [u.key for u in updates if u.key not in applied or not _leads_nowhere(u)]

    def _forget(self, hub: Hub, views: dict[str, WorkerView]) -> None:
        """A full pass drops what the controller remembers of workloads and copies gone."""
        for key in set(self._placing) - set(hub.workloads):
            del self._placing[key]
        self._memo.keep_only(set(hub.workloads))
        owners = {_owner(doc).get("uid") for doc in hub.workloads.values()}
        for uid in set(self._mirrored) - owners:
            del self._mirrored[uid]
        for n, key in list(self._copies_read):
            if n not in views or key not in views[n].copies:
                del self._copies_read[(n, key)]

    def _remote_copy(self, worker: str, key: str, w: WorkerView) -> plan_mk.RemoteCopy:
        """``remote_copy`` of the worker's copy, read again only when the watch replaced it
        (a workload is planned several times while its copy stays the same)."""
        doc, has_job = w.copies[key], key in w.jobs
        seen = self._copies_read.get((worker, key))
        if seen is not None and seen[0] is doc and seen[1].has_job == has_job:
            return seen[1]
        read = remote_copy(doc, has_job)
        self._copies_read[(worker, key)] = (doc, read)
        return read

    def _placed(self, key: str, doc: JsonDoc, connected: dict[str, WorkerView]) -> str | None:
        """The worker this workload's Job went to while the hub has no clusterName yet; the
        choice is dropped when that Job failed to go, its copy is gone, or quota is lost."""
        name = self._placing.get(key)
        if name is None:
            return None
        w = connected.get(name)
        if (
            w is None
            or key not in w.copies
            or not _true(doc, "QuotaReserved")
            or not self._job_sent(name, key, w)
        ):
            del self._placing[key]
            return None
        return name

    def _job_sent(self, name: str, key: str, w: WorkerView) -> bool:
        """Whether the workload's Job is on its way to worker ``name`` or there. An answered
        create is in the worker's cache before it leaves the in-flight set, so asked in this
        order, one answered after the pass's snapshot ``w`` was taken is still seen there."""
        return (
            key in w.jobs
            or self._in_flight.busy(CREATE_JOB, name, key)
            or self.workers[name].has_job(key)
        )

    def _submit(self, verb: str, w: WorkerView, key: str, body: JsonDoc | None = None,
                base: str = WORKLOADS, plural: str = "workloads") -> None:  # fmt: skip
        if w.client is not None:
            self._queued.append(Operation(verb, w.name, key, w.client, base, plural, body))

    def _remove(self, w: WorkerView, key: str, wake: bool = True) -> None:
        if w.client is not None and not self._in_flight.busy(REMOVE, w.name, key):
            # the Job as last seen; one made since fails the delete: retried
            op = Operation(REMOVE, w.name, key, w.client, job=w.job_at.get(key), wake=wake)
            self._queued.append(op)

    def _flush(self, engine: Engine) -> None:
        """Start the remote writes this pass planned, once the last pass's updates are stored.

        A pass does not wait for its own commit (the wait was a third of a pass at 1,000
        workloads, and the next pass's planning overlaps it now), but what it planned may rest
        on the updates not stored yet: copies removed because the manager's workload finished
        would, after a crash that lost the finish, leave it Ready with no copy, and it would run
        again. So no remote write leaves before they are stored; a pass with none never waits."""
        ops, self._queued = self._queued, []
        if ops:
            self._saved(engine, wait=True)
        self._in_flight.submit_many(ops)

    def _saved(self, engine: Engine, wait: bool) -> None:
        """Make sure the last pass's commit is stored (``wait``), or check it if it is done
        already; a failed one (``Unavailable``) leaves what was mirrored to be mirrored again."""
        ack = self._unsaved
        if ack is None or not (wait or ack.done()):
            return
        self._unsaved = None
        try:
            writes.saved(engine, ack)
        except Exception:
            self._mirrored.clear()
            self._memo.clear()
            raise

    def _send_jobs(self, engine: Engine, sends: list[tuple[Kind, str, WorkerView]]) -> set[str]:
        """Send each workload's Job to the worker that admitted its copy (the Jobs read in one
        go); the keys whose Job is on its way (one gone from the hub is not)."""
        jobs = read_docs(engine, ((kind, key) for kind, key, _ in sends))
        for kind, key, w in sends:
            job = jobs.get(key)
            if job is None:
                continue
            self._placing[key] = w.name
            body = job_copy(job, key.partition("/")[2], self.options.origin)
            self._submit(CREATE_JOB, w, key, body, kind.base_path(), kind.plural)
        return set(jobs)

    def _write_back(
        self,
        hub: Hub,
        key: str,
        p: plan_mk.Plan,
        doc: JsonDoc,
        job_missing: bool,
        connected: dict[str, WorkerView],
    ) -> tuple[writes.WorkloadUpdate | None, writes.StatusWrite | None]:
        """The manager-side update a plan asks for (None when nothing changes) and the Job
        status to mirror (None when it is as last mirrored)."""
        check = hub.check_of[key]
        if p.finish is not None:
            self._rounds.pop(key, None)
            update = writes.WorkloadUpdate(
                key, check, finish=(p.finish[0], p.finish[2]), events=tuple(p.events)
            )
            chosen = (doc.get("status") or {}).get("clusterName")
            return update, self._mirror_job(key, doc, connected, chosen)
        if job_missing and p.check is not None and p.check[0] == plan_mk.READY:
            return None, None  # its Job is on its way to the worker: Ready waits for it
        status = doc.get("status") or {}
        current: JsonDoc = next(
            (e for e in status.get("admissionChecks", []) if e.get("name") == check), {}
        )
        same_check = p.check is None or (current.get("state"), current.get("message")) == p.check
        same_nomination = (
            p.nominated is None or tuple(status.get("nominatedClusterNames") or ()) == p.nominated
        )
        if p.check is not None and p.check[0] == plan_mk.RETRY:
            self._rounds.pop(key, None)
        mirror = None
        chosen = status.get("clusterName") or p.cluster_name  # its Job's status goes with it
        if chosen is not None:
            mirror = self._mirror_job(key, doc, connected, chosen)
        if same_check and same_nomination and p.cluster_name is None and not p.events:
            return None, mirror
        update = writes.WorkloadUpdate(
            key, check, p.check, p.nominated, p.cluster_name, None, tuple(p.events)
        )
        return update, mirror

    def _mirror_job(
        self, key: str, doc: JsonDoc, connected: dict[str, WorkerView], cluster: str | None
    ) -> writes.StatusWrite | None:
        """Kueue's SyncJob (its batch Job, RayCluster and RayJob adapters alike): the status of
        the job on worker ``cluster``, whole, to copy to the manager's (None when there is none,
        or it is the status mirrored last time)."""
        chosen = connected.get(cluster or "")
        remote = chosen.jobs.get(key) if chosen is not None else None
        owner = _owner(doc)
        kind = BY_KIND.get(str(owner.get("kind", "")))
        if remote is None or kind is None or not remote.get("status"):
            return None
        uid = str(owner.get("uid", ""))
        if uid and self._mirrored.get(uid) == remote["status"]:
            return None
        if uid:
            self._mirrored[uid] = remote["status"]
        ns, _, name = key.partition("/")
        return writes.StatusWrite(kind, ns, name, remote["status"])


__all__ = ["MultiKueueController", "MultiKueueOptions", "Worker", "job_copy", "workload_copy"]
