"""The bridge between the engine and a runtime: admitted workloads run, evicted ones stop.

``RuntimeBridge`` is an ``EngineObserver``. It carries out the core's decisions on a runtime and
reports back what really happened. It dispatches on the core's decision types (``core.decisions``),
never on reason text: ``Admit`` starts the workload's pods (commands from the owning Job's or
RayCluster's manifest; a ``Reserve`` alone starts nothing, as quota may wait for admission
checks), ``Evict`` stops them, and only the runtime's ``Stopped`` makes the core release the quota
(``engine.confirm_stopped``), as Kueue waits for pods to terminate. Exits finish the workload
(``Succeeded``/``Failed``). It never decides who is admitted or evicted, with one exception
stated here: after a restart, an admitted workload whose pods are gone is evicted (reason
``PodsLost``) and so requeued, since its work did not survive.

What cannot run does not change admission: a workload whose pods need more GPUs than are free
stays admitted with its pods pending (a ``FailedScheduling`` warning, retried at each poll), as a
Kubernetes pod waits for a node; a manifest with no command gets a ``FailedCreate`` warning. Every
runtime step is also written to the workload's events (``Started``, ``Stopped``, ``PodFailed``),
so ``describe`` shows the whole audit trail (``engine.record_event``). It reads the engine only
through its views and acts only through its observer actions. The runtime is driven under the
bridge's own lock: the hooks hold the engine lock and then take it, the API's reads (pods, logs)
take only it, so a slow log read never holds up scheduling.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaas.core.decisions import Admit, Decision, Delete, Evict
from gpuaas.core.state import Event, Phase
from gpuaas.engine.views import HOLDING, WorkloadView
from gpuaas.inventory import NodeInventory, flavor_matches_node
from gpuaas.runtimes import (
    AlreadyRunning,
    EventKind,
    NotEnoughGpus,
    PodCpu,
    PodSpec,
    PodSpecError,
    Runtime,
    RuntimeEvent,
    RuntimeRequestError,
    RuntimeUnavailable,
    WorkloadRun,
    build_run_plan,
    workbench,
)
from gpuaas.runtimes.podspecs import RunPlan
from gpuaas.vocab.kinds import NOTEBOOK, WORKLOAD
from gpuaas.vocab.multikueue import runs_pods_here
from gpuaas.vocab.ray_status import active_deadline

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)

PODS_LOST = "PodsLost"
SWEEP_SECONDS = 1.0  # between the tick's passes over every running and waiting workload
RAY_RECORDS_SECONDS = 0.5  # between reads of the running Ray clusters' node records
_RAY_KINDS = ("RayCluster", "RayJob")
DEADLINE_EXCEEDED = "DeadlineExceeded"  # KubeRay's reason for a RayJob past its deadline
_READY_PHASES = ("Running", "Succeeded")  # a Job's pods count as ready running or succeeded
_RUNTIME_EVENTS = {
    EventKind.STARTED: ("Normal", "Started"),
    EventKind.POD_FAILED: ("Warning", "PodFailed"),
    EventKind.POD_RESTARTED: ("Normal", "PodRestarted"),
    EventKind.SUCCEEDED: ("Normal", "PodsSucceeded"),
    EventKind.FAILED: ("Warning", "PodsFailed"),
    EventKind.STOPPED: ("Normal", "Stopped"),
    EventKind.ADOPTED: ("Normal", "Adopted"),
}


class RuntimeBridge:
    def __init__(self, runtime: Runtime, node: NodeInventory | None = None) -> None:
        self.runtime = runtime
        # The node's labels and taints: a pod admitted with a flavor whose nodeLabels or
        # taints do not fit this node cannot land here, as Kueue's injected nodeSelector keeps
        # it off a Kubernetes node; it stays pending (FailedScheduling) rather than run anywhere.
        self.node = node
        self._engine: Engine | None = None
        self._to_start: set[str] = set()  # admitted, pods not started yet (retried each poll)
        # Of those, a MultiKueue worker's copies of Workloads waiting for the Job the manager
        # creates next: a settle retries them only once a job object of their name is stored.
        self._awaiting_job: set[str] = set()
        self._swept_at = float("-inf")  # engine time of the tick's last pass over every run
        self._warned: dict[str, str] = {}  # key -> last start problem, said once
        self._deadlines: dict[str, int | None] = {}  # running RayJob -> activeDeadlineSeconds
        # running RayCluster or RayJob -> its Ray node records as last read (None: another kind)
        self._ray_seen: dict[str, dict[str, Any] | None] = {}
        self._ray_read_at = float("-inf")
        self._epoch = 0  # the engine's epoch last reconciled with (it may rebuild its state)
        self._adopted: list[str] = []
        self._ready: dict[str, bool] = {}  # key -> last "every pod runs" told to the engine
        self._lock = threading.RLock()  # the runtime's calls, from hooks and from the API

    # -- wiring ---------------------------------------------------------------------------------
    def attach(self, engine: Engine) -> list[str]:
        """Re-adopt pods left by an earlier server, reconcile them with the store, then observe.

        Returns the adopted workload keys. Pods of workloads that are no longer admitted are
        stopped at once; admitted workloads with no pods are requeued (``PodsLost``).
        """
        if engine.instant_evictions:
            raise ValueError("a runtime needs Engine(live_runtime=True): quota waits for stops")
        self._engine = engine
        engine.job_status = self.job_status
        engine.job_statuses = self.pod_phases
        engine.add_observer(self)  # adopts (on_attach), under the engine lock
        engine.tick()  # reconciles (a new epoch), records the adoptions, persists
        return self._adopted

    # -- EngineObserver -------------------------------------------------------------------------
    def on_attach(self, engine: Engine, now: float) -> None:
        with self._lock:
            self._adopted = self.runtime.adopt()

    def on_tick(self, engine: Engine, now: float) -> None:
        with self._lock:
            if engine.epoch != self._epoch:
                self._reconcile(engine, now)
            for ev in self.runtime.poll():
                self._on_runtime_event(engine, ev, now)
            self._enforce_deadlines(engine, now)
            self._watch_ray_records(engine, now)
            # The settles stop and drop what they decide about; this pass over every running
            # workload (a view each) is the safety net, once a second rather than every poll.
            sweep = now - self._swept_at >= SWEEP_SECONDS
            if sweep:
                self._swept_at = now
                self._stop_unwanted(engine)
            self._start_pending(engine, now, recheck_all=sweep)
            self._report_pods_ready(engine, now)

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None:
        with self._lock:
            if engine.epoch != self._epoch:
                self._reconcile(engine, now)
            for d in decisions:
                match d:
                    case Admit():
                        self._to_start.add(d.workload)
                    case Evict():
                        self._to_start.discard(d.workload)
                        self._awaiting_job.discard(d.workload)
                        self._stop_or_confirm(engine, d.workload, self.runtime.running(), now)
                    case Delete():
                        self._started(d.workload)  # a MultiKueue copy that lost: nothing to start
                    case _:
                        pass
            # Only what this settle decided about can have stopped being held (deleted,
            # finished, deactivated); the tick's pass checks every running workload.
            self._stop_unwanted(engine, {d.workload for d in decisions})
            self._start_pending(engine, now)
            for rev in self.runtime.poll():  # record the starts now, in this settle's audit trail
                self._on_runtime_event(engine, rev, now)
            self._report_pods_ready(engine, now)

    # -- reads for the API ------------------------------------------------------------------------
    def runs(self) -> Mapping[str, WorkloadRun]:
        """Pods by workload, as the runtime sees them now."""
        with self._lock:
            return self.runtime.running()

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        """GPU index -> (workload key, pod) for every GPU a pod holds now (telemetry's pinning)."""
        with self._lock:
            return self.runtime.gpu_owners()

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """(workload key, pod) -> CPU time of the pod's processes (telemetry without NVML)."""
        with self._lock:
            return self.runtime.pod_cpu()

    def nodes(self) -> list[dict[str, Any]]:
        """The nodes pods run on, each with its labels, taints, GPUs and who holds them: the
        runtime's own when it has many (Ray), else this server's node."""
        with self._lock:
            listed = getattr(self.runtime, "nodes", None)
            if callable(listed):
                return [n.to_dict() for n in listed()]
            owners = self.runtime.gpu_owners()
        if self.node is None:
            return []
        node = self.node.to_dict()
        in_use: dict[str, list[str]] = {}
        for index, (key, pod) in sorted(owners.items()):
            in_use.setdefault(f"{key}/{pod}", []).append(str(index))
        return [{**node, "alive": True, "gpusInUse": in_use}]

    def pending_pods(self) -> dict[str, tuple[float | None, list[PodSpec]]]:
        """The pods of admitted workloads that are not started yet (their GPUs are busy, their
        node does not fit): Kubernetes shows such pods Pending. Planned as they would start, with
        the moment of admission (when Kueue's unsuspended Job would have created them).

        Takes the bridge's lock, lets it go, then reads the engine: never both at once in the
        order opposite to the hooks'."""
        engine = self._engine
        with self._lock:
            keys = sorted(self._to_start - set(self.runtime.running()))
        if engine is None or not keys:
            return {}
        out: dict[str, tuple[float | None, list[PodSpec]]] = {}
        for st in engine.workloads(keys=keys):
            manifest = engine.source_manifest(st.key)
            if manifest is None or st.admission is None:
                continue
            try:
                out[st.key] = (st.admitted_at, self._plan(st, manifest).pods)
            except PodSpecError:
                continue
        return out

    def job_status(self, key: str) -> dict[str, Any]:
        """What really runs for ``key``: pod phases and failed attempts and, for a RayCluster, its
        Ray nodes' records.

        Called by the engine while it renders a job, under its lock.
        """
        with self._lock:
            run = self.runtime.run_of(key)
        return {
            "pods": {p.name: p.phase for p in run.pods} if run else {},
            "restarts": {p.name: p.restarts for p in run.pods} if run else {},
            "ray": self.runtime.ray_records(key) if run else {},
        }

    def pod_phases(self) -> dict[str, dict[str, Any]]:
        """Every workload's pod phases and failed attempts, the runtime read once (a Job
        list's statuses); Ray records are left out."""
        with self._lock:
            runs = self.runtime.running()
        return {
            key: {
                "pods": {p.name: p.phase for p in run.pods},
                "restarts": {p.name: p.restarts for p in run.pods},
            }
            for key, run in runs.items()
        }

    def logs(self, key: str, pod: str | None, follow: bool) -> Iterator[str]:
        """The log lines of ``key``; the pods are looked up now, the lines read as iterated."""
        with self._lock:
            return self.runtime.logs(key, pod, follow=follow)

    def shutdown(self, grace_seconds: float | None = None) -> None:
        """Graceful server stop: every pod is stopped and gone before this returns."""
        with self._lock:
            self.runtime.shutdown(grace_seconds)

    # -- steps ----------------------------------------------------------------------------------
    def _reconcile(self, engine: Engine, now: float) -> None:
        """Level-triggered: make the runtime agree with engine state rebuilt from the store."""
        self._epoch = engine.epoch
        running = self.runtime.running()
        self._to_start.clear()
        self._awaiting_job.clear()
        self._ready.clear()  # the rebuilt engine has no PodsReady conditions yet
        for w in engine.workloads(phases=HOLDING):
            if w.phase == Phase.EVICTING:
                self._stop_or_confirm(engine, w.key, running, now)
            elif w.key not in running and not w.awaiting_checks and self._runs_pods(engine, w):
                msg = "its pods were gone when the server started again; requeued to run anew"
                log.warning("Workload %s: %s", w.key, msg)
                engine.evict(w.key, PODS_LOST, msg, now)
                engine.confirm_stopped(w.key, now)
        self._stop_unwanted(engine)

    def _stop_or_confirm(
        self, engine: Engine, key: str, running: Mapping[str, WorkloadRun], now: float
    ) -> None:
        run = running.get(key)
        if run is None:
            engine.confirm_stopped(key, now)  # nothing ran: the quota is free at once
        elif not run.stopping:
            self.runtime.stop(key)

    def _stop_unwanted(self, engine: Engine, keys: Collection[str] | None = None) -> None:
        """Pods of workloads that were deleted, finished or never admitted are stopped: those of
        ``keys`` only if given (a settle's decisions: a view per running workload at every
        settle made a burst of N pods cost N squared views), else every running workload's."""
        if keys is None:
            running = self.runtime.running()
        else:  # each asked for alone: no snapshot of every running workload per settle
            running = {k: run for k in keys if (run := self.runtime.run_of(k)) is not None}
        if not running:
            return
        held = engine.holding(list(running))
        for key, run in running.items():
            if key not in held and not run.stopping:
                self.runtime.stop(key)

    def _start_pending(self, engine: Engine, now: float, *, recheck_all: bool = False) -> None:
        """Start what waits to start. A worker's copy still waiting for its Job is tried again
        only once a job object of its name is stored, or at the tick (``recheck_all``), which
        also drops copies deleted meanwhile: trying each waiting copy at every settle (a view
        and its manifest decoded) was most of a MultiKueue worker's CPU during a burst."""
        if not self._to_start:
            return
        keys = self._to_start
        if not recheck_all:
            if self._awaiting_job:
                keys = keys - (self._awaiting_job - engine.with_job(self._awaiting_job))
            # A copy just admitted, its Job not here yet: straight to waiting for it.
            copies = engine.copies_awaiting_job(keys - self._awaiting_job)
            if copies:
                self._awaiting_job |= copies
                keys = keys - copies
            if not keys:
                return
        admitted = {w.key: w for w in engine.workloads(keys=keys)}
        for key in sorted(keys):
            w = admitted.get(key)
            if w is None or w.phase != Phase.ADMITTED or w.awaiting_checks:
                self._started(key)
                continue
            if self._start(engine, w, now):
                self._started(key)

    def _started(self, key: str) -> None:
        """``key`` no longer waits to start (started, failed, or no longer admitted)."""
        self._to_start.discard(key)
        self._awaiting_job.discard(key)
        self._warned.pop(key, None)

    def _report_pods_ready(self, engine: Engine, now: float) -> None:
        """Kueue's waitForPodsReady: tell the engine when every pod of a workload runs (or has
        succeeded) and when one no longer does (it failed, or its node died and the replacement
        waits); the core judges the timeout. Only changes are told, and only when enabled."""
        if engine.config.wait_for_pods_ready is None:
            return
        runs = self.runtime.running()
        for key, run in runs.items():
            if run.stopping:
                continue
            ready = bool(run.pods) and all(p.phase in _READY_PHASES for p in run.pods)
            if self._ready.get(key) != ready:
                self._ready[key] = ready
                engine.set_pods_ready(key, ready, now)
        for key in [k for k in self._ready if k not in runs]:
            del self._ready[key]

    def _enforce_deadlines(self, engine: Engine, now: float) -> None:
        """KubeRay's ``activeDeadlineSeconds``: a RayJob whose pods run longer than that since
        it was admitted fails (reason ``DeadlineExceeded``); its pods then stop, as any finished
        workload's (``_stop_unwanted``) and its quota is released."""
        running = self.runtime.running()
        for key in self._deadlines.keys() - running.keys():  # a set difference: every tick
            del self._deadlines[key]
            self._ray_seen.pop(key, None)
        for key in running.keys() - self._deadlines.keys():  # each run's manifest read once
            manifest = engine.source_manifest(key) or {}
            spec = manifest.get("spec") if manifest.get("kind") == "RayJob" else None
            self._deadlines[key] = active_deadline(spec if isinstance(spec, dict) else {})
            self._ray_seen[key] = {} if manifest.get("kind") in _RAY_KINDS else None
        # Views only of what has a deadline (a RayJob's): one for every running workload at
        # every tick was 7 % of a MultiKueue worker's CPU with 600 Jobs running.
        timed = [key for key, deadline in self._deadlines.items() if deadline is not None]
        if not timed:
            return
        for st in engine.workloads(keys=timed, phases=(Phase.ADMITTED,)):
            deadline = self._deadlines[st.key]
            if deadline is None or st.admitted_at is None or now - st.admitted_at < deadline:
                continue
            message = f"the RayJob ran longer than its activeDeadlineSeconds ({deadline}s)"
            log.warning("Workload %s: %s", st.key, message)
            what = f"Workload {st.key}"
            engine.record_event(Event(now, "Warning", DEADLINE_EXCEEDED, what, message, st.key))
            engine.finish_now(st.key, now, succeeded=False)

    def _watch_ray_records(self, engine: Engine, now: float) -> None:
        """A RayCluster's or RayJob's status also follows its Ray node records (the head's
        address and readiness, each worker's, a RayJob's job status), which its pods write
        after they started: a pod event never tells of them. Every ``RAY_RECORDS_SECONDS``
        the records of each running one (``_enforce_deadlines`` keeps which they are) are read,
        and one whose records changed has its status rendered again at the next settle
        (``Engine.job_inputs_changed``), so its watchers hear of it (a RayCluster turning
        ``ready``, a MultiKueue manager mirroring it) within that time."""
        if now - self._ray_read_at < RAY_RECORDS_SECONDS:
            return
        self._ray_read_at = now
        for key, last in list(self._ray_seen.items()):
            if last is None:
                continue
            records = self.runtime.ray_records(key)
            if records != last:
                self._ray_seen[key] = records
                engine.job_inputs_changed(key)

    def _runs_pods(self, engine: Engine, st: WorkloadView) -> bool:
        manifest = engine.source_manifest(st.key)
        if manifest is None or not runs_pods_here(manifest):
            return False
        try:
            self._plan(st, manifest)
        except PodSpecError:
            return False
        return True

    def _plan(self, st: WorkloadView, manifest: Mapping[str, Any]) -> RunPlan:
        bench = None
        if manifest.get("kind") == NOTEBOOK.kind:
            wdir = self.runtime.workload_dir(st.key)
            home = wdir / "home"
            home.mkdir(parents=True, exist_ok=True)
            bench = (workbench.ensure(wdir, st.workload.namespace, st.workload.name), home)
        return build_run_plan(
            st.workload,
            st.admission,
            manifest,
            ray_dir=self._ray_dir(st.key),
            workbench=bench,
        )

    def workbench_at(self, key: str) -> workbench.Workbench | None:
        """Where a running workbench's server listens (None when it has no pods now)."""
        with self._lock:
            if self.runtime.run_of(key) is None:
                return None
            return workbench.load(self.runtime.workload_dir(key))

    def _ray_dir(self, key: str) -> Path:
        return self.runtime.workload_dir(key) / "ray"

    def _start(self, engine: Engine, st: WorkloadView, now: float) -> bool:
        """Start the pods of ``st``; False to try again at the next poll (GPUs still busy)."""
        key = st.key
        manifest = engine.source_manifest(key)
        if manifest is None:
            self._warn(engine, key, "FailedCreate", "no stored manifest to run it from", now)
            return True
        if not runs_pods_here(manifest):
            # A MultiKueue manager's Job runs on a worker; a worker's copy of a Workload waits
            # for the Job its manager creates next (tried again once it is stored).
            if manifest.get("kind") != WORKLOAD.kind:
                return True
            self._awaiting_job.add(key)
            return False
        try:
            plan = self._plan(st, manifest)
        except PodSpecError as exc:
            if manifest.get("kind") == WORKLOAD.kind:
                return True  # a bare Workload with no command only reserves quota, as in Kueue
            return self._cannot_run(engine, key, str(exc), now)
        mismatch = self._node_mismatch(engine, st)
        if mismatch:
            self._warn(engine, key, "FailedScheduling", f"pods pending: {mismatch}", now)
            return False
        try:
            pods = self._placed(engine, st, plan.pods)
            self.runtime.start(key, pods, backoff_limit=plan.backoff_limit)
        except (NotEnoughGpus, RuntimeUnavailable) as exc:  # retried at the next poll
            self._warn(engine, key, "FailedScheduling", f"pods pending: {exc}", now)
            return False
        except AlreadyRunning as exc:
            if self.runtime.run_of(key) is not None:
                return True
            self._warn(engine, key, "FailedCreate", f"pods pending: {exc}", now)
            return False
        except RuntimeRequestError as exc:
            return self._cannot_run(engine, key, str(exc), now)
        return True

    def _cannot_run(self, engine: Engine, key: str, why: str, now: float) -> bool:
        """Pods that can never be created (a bad command, Ray's temp dir too long for its
        sockets): the workload fails and frees its quota rather than hold it with no pods."""
        self._warn(engine, key, "FailedCreate", f"not run: {why}", now)
        engine.finish_now(key, now, succeeded=False)
        return True

    def _placed(self, engine: Engine, st: WorkloadView, pods: list[PodSpec]) -> list[PodSpec]:
        """Each pod with where it may go: its admitted flavors' nodeLabels and tolerations and its
        own nodeSelector, as Kueue injects them into the pod (a runtime of many nodes, Ray,
        places pods by them)."""
        if st.admission is None:
            return pods
        pod_sets = {ps.name: ps for ps in st.workload.pod_sets}
        where = {}
        for psa in st.admission.pod_sets:
            ps = pod_sets.get(psa.name)
            labels = dict(ps.node_selector) if ps else {}
            tolerations = list(ps.tolerations) if ps else []
            for name in sorted(set(psa.flavors.values())):
                flavor = engine.flavor(name)
                if flavor is not None:
                    labels.update(flavor.node_labels)
                    tolerations.extend(flavor.tolerations)
            where[psa.name] = (tuple(sorted(labels.items())), tuple(tolerations))
        return [
            replace(p, node_selector=where[p.pod_set][0], tolerations=where[p.pod_set][1])
            if p.pod_set in where
            else p
            for p in pods
        ]

    def _node_mismatch(self, engine: Engine, st: WorkloadView) -> str:
        """Why the admitted flavors keep this workload's pods off this node ('' if they fit)."""
        if self.node is None or st.admission is None:
            return ""
        pod_sets = {ps.name: ps for ps in st.workload.pod_sets}
        for psa in st.admission.pod_sets:
            ps = pod_sets.get(psa.name)
            for name in sorted(set(psa.flavors.values())):
                flavor = engine.flavor(name)
                if flavor is None:
                    continue
                match = flavor_matches_node(
                    flavor,
                    self.node.labels,
                    self.node.taints,
                    ps.tolerations if ps else (),
                    ps.node_selector if ps else None,
                )
                if not match.ok:
                    return f"node {self.node.name}: {match.reason}"
        return ""

    def _on_runtime_event(self, engine: Engine, ev: RuntimeEvent, now: float) -> None:
        key = ev.workload
        st = engine.workload(key)
        self._record(engine, ev, now)
        engine.job_inputs_changed(key)  # its Job's status follows its pods: watchers hear of it
        if ev.kind == EventKind.STOPPED:
            if st is None:
                self._forget(key)
            elif st.phase == Phase.EVICTING:
                engine.confirm_stopped(key, now)
            elif st.phase == Phase.ADMITTED and not st.awaiting_checks:
                self._to_start.add(key)  # stopped while still admitted: run it again
        elif ev.kind in (EventKind.SUCCEEDED, EventKind.FAILED):
            if st is None:
                self._forget(key)
            elif st.phase in HOLDING:
                engine.finish_now(key, now, succeeded=ev.kind == EventKind.SUCCEEDED)

    def _forget(self, key: str) -> None:
        try:
            self.runtime.forget(key)
        except (RuntimeRequestError, OSError) as exc:
            log.warning("Workload %s: its runtime records were not removed: %s", key, exc)

    def _record(self, engine: Engine, ev: RuntimeEvent, now: float) -> None:
        type_, reason = _RUNTIME_EVENTS[ev.kind]
        if ev.kind == EventKind.STARTED:
            run = self.runtime.run_of(ev.workload)
            pods = run.pods if run else ()
            where = "; ".join(
                f"{p.name} pid {p.pid}"
                + (f" on GPU {','.join(map(str, p.gpus))}" if p.gpus else "")
                for p in pods
            )
            message = f"Started {ev.message}: {where}" if where else f"Started {ev.message}"
        else:
            pod = f"pod {ev.pod}: " if ev.pod else ""
            message = f"{pod}{ev.message}" if ev.message else f"{pod}{reason}"
        if ev.kind == EventKind.STOPPED:
            message = f"All pods are gone ({ev.message})"
        engine.record_event(
            Event(now, type_, reason, f"Workload {ev.workload}", message, workload=ev.workload)
        )

    def _warn(self, engine: Engine, key: str, reason: str, message: str, now: float) -> None:
        if self._warned.get(key) == message:
            return
        self._warned[key] = message
        log.warning("Workload %s: %s", key, message)
        engine.record_event(Event(now, "Warning", reason, f"Workload {key}", message, workload=key))
