"""What the engine hands to ``/metrics``: plain rows of queue state, counters and GPU samples.

This module owns the input contract of the Prometheus exposition: frozen dataclasses the engine
fills from its own state at scrape time (``MetricsSnapshot``), and ``KueueCounters``, the
cumulative counters and wait-time histograms that cannot be recomputed from a snapshot because
Kueue's counters only ever grow. It imports nothing from the engine and formats nothing.
Quantities are in the core's units (CPU in millicores, memory in bytes); the exposition
converts them to Kueue's (CPU in cores).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field

from gpuaas.telemetry.hoarding import HoardingRow
from gpuaas.telemetry.samples import AttributedSample


def kueue_wait_buckets() -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets(16)``: 1, then 2.5 doubling 15 times."""
    return (1.0, *(2.5 * 2**i for i in range(15)))


WAIT_BUCKETS = kueue_wait_buckets()


@dataclass(slots=True, frozen=True)
class ClusterQueueStatus:
    name: str
    cohort: str = ""
    pending_active: int = 0  # in the admission heap
    pending_inadmissible: int = 0  # failed an attempt; waits for the cluster to change
    reserving_active: int = 0  # hold quota (QuotaReserved)
    admitted_active: int = 0  # admitted and not finished


@dataclass(slots=True, frozen=True)
class QuotaRow:
    """One (ClusterQueue, flavor, resource). ``None`` limits mean unset (+Inf, as Kueue)."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: int
    usage: int = 0
    reservation: int = 0
    cohort: str = ""
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True, frozen=True)
class LocalQueueStatus:
    namespace: str
    name: str
    pending_active: int = 0
    pending_inadmissible: int = 0
    reserving_active: int = 0
    admitted_active: int = 0


@dataclass(slots=True, frozen=True)
class LocalQueueUsageRow:
    namespace: str
    name: str
    flavor: str
    resource: str
    usage: int
    reservation: int = 0


@dataclass(slots=True, frozen=True)
class HistogramValue:
    """Cumulative counts per upper bound in ``WAIT_BUCKETS``, plus the count and sum."""

    buckets: tuple[int, ...]
    count: int
    sum: float


@dataclass(slots=True, frozen=True)
class CounterValues:
    """An immutable copy of ``KueueCounters`` taken at scrape time. Keys are label tuples."""

    quota_reserved: dict[tuple[str, str], int] = field(default_factory=dict)  # (cq, pc)
    admitted: dict[tuple[str, str], int] = field(default_factory=dict)  # (cq, pc)
    finished: dict[tuple[str, str], int] = field(default_factory=dict)  # (cq, pc)
    evicted: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    # ^ (cq, reason, underlying_cause, priority_class)
    preempted: dict[tuple[str, str], int] = field(default_factory=dict)  # (preempting cq, reason)
    admission_wait: dict[tuple[str, str], HistogramValue] = field(default_factory=dict)
    quota_reserved_wait: dict[tuple[str, str], HistogramValue] = field(default_factory=dict)


class _Histogram:
    __slots__ = ("count", "counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * len(WAIT_BUCKETS)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        i = bisect_left(WAIT_BUCKETS, value)  # le is inclusive
        if i < len(self.counts):
            self.counts[i] += 1
        self.count += 1
        self.sum += value

    def value(self) -> HistogramValue:
        cumulative, running = [], 0
        for c in self.counts:
            running += c
            cumulative.append(running)
        return HistogramValue(tuple(cumulative), self.count, self.sum)


class KueueCounters:
    """The engine calls these as it decides; ``/metrics`` reads ``values()``. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._quota_reserved: dict[tuple[str, str], int] = {}
        self._admitted: dict[tuple[str, str], int] = {}
        self._finished: dict[tuple[str, str], int] = {}
        self._evicted: dict[tuple[str, str, str, str], int] = {}
        self._preempted: dict[tuple[str, str], int] = {}
        self._admission_wait: dict[tuple[str, str], _Histogram] = {}
        self._quota_reserved_wait: dict[tuple[str, str], _Histogram] = {}

    def quota_reserved(
        self, cluster_queue: str, wait_seconds: float, priority_class: str = ""
    ) -> None:
        """QuotaReserved: ``wait_seconds`` since creation or the last requeue."""
        key = (cluster_queue, priority_class)
        with self._lock:
            self._quota_reserved[key] = self._quota_reserved.get(key, 0) + 1
            self._quota_reserved_wait.setdefault(key, _Histogram()).observe(wait_seconds)

    def admitted(self, cluster_queue: str, wait_seconds: float, priority_class: str = "") -> None:
        key = (cluster_queue, priority_class)
        with self._lock:
            self._admitted[key] = self._admitted.get(key, 0) + 1
            self._admission_wait.setdefault(key, _Histogram()).observe(wait_seconds)

    def finished(self, cluster_queue: str, priority_class: str = "") -> None:
        key = (cluster_queue, priority_class)
        with self._lock:
            self._finished[key] = self._finished.get(key, 0) + 1

    def evicted(
        self,
        cluster_queue: str,
        reason: str,
        priority_class: str = "",
        underlying_cause: str = "",
    ) -> None:
        """Kueue's reasons (Preempted, ClusterQueueStopped, ...); gpuaas adds IdleGPU."""
        key = (cluster_queue, reason, underlying_cause, priority_class)
        with self._lock:
            self._evicted[key] = self._evicted.get(key, 0) + 1

    def preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """Reasons: InClusterQueue, InCohortReclamation, InCohortFairSharing, ..."""
        key = (preempting_cluster_queue, reason)
        with self._lock:
            self._preempted[key] = self._preempted.get(key, 0) + 1

    def values(self) -> CounterValues:
        with self._lock:
            return CounterValues(
                quota_reserved=dict(self._quota_reserved),
                admitted=dict(self._admitted),
                finished=dict(self._finished),
                evicted=dict(self._evicted),
                preempted=dict(self._preempted),
                admission_wait={k: h.value() for k, h in self._admission_wait.items()},
                quota_reserved_wait={k: h.value() for k, h in self._quota_reserved_wait.items()},
            )


@dataclass(slots=True, frozen=True)
class MetricsSnapshot:
    """Everything one scrape shows. Every list may be empty; nothing here is required."""

    cluster_queues: tuple[ClusterQueueStatus, ...] = ()
    quotas: tuple[QuotaRow, ...] = ()
    local_queues: tuple[LocalQueueStatus, ...] = ()
    local_queue_usage: tuple[LocalQueueUsageRow, ...] = ()
    counters: CounterValues = CounterValues()
    gpus: tuple[AttributedSample, ...] = ()
    hoarding: tuple[HoardingRow, ...] = ()
