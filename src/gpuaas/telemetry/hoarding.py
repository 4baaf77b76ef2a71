"""Hoarding detection: a workload that holds GPUs and leaves them idle for a whole window.

This module owns the detector's memory (per workload: since when all its GPUs have been idle,
how many GPU-seconds were wasted, whether it is flagged) and the decisions it emits: ``Flag``
(a condition, an event and a metric for the engine to publish), ``Evict`` with reason
``IdleGPU`` where the rule says so, and ``Clear`` when utilisation recovers or the GPUs are
released. It is pure: samples and ``now`` go in, decisions come out; it evicts nothing itself
and reads no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpuaas.core.state import Event
from gpuaas.telemetry.config import GpuaasConfiguration, HoardingAction, HoardingRule
from gpuaas.telemetry.samples import AttributedSample, by_workload

CONDITION_TYPE = "GPUIdle"
REASON_IDLE = "IdleGPU"  # the eviction reason, as the issue names it
REASON_ACTIVE = "GPUActive"
REASON_RELEASED = "GPUsReleased"


class DecisionKind(StrEnum):
    FLAG = "Flag"
    EVICT = "Evict"
    CLEAR = "Clear"


@dataclass(slots=True, frozen=True)
class HoardingDecision:
    kind: DecisionKind
    namespace: str
    workload: str
    cluster_queue: str
    time: float
    gpus: int
    idle_since: float | None
    wasted_gpu_hours: float
    action: HoardingAction
    reason: str
    message: str

    @property
    def workload_key(self) -> str:
        return f"{self.namespace}/{self.workload}"

    def condition(self) -> tuple[str, str, str, str]:
        """(type, status, reason, message) for ``WorkloadState.set_condition``."""
        status = "False" if self.kind is DecisionKind.CLEAR else "True"
        return CONDITION_TYPE, status, self.reason, self.message

    def event(self) -> Event:
        kind = "Normal" if self.kind is DecisionKind.CLEAR else "Warning"
        return Event(
            time=self.time,
            type=kind,
            reason=self.reason,
            object=f"Workload {self.workload_key}",
            message=self.message,
            workload=self.workload_key,
        )


@dataclass(slots=True, frozen=True)
class HoardingRow:
    """One offender, as ``gpuaas get hoarding`` lists it."""

    namespace: str
    workload: str
    cluster_queue: str
    gpus: int
    idle_since: float
    idle_seconds: float
    wasted_gpu_hours: float
    action: HoardingAction
    # Flagged, or Evicting once an Evict decision was emitted; the telemetry bridge adds the
    # holders it acted on: BackingOff (requeued, waiting for requeue_at), Deactivated, Stopped
    state: str
    idle_evictions: int = 0  # times it was evicted (or stopped) for idle GPUs
    requeue_at: float | None = None  # BackingOff: when it may be admitted again

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "workload": self.workload,
            "clusterQueue": self.cluster_queue,
            "gpus": self.gpus,
            "idleSince": self.idle_since,
            "idleSeconds": self.idle_seconds,
            "wastedGPUHours": self.wasted_gpu_hours,
            "action": self.action.value,
            "state": self.state,
            "idleEvictions": self.idle_evictions,
            "requeueAt": self.requeue_at,
        }


@dataclass(slots=True)
class _Track:
    namespace: str
    workload: str
    cluster_queue: str
    rule: HoardingRule
    gpus: int
    last_seen: float
    idle_since: float | None = None
    wasted_gpu_seconds: float = 0.0
    flagged: bool = False
    evicted: bool = False


class HoardingDetector:
    """Feed it every attributed sample batch with its time; act on the decisions it returns.

    A gap in telemetry longer than ``max_gap_seconds`` restarts the idle stretch: without
    readings nobody can claim the GPUs stayed idle, and evicting on missing data is worse than
    flagging late.
    """

    def __init__(
        self, config: GpuaasConfiguration | None = None, *, max_gap_seconds: float | None = None
    ) -> None:
        self.config = config or GpuaasConfiguration()
        interval = self.config.telemetry.interval_seconds
        self.max_gap_seconds = max_gap_seconds if max_gap_seconds is not None else 4 * interval
        self._tracks: dict[str, _Track] = {}

    def observe(self, samples: Iterable[AttributedSample], now: float) -> list[HoardingDecision]:
        decisions: list[HoardingDecision] = []
        grouped = by_workload(samples)
        # 1. workloads that no longer hold any GPU: forget them, clearing a flag
        for key in sorted(set(self._tracks) - set(grouped)):
            gone = self._tracks.pop(key)
            if gone.flagged:
                decisions.append(self._decide(gone, DecisionKind.CLEAR, now, REASON_RELEASED))
        # 2. every holder: extend or break its idle stretch
        for key in sorted(grouped):
            items = grouped[key]
            h = items[0].holder
            assert h is not None  # by_workload keeps held GPUs only
            rule = self.config.rule_for(h.cluster_queue)
            track = self._tracks.get(key)
            if rule is None:
                if track is not None and track.flagged:
                    decisions.append(self._decide(track, DecisionKind.CLEAR, now, REASON_ACTIVE))
                self._tracks.pop(key, None)
                continue
            if track is None:
                track = _Track(h.namespace, h.workload, h.cluster_queue, rule, len(items), now)
                self._tracks[key] = track
            track.rule, track.gpus = rule, len(items)
            idle = all(
                i.sample.utilization_percent < rule.utilization_threshold_percent for i in items
            )
            decisions.extend(self._step(track, idle, now))
            track.last_seen = now
        return decisions

    def _step(self, track: _Track, idle: bool, now: float) -> list[HoardingDecision]:
        rule = track.rule
        if not idle:
            out = []
            if track.flagged:
                out.append(self._decide(track, DecisionKind.CLEAR, now, REASON_ACTIVE))
            track.idle_since, track.wasted_gpu_seconds = None, 0.0
            track.flagged = track.evicted = False
            return out
        gap = now - track.last_seen
        if track.idle_since is None or gap > self.max_gap_seconds:
            track.idle_since, track.wasted_gpu_seconds = now, 0.0
        else:
            track.wasted_gpu_seconds += gap * track.gpus
        out = []
        if not track.flagged and now - track.idle_since >= rule.window_seconds:
            track.flagged = True
            out.append(self._decide(track, DecisionKind.FLAG, now, REASON_IDLE))
        if track.flagged and rule.action is HoardingAction.EVICT and not track.evicted:
            track.evicted = True
            out.append(self._decide(track, DecisionKind.EVICT, now, REASON_IDLE))
        return out

    def _decide(
        self, track: _Track, kind: DecisionKind, now: float, reason: str
    ) -> HoardingDecision:
        rule = track.rule
        wasted = track.wasted_gpu_seconds / 3600.0
        idle_for = 0.0 if track.idle_since is None else now - track.idle_since
        if kind is DecisionKind.FLAG:
            message = (
                f"{track.gpus} GPU(s) below {rule.utilization_threshold_percent:g}% utilization "
                f"for {idle_for:.0f}s (window {rule.window_seconds:.0f}s); "
                f"{wasted:.2f} GPU-hours wasted; action {rule.action.value}"
            )
        elif kind is DecisionKind.EVICT:
            message = (
                f"evicted: {track.gpus} idle GPU(s) held for {idle_for:.0f}s, "
                f"{wasted:.2f} GPU-hours wasted"
            )
        elif reason == REASON_RELEASED:
            message = "GPUs released"
        else:
            message = f"GPU utilization back above {rule.utilization_threshold_percent:g}%"
        return HoardingDecision(
            kind=kind,
            namespace=track.namespace,
            workload=track.workload,
            cluster_queue=track.cluster_queue,
            time=now,
            gpus=track.gpus,
            idle_since=track.idle_since,
            wasted_gpu_hours=wasted,
            action=rule.action,
            reason=reason,
            message=message,
        )

    # -- read side -----------------------------------------------------------------------------
    def offenders(self, now: float) -> list[HoardingRow]:
        """Flagged workloads, most wasteful first: the rows of ``gpuaas get hoarding``."""
        rows = [
            HoardingRow(
                namespace=t.namespace,
                workload=t.workload,
                cluster_queue=t.cluster_queue,
                gpus=t.gpus,
                idle_since=t.idle_since if t.idle_since is not None else now,
                idle_seconds=now - t.idle_since if t.idle_since is not None else 0.0,
                wasted_gpu_hours=t.wasted_gpu_seconds / 3600.0,
                action=t.rule.action,
                state="Evicting" if t.evicted else "Flagged",
            )
            for t in self._tracks.values()
            if t.flagged
        ]
        rows.sort(key=lambda r: (-r.wasted_gpu_hours, r.namespace, r.workload))
        return rows

    def flagged_stretches(self) -> dict[str, tuple[float, float, int]]:
        """Workload key -> (idle since, last idle sample, GPUs) of every flagged holder."""
        return {
            key: (t.idle_since, t.last_seen, t.gpus)
            for key, t in self._tracks.items()
            if t.flagged and t.idle_since is not None
        }

    def is_flagged(self, workload_key: str) -> bool:
        track = self._tracks.get(workload_key)
        return track is not None and track.flagged
