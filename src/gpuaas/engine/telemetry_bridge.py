"""The telemetry observer: counters, usage ledger, GPU sampling and the hoarding policy.

``TelemetryBridge`` rides on the engine as an ``EngineObserver``. From the core's decisions
(``core.decisions``, dispatched on their types, never on reason text) it feeds Kueue's counters
(``Reserve``/``Admit``: reserved and admitted with their wait; ``Finish``; ``Evict`` with its
reason, and with a preemptor the preempted counter) and opens and closes usage intervals (open at
``Reserve``, as Kueue counts quota from reservation; close at ``Release``). On each tick it
samples the GPUs when the configured interval has passed (NVML, else the simulated collector),
ties each GPU to the workload holding it (without NVML, a held GPU's load comes from its pod's
processes, read through the runtime), runs the hoarding detector and carries out its decisions
through the engine's observer actions (a ``GPUIdle`` condition and an event; where the rule says
``Evict``, the owner kind's action through ``engine.idle_response``: eviction with a growing
back-off, deactivation past the limit, or the kind's Stop) and keeps the flagged idle stretches
for the usage report's wasted GPU-hours. It reads the engine only through its views.
It also answers the read side (the ``/metrics`` snapshot, offenders, the usage report, the GPU
panel) under its own lock, never the engine's. It decides no admission and writes no store row
itself: conditions and events go through the engine's settle.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaas.core.decisions import (
    Admit,
    Decision,
    Delete,
    Evict,
    Finish,
    Release,
    Requeue,
    Reserve,
)
from gpuaas.core.state import Phase
from gpuaas.engine.idle_actions import IDLE_ACTIONS, IdleActions
from gpuaas.engine.idle_response import IdleResponder, hoarding_rows
from gpuaas.engine.telemetry_view import (
    DerivedPinning,
    Owners,
    cluster_queue_rows,
    gpu_pods,
    holders,
    local_queue_rows,
)
from gpuaas.engine.views import HOLDING, WorkloadView
from gpuaas.inventory.gpus import GpuDevice
from gpuaas.store import ObjectKey
from gpuaas.telemetry import (
    AttributedSample,
    DecisionKind,
    GpuaasConfiguration,
    GpuCollector,
    GpuHolder,
    GroupBy,
    HoardingDecision,
    HoardingDetector,
    HoardingRow,
    KueueCounters,
    MetricsSnapshot,
    NvmlCollector,
    Profile,
    Sampler,
    SimulatedCollector,
    SimulatedGpu,
    TelemetryInputError,
    UsageLedger,
    UsageRow,
    UsageStore,
    attribute,
    is_gpu,
    parse_configuration,
    profile_from_annotations,
    usage_report,
)
from gpuaas.telemetry.collectors import Assignment, PodKey
from gpuaas.telemetry.process_load import CpuTimes
from gpuaas.telemetry.usage_store import open_usage_store
from gpuaas.telemetry.usage_writer import WriteBehindUsageStore
from gpuaas.telemetry.waste import IdleStretch, WasteLog, wasted_gpu_hours, with_waste
from gpuaas.vocab.kinds import CONFIGURATION

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)

CONFIG_KEY = ObjectKey(CONFIGURATION.gk, "", "default")


class TelemetryBridge:
    """One per engine. ``attach(engine)`` registers it and catches up with restored state.

    ``owners`` is the local runtime's pinning (``RuntimeBridge.gpu_owners``); without it the GPUs
    are attributed from the admitted workloads' GPU usage (``DerivedPinning``). ``collector``
    replaces the one the configuration would pick (tests pass a ``SimulatedCollector``).
    ``interval_seconds`` is the server's default; a configuration that sets
    ``spec.telemetry.intervalSeconds`` wins over it.

    Locks: the hooks run under the engine lock and take the bridge's; the read side takes the
    engine's views first and only then the bridge's lock, so the two are always taken in the
    same order.
    """

    def __init__(
        self,
        *,
        gpus: Sequence[GpuDevice] = (),
        interval_seconds: float | None = None,
        usage_store: UsageStore | None = None,
        owners: Callable[[], Owners] | None = None,
        collector: GpuCollector | None = None,
        hostname: str | None = None,
        seed: int = 0,
        simulated_gpus: bool = False,
        pod_cpu: Callable[[], Mapping[PodKey, CpuTimes]] | None = None,
        idle_actions: IdleActions | None = None,
    ) -> None:
        self.gpus = list(gpus)
        # Declared GPUs (--fake-gpus): "auto" samples them with the simulated collector, and
        # NVML, which has nothing to say about them, is not even tried (nor warned about).
        self._simulated_gpus = simulated_gpus
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self.default_interval = interval_seconds
        self.counters = KueueCounters()
        self.ledger = UsageLedger(usage_store)
        self.config = GpuaasConfiguration()
        self.detector = HoardingDetector(self.config)
        self.sampler = Sampler(self._interval(None))
        self.latest: list[AttributedSample] = []
        self._owners = owners
        self._derived = DerivedPinning(self.gpus)
        self._fixed_collector = collector
        # Without NVML a held GPU's load is read from its pod's processes where the runtime can
        # read them (the local runtime); the profile annotation still picks a fixed load.
        self._pod_cpu = pod_cpu
        self.idle = IdleResponder(idle_actions if idle_actions is not None else IDLE_ACTIONS)
        self.simulated = SimulatedCollector(
            [SimulatedGpu(g.index, g.uuid, g.model, g.memory_bytes) for g in self.gpus],
            seed=seed,
            hostname=self.hostname,
            cpu_source=pod_cpu,
        )
        self.collector: GpuCollector = self._pick_collector("auto")
        self._config_rv: int | None = None
        self._open: dict[str, float] = {
            i.workload_key: i.start for i in self.ledger.intervals() if i.end is None
        }
        self._queued_since: dict[str, float] = {}  # key -> its last Requeue
        # Workloads holding quota that includes GPUs: all that derived pinning has to look at,
        # kept from Reserve and Release so that a sample never scans every admitted workload.
        self._gpu_holders: set[str] = set()
        self._bad_profiles: set[str] = set()
        self.waste = WasteLog()
        self._engine: Engine | None = None
        self._epoch = 0  # the engine's epoch the ledger was last fully synced with
        self._lock = threading.RLock()

    # -- wiring ----------------------------------------------------------------------------------
    def attach(self, engine: Engine) -> TelemetryBridge:
        self._engine = engine
        engine.add_observer(self)  # calls on_attach under the engine lock
        return self

    def _interval(self, raw: Mapping[str, Any] | None) -> float:
        spec = (raw or {}).get("spec") or {}
        if isinstance(spec.get("telemetry"), dict) and "intervalSeconds" in spec["telemetry"]:
            return self.config.telemetry.interval_seconds
        if self.default_interval is not None:
            return self.default_interval
        return self.config.telemetry.interval_seconds

    def _pick_collector(self, kind: str) -> GpuCollector:
        if self._fixed_collector is not None:
            return self._fixed_collector
        if kind == "simulated" or (kind == "auto" and self._simulated_gpus):
            return self.simulated
        fallback = self.simulated if kind == "auto" else None
        return NvmlCollector(
            fallback=fallback,
            fallback_name="the simulated collector" if fallback else "no GPU samples",
            hostname=self.hostname,
        )

    def _reload_config(self, engine: Engine) -> None:
        """Pick up an applied (or deleted) ``GpuaasConfiguration default``."""
        rec = engine.stored(CONFIG_KEY)
        rv = None if rec is None else rec.rv
        if rv == self._config_rv:
            return
        self._config_rv = rv
        old_collector = self.config.telemetry.collector
        try:
            self.config = GpuaasConfiguration() if rec is None else parse_configuration(rec.doc)
        except TelemetryInputError as exc:  # validated at apply; a stored doc may predate that
            log.warning("%s; keeping the previous configuration", exc)
            return
        interval = self._interval(None if rec is None else rec.doc)
        self.detector.config = self.config
        self.detector.max_gap_seconds = 4 * interval
        self.sampler.interval_seconds = interval
        if self.config.telemetry.collector != old_collector:
            self._close_collector()
            self.collector = self._pick_collector(self.config.telemetry.collector)

    def _close_collector(self) -> None:
        if isinstance(self.collector, NvmlCollector):
            self.collector.close()

    def close(self) -> None:
        with self._lock:
            self._close_collector()
            close = getattr(self.ledger.store, "close", None)  # SQLite and PostgreSQL have one
            if callable(close):
                close()

    # -- EngineObserver --------------------------------------------------------------------------
    def on_attach(self, engine: Engine, now: float) -> None:
        with self._lock:
            self._reload_config(engine)
            self._sync_ledger(engine, now)

    def on_tick(self, engine: Engine, now: float) -> None:
        with self._lock:
            self._reload_config(engine)
            if engine.epoch != self._epoch:
                self._sync_ledger(engine, now)
            if not self.sampler.due(now):
                return
            live, pinning = self._pinning(engine)
            self._assign_profiles(live, pinning)
            samples = self.sampler.poll(self.collector, now) or []
            self.latest = attribute(samples, pinning)
            # Only admitted holders are judged: one being evicted (its pods still stopping) is
            # released for the detector, so a readmission starts a fresh window.
            judged = [a for a in self.latest if _admitted(a, live)]
            decisions = self.detector.observe(judged, now)
            self._record_waste(live)
            evicted = {d.workload_key for d in decisions if self._carry_out(engine, d, now)}
            if evicted:
                # Its GPUs are released with its quota: the flag clears, and a readmission
                # starts a fresh idle window instead of inheriting this one.
                rest = [
                    a for a in judged if a.holder is None or a.holder.workload_key not in evicted
                ]
                for d in self.detector.observe(rest, now):
                    self._carry_out(engine, d, now)
                self._record_waste(live)

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None:
        with self._lock:
            self._reload_config(engine)
            if engine.epoch != self._epoch:
                self._sync_ledger(engine, now)  # rebuilt from the store: decisions were lost
            # One view per workload for the whole list: the views show the state after all of
            # these decisions either way, and a reservation's Reserve and Admit share it.
            seen: dict[str, WorkloadView | None] = {}
            for d in decisions:
                self._on_decision(engine, d, seen)

    # -- counters and ledger ---------------------------------------------------------------------
    def _on_decision(
        self, engine: Engine, d: Decision, seen: dict[str, WorkloadView | None]
    ) -> None:
        """Counters and the ledger, by decision type (``seen``: the views built so far)."""
        match d:
            case Release() | Delete():
                self._gpu_holders.discard(d.workload)
                if d.workload in self._open:
                    self.ledger.release(d.workload, d.time)
                    del self._open[d.workload]
                if isinstance(d, Delete):
                    self._queued_since.pop(d.workload, None)
                    self.idle.forget(d.workload)
                return
            case Requeue():
                self._queued_since[d.workload] = d.time
                return
            case Reserve():
                self.idle.readmitted(d.workload)  # judged afresh from its next sample
            case _:
                pass
        if d.workload in seen:
            w = seen[d.workload]
        else:
            w = seen[d.workload] = engine.workload(d.workload)
        pc = (w.priority_class if w is not None else None) or ""
        match d:
            case Reserve(cluster_queue=cq):
                self.counters.quota_reserved(cq, self._wait(d, w), pc)
                if w is not None:
                    self._reserve(w, d.time)
            case Admit(cluster_queue=cq):
                self.counters.admitted(cq, self._wait(d, w), pc)
            case Finish() if w is not None and w.cluster_queue:
                self._queued_since.pop(d.workload, None)
                self.counters.finished(w.cluster_queue, pc)
            case Evict(cluster_queue=cq, reason=reason, preemptor=preemptor):
                self.counters.evicted(cq, reason, pc)
                if preemptor is not None:
                    self.counters.preempted(
                        d.preemptor_cluster_queue or "", d.preemption_reason or ""
                    )
            case _:
                pass

    def _wait(self, d: Reserve | Admit, w: WorkloadView | None) -> float:
        """Kueue's admission wait: since the last requeue, else since creation."""
        since = self._queued_since.get(d.workload)
        if since is None:
            return d.wait_seconds if w is None else d.time - w.created_at
        return d.time - since

    def _reserve(self, w: WorkloadView, now: float) -> None:
        """Open ``w``'s usage interval, from its reservation (kept across restarts)."""
        if not w.holds_quota or w.admission is None:
            return
        if gpu_pods(w):
            self._gpu_holders.add(w.key)
        start = w.admitted_at if w.admitted_at is not None else now
        interval = self.ledger.reserve(
            w.key,
            namespace=w.namespace,
            local_queue=w.workload.queue_name,
            cluster_queue=w.admission.cluster_queue,
            usage=w.admission.usage(),
            now=start,
        )
        self._open[w.key] = interval.start

    def _sync_ledger(self, engine: Engine, now: float) -> None:
        """Make the open intervals those of the workloads holding quota now: after attaching
        (a restored admission comes with no decision) and after the engine rebuilt its state."""
        self._epoch = engine.epoch
        holding = {w.key: w for w in engine.workloads(phases=HOLDING) if w.holds_quota}
        self._gpu_holders = {key for key, w in holding.items() if gpu_pods(w)}
        for key, start in list(self._open.items()):
            w = holding.get(key)
            if w is None or w.admitted_at != start:
                self.ledger.release(key, now)
                del self._open[key]
        for key, w in holding.items():
            if key not in self._open:
                self._reserve(w, now)

    # -- sampling and hoarding -------------------------------------------------------------------
    def _pinning(
        self, engine: Engine
    ) -> tuple[dict[str, WorkloadView], dict[int | str, GpuHolder]]:
        """Who holds each GPU now, and the views of those workloads."""
        if self._owners is not None:
            owners: Owners = self._owners()
        else:
            held = engine.workloads(keys=self._gpu_holders, phases=HOLDING)
            owners = self._derived.owners(held)
        keys = {key for key, _ in owners.values()}
        live = {w.key: w for w in engine.workloads(keys=keys)} if keys else {}
        return live, holders(live, owners)

    def _assign_profiles(
        self, live: Mapping[str, WorkloadView], pinning: Mapping[int | str, GpuHolder]
    ) -> None:
        mapping: dict[int, Assignment] = {}
        known = {g.index for g in self.simulated.gpus}
        # A pod's processes say how busy its GPUs are where the runtime can read them; without
        # (no runtime: nothing runs) the old default, busy, stands.
        default = Profile.PROCESSES if self._pod_cpu is not None else Profile.BUSY
        for index, h in pinning.items():
            if not isinstance(index, int) or index not in known:
                continue
            w = live.get(h.workload_key)
            annotations = w.annotations if w is not None else {}
            try:
                profile = profile_from_annotations(h.workload_key, dict(annotations), default)
            except TelemetryInputError as exc:
                if h.workload_key not in self._bad_profiles:
                    self._bad_profiles.add(h.workload_key)
                    log.warning("%s; simulating profile %s", exc, default.value)
                profile = default
            mapping[index] = (h.workload_key, profile, h.pod)
        self.simulated.set_assignments(mapping)

    def _carry_out(self, engine: Engine, d: HoardingDecision, now: float) -> bool:
        """Publish one hoarding decision; True when it evicted (or stopped) the workload."""
        w = engine.workload(d.workload_key)
        if w is None:
            return False
        engine.set_condition(d.workload_key, *d.condition(), now)
        if d.kind is not DecisionKind.EVICT:
            engine.record_event(d.event())
            return False
        return self.idle.act(engine, w, d, self.config.rule_for(d.cluster_queue), now)

    def _record_waste(self, live: Mapping[str, WorkloadView]) -> None:
        """The flagged stretches as they stand now, for the usage report's wasted GPU-hours."""
        stretches = []
        for key, (start, end, gpus) in self.detector.flagged_stretches().items():
            w = live.get(key)
            if w is None:
                continue
            stretches.append(
                IdleStretch(
                    workload_key=key,
                    namespace=w.namespace,
                    local_queue=w.workload.queue_name,
                    cluster_queue=w.cluster_queue or "",
                    flavor=_gpu_flavor(w),
                    gpus=gpus,
                    start=start,
                    end=end,
                )
            )
        self.waste.observe(stretches)

    # -- read side (any thread; never under the engine lock) ---------------------------------------
    def _attached(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the telemetry bridge is not attached to an engine")
        return self._engine

    def snapshot(self, now: float | None = None) -> MetricsSnapshot:
        """Everything one ``/metrics`` scrape shows."""
        engine = self._attached()
        view = engine.view(local_queues=True)
        now = engine.clock() if now is None else now
        cqs, quotas = cluster_queue_rows(view)
        lqs, lq_usage = local_queue_rows(view)
        with self._lock:
            return MetricsSnapshot(
                cluster_queues=tuple(cqs),
                quotas=tuple(quotas),
                local_queues=tuple(lqs),
                local_queue_usage=tuple(lq_usage),
                counters=self.counters.values(),
                gpus=tuple(self.latest),
                hoarding=tuple(self.detector.offenders(now)),
            )

    def gpus_now(self) -> list[AttributedSample]:
        """The GPUs as last sampled, each with who holds it now (samples may be seconds old)."""
        engine = self._attached()
        if self._owners is not None:
            owners = self._owners()
            keys = {key for key, _ in owners.values()}
            live = {w.key: w for w in engine.workloads(keys=keys)} if keys else {}
            with self._lock:
                latest = list(self.latest)
        else:
            with self._lock:
                gpu_holders = set(self._gpu_holders)
            holding = engine.workloads(keys=gpu_holders, phases=HOLDING)
            with self._lock:
                owners = self._derived.owners(holding)
                latest = list(self.latest)
            live = {w.key: w for w in holding}
        pinning = holders(live, owners)
        return [
            AttributedSample(a.sample, pinning.get(a.sample.index) or pinning.get(a.sample.uuid))
            for a in latest
        ]

    @property
    def currency(self) -> str:
        with self._lock:
            return self.config.currency

    def offenders(self, now: float, namespaces: set[str] | None = None) -> list[HoardingRow]:
        """Flagged holders with their idle-eviction count, then those acted on that hold no
        GPU now (``idle_response.hoarding_rows``)."""
        engine = self._attached()
        with self._lock:
            keys = set(self.idle.history)
        views = {w.key: w for w in engine.workloads(keys=keys)} if keys else {}
        with self._lock:
            rows = hoarding_rows(self.detector.offenders(now), dict(self.idle.history), views, now)
        return [r for r in rows if namespaces is None or r.namespace in namespaces]

    def usage(
        self,
        *,
        since: float | None,
        until: float,
        by: GroupBy,
        namespaces: set[str] | None = None,
    ) -> list[UsageRow]:
        with self._lock:
            intervals = [
                i
                for i in self.ledger.intervals(since, until)
                if namespaces is None or i.namespace in namespaces
            ]
            prices = self.config.prices
            stretches = [
                st
                for st in self.waste.stretches()
                if namespaces is None or st.namespace in namespaces
            ]
        rows = usage_report(intervals, since=since, until=until, by=by, prices=prices)
        return with_waste(rows, wasted_gpu_hours(stretches, since=since, until=until, by=by))


def _admitted(a: AttributedSample, live: Mapping[str, WorkloadView]) -> bool:
    """A sample the hoarding detector may judge: an unheld GPU, or one an admitted workload
    holds (not one being evicted, whose pods are still stopping)."""
    if a.holder is None:
        return True
    w = live.get(a.holder.workload_key)
    return w is not None and w.phase == Phase.ADMITTED


def _gpu_flavor(w: WorkloadView) -> str:
    """The flavor of the GPUs ``w`` was admitted on ("" when it holds none on record)."""
    if w.admission is None:
        return ""
    for flavor, resource in w.admission.usage():
        if is_gpu(resource):
            return flavor
    return ""


def install(
    engine: Engine,
    *,
    usage_db: str | Path,
    gpus: Sequence[GpuDevice],
    interval_seconds: float | None = None,
    owners: Callable[[], Owners] | None = None,
    simulated_gpus: bool = False,
    pod_cpu: Callable[[], Mapping[PodKey, CpuTimes]] | None = None,
) -> TelemetryBridge:
    """The server's wiring: a durable ledger at ``usage_db`` (a SQLite path, or a PostgreSQL URL:
    the server's own database), attached to ``engine``. Raises ``UsageStoreError``."""
    bridge = TelemetryBridge(
        gpus=gpus,
        interval_seconds=interval_seconds,
        # written behind: an admission never waits on the usage database under the engine lock
        usage_store=WriteBehindUsageStore(open_usage_store(usage_db)),
        owners=owners,
        simulated_gpus=simulated_gpus,
        pod_cpu=pod_cpu,
    )
    return bridge.attach(engine)
