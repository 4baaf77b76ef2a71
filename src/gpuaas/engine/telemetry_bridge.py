"""The telemetry observer: counters, usage ledger, GPU sampling and the hoarding policy.

``TelemetryBridge`` rides on the engine as an ``EngineObserver``. From the core's events it feeds
Kueue's counters and opens and closes usage intervals; on each tick it samples the GPUs when the
configured interval has passed (NVML, else the simulated collector), ties each GPU to the
workload holding it, runs the hoarding detector and carries out its decisions (a ``GPUIdle``
condition and an event; eviction with reason ``IdleGPU`` where the rule says ``Evict``). It also
answers the read side: the ``/metrics`` snapshot, offenders and the usage report. It decides no
admission and writes no store row itself: conditions and events go through the engine's settle.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaas.core.cluster import Cluster
from gpuaas.core.state import Event, WorkloadState
from gpuaas.engine.telemetry_view import (
    HOLDING,
    DerivedPinning,
    Owners,
    cluster_queue_rows,
    holders,
    local_queue_rows,
)
from gpuaas.inventory.gpus import GpuDevice
from gpuaas.store import ObjectKey
from gpuaas.telemetry import (
    AttributedSample,
    DecisionKind,
    GpuaasConfiguration,
    GpuCollector,
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
    parse_configuration,
    profile_from_annotations,
    usage_report,
)
from gpuaas.telemetry.usage_store import open_usage_store
from gpuaas.vocab.kinds import CONFIGURATION

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)

CONFIG_KEY = ObjectKey(CONFIGURATION.gk, "", "default")
EVICTION_PREFIX = "EvictedDueTo"
IDLE_GPU = "IdleGPU"


class TelemetryBridge:
    """One per engine. ``attach(engine)`` registers it and catches up with restored state.

    ``owners`` is the local runtime's pinning (``LocalRuntime.gpu_owners``); without it the GPUs
    are attributed from the admitted workloads' GPU usage (``DerivedPinning``). ``collector``
    replaces the one the configuration would pick (tests pass a ``SimulatedCollector``).
    ``interval_seconds`` is the server's default; a configuration that sets
    ``spec.telemetry.intervalSeconds`` wins over it.
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
    ) -> None:
        self.gpus = list(gpus)
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
        self.simulated = SimulatedCollector(
            [SimulatedGpu(g.index, g.uuid, g.model, g.memory_bytes) for g in self.gpus],
            seed=seed,
            hostname=self.hostname,
        )
        self.collector: GpuCollector = self._pick_collector("auto")
        self._config_rv: int | None = None
        self._open: dict[str, float] = {
            i.workload_key: i.start for i in self.ledger.intervals() if i.end is None
        }
        self._queued_since: dict[str, float] = {}
        self._bad_profiles: set[str] = set()

    # -- wiring ----------------------------------------------------------------------------------
    def attach(self, engine: Engine) -> TelemetryBridge:
        with engine._lock:  # the engine's lock: the hooks below also run under it
            engine.observers.append(self)
            now = engine.clock()
            self._reload_config(engine)
            self._sync_ledger(engine.cluster, now, everything=True)
        return self

    def _interval(self, raw: dict[str, Any] | None) -> float:
        spec = (raw or {}).get("spec") or {}
        if isinstance(spec.get("telemetry"), dict) and "intervalSeconds" in spec["telemetry"]:
            return self.config.telemetry.interval_seconds
        if self.default_interval is not None:
            return self.default_interval
        return self.config.telemetry.interval_seconds

    def _pick_collector(self, kind: str) -> GpuCollector:
        if self._fixed_collector is not None:
            return self._fixed_collector
        if kind == "simulated":
            return self.simulated
        fallback = self.simulated if kind == "auto" else None
        return NvmlCollector(
            fallback=fallback,
            fallback_name="the simulated collector" if fallback else "no GPU samples",
            hostname=self.hostname,
        )

    def _reload_config(self, engine: Engine) -> None:
        """Pick up an applied (or deleted) ``GpuaasConfiguration default``."""
        rec = engine.objects.get(CONFIG_KEY)
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
        self._close_collector()
        close = getattr(self.ledger.store, "close", None)  # SQLite and PostgreSQL have one
        if callable(close):
            close()

    # -- EngineObserver --------------------------------------------------------------------------
    def on_tick(self, engine: Engine, now: float) -> None:
        self._reload_config(engine)
        if not self.sampler.due(now):
            return
        cluster = engine.cluster
        pinning = holders(cluster, self._current_owners(cluster))
        self._assign_profiles(cluster, pinning)
        samples = self.sampler.poll(self.collector, now) or []
        self.latest = attribute(samples, pinning)
        decisions = self.detector.observe(self.latest, now)
        evicted: set[str] = set()
        for d in decisions:
            if self._carry_out(cluster, d, now):
                evicted.add(d.workload_key)
        if evicted:
            # Its GPUs are released with its quota: the flag clears, and a readmission starts a
            # fresh idle window instead of inheriting this one.
            rest = [
                a for a in self.latest if a.holder is None or a.holder.workload_key not in evicted
            ]
            for d in self.detector.observe(rest, now):
                self._carry_out(cluster, d, now)

    def on_events(self, engine: Engine, events: list[Event], now: float) -> None:
        self._reload_config(engine)
        cluster = engine.cluster
        for ev in events:
            self._count(cluster, ev)
        self._sync_ledger(cluster, now, everything=False)

    # -- counters and ledger ---------------------------------------------------------------------
    def _count(self, cluster: Cluster, ev: Event) -> None:
        st = cluster.workloads.get(ev.workload or "")
        if st is None:
            return
        cq = st.cluster_queue or ""
        pc = st.workload.priority_class or ""
        if ev.reason in ("QuotaReserved", "Admitted"):
            wait = ev.time - self._queued_since.get(st.key, st.created_at)
            if ev.reason == "QuotaReserved":
                self.counters.quota_reserved(cq, wait, pc)
                self._reserve(st, ev.time)
            else:
                self.counters.admitted(cq, wait, pc)
        elif ev.reason == "Requeued":
            self._queued_since[st.key] = ev.time
        elif ev.reason == "Finished":
            self._queued_since.pop(st.key, None)
            if st.cluster_queue:
                self.counters.finished(cq, pc)
        elif ev.reason.startswith(EVICTION_PREFIX):
            self.counters.evicted(cq, ev.reason.removeprefix(EVICTION_PREFIX), pc)
        elif ev.reason == "Preempted" and ev.related:
            preemptor = cluster.workloads.get(ev.related)
            preempting_cq = (preemptor.cluster_queue if preemptor else None) or ""
            self.counters.preempted(preempting_cq, st.preemption_reason or "")

    def _reserve(self, st: WorkloadState, now: float) -> None:
        if st.admission is None:
            return
        interval = self.ledger.reserve_admission(st, now)
        self._open[st.key] = interval.start

    def _sync_ledger(self, cluster: Cluster, now: float, *, everything: bool) -> None:
        """Close intervals whose quota is gone; with ``everything``, open missing ones too
        (after a restart the core restores admissions without events)."""
        for key, start in list(self._open.items()):
            st = cluster.workloads.get(key)
            held = st is not None and st.phase in HOLDING and st.admission is not None
            if not held or st is None or st.admitted_at != start:
                self.ledger.release(key, now)
                del self._open[key]
        if everything:
            for st in cluster.workloads.values():
                if st.phase in HOLDING and st.admission is not None and st.key not in self._open:
                    self._reserve(st, now)

    # -- sampling and hoarding -------------------------------------------------------------------
    def _current_owners(self, cluster: Cluster) -> Owners:
        if self._owners is not None:
            return self._owners()
        return self._derived.owners(cluster)

    def _assign_profiles(self, cluster: Cluster, pinning: dict[int | str, Any]) -> None:
        mapping: dict[int, tuple[str, Profile | str]] = {}
        known = {g.index for g in self.simulated.gpus}
        for index, h in pinning.items():
            if not isinstance(index, int) or index not in known:
                continue
            st = cluster.workloads.get(h.workload_key)
            annotations = st.workload.annotations if st is not None else {}
            try:
                profile = profile_from_annotations(h.workload_key, annotations)
            except TelemetryInputError as exc:
                if h.workload_key not in self._bad_profiles:
                    self._bad_profiles.add(h.workload_key)
                    log.warning("%s; simulating profile busy", exc)
                profile = Profile.BUSY
            mapping[index] = (h.workload_key, profile)
        self.simulated.set_assignments(mapping)

    def _carry_out(self, cluster: Cluster, d: HoardingDecision, now: float) -> bool:
        """Publish one decision; True when it evicted the workload."""
        st = cluster.workloads.get(d.workload_key)
        if st is None:
            return False
        if st.set_condition(*d.condition(), now):
            cluster.dirty.add(d.workload_key)  # the engine persists statuses of dirty workloads
        if d.kind is not DecisionKind.EVICT:
            cluster.events.append(d.event())
            return False
        # The core's EvictedDueToIdleGPU event says it; the eviction is counted from that event.
        return cluster.evict(d.workload_key, IDLE_GPU, d.message, now)

    # -- read side (callers hold the engine lock) --------------------------------------------------
    def snapshot(self, cluster: Cluster, now: float) -> MetricsSnapshot:
        cqs, quotas = cluster_queue_rows(cluster)
        lqs, lq_usage = local_queue_rows(cluster)
        return MetricsSnapshot(
            cluster_queues=tuple(cqs),
            quotas=tuple(quotas),
            local_queues=tuple(lqs),
            local_queue_usage=tuple(lq_usage),
            counters=self.counters.values(),
            gpus=tuple(self.latest),
            hoarding=tuple(self.detector.offenders(now)),
        )

    def offenders(self, now: float, namespaces: set[str] | None = None) -> list[HoardingRow]:
        rows = self.detector.offenders(now)
        return [r for r in rows if namespaces is None or r.namespace in namespaces]

    def usage(
        self,
        *,
        since: float | None,
        until: float,
        by: GroupBy,
        namespaces: set[str] | None = None,
    ) -> list[UsageRow]:
        intervals = [
            i
            for i in self.ledger.intervals(since, until)
            if namespaces is None or i.namespace in namespaces
        ]
        return usage_report(intervals, since=since, until=until, by=by, prices=self.config.prices)


def find(engine: Engine) -> TelemetryBridge | None:
    """The bridge riding on ``engine``, if telemetry is on."""
    for obs in engine.observers:
        if isinstance(obs, TelemetryBridge):
            return obs
    return None


def install(
    engine: Engine,
    *,
    usage_db: str | Path,
    gpus: Sequence[GpuDevice],
    interval_seconds: float | None = None,
    owners: Callable[[], Owners] | None = None,
) -> TelemetryBridge:
    """The server's wiring: a durable ledger at ``usage_db`` (a SQLite path, or a PostgreSQL URL:
    the server's own database), attached to ``engine``. Raises ``UsageStoreError``."""
    bridge = TelemetryBridge(
        gpus=gpus,
        interval_seconds=interval_seconds,
        usage_store=open_usage_store(usage_db),
        owners=owners,
    )
    return bridge.attach(engine)
