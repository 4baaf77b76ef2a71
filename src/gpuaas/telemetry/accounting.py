"""Usage accounting: who held how much quota, for how long, and what that costs.

This module owns the usage interval (one stretch between QuotaReserved and the release of that
quota, by eviction or finish), the ledger that opens and closes intervals as the engine reports
them, and the pure report that turns intervals into GPU-hours, CPU-core-hours and memory-GB-hours
per namespace, LocalQueue, ClusterQueue or flavor, priced per flavor-hour. It reads no clock:
the caller passes ``now``; durability is the ``UsageStore`` port's job (``telemetry.usage_store``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gpuaas.core.state import WorkloadState
from gpuaas.telemetry.collectors import TelemetryInputError
from gpuaas.telemetry.config import FlavorPrice

if TYPE_CHECKING:
    from gpuaas.telemetry.usage_store import UsageStore

GIB = 2**30
HOUR = 3600.0


def is_gpu(resource: str) -> bool:
    """``nvidia.com/gpu``, ``amd.com/gpu``, ``gpu``: any extended resource named gpu."""
    return resource == "gpu" or resource.endswith("/gpu")


@dataclass(slots=True, frozen=True)
class UsageInterval:
    """Quota held by one workload from ``start`` to ``end`` (``None``: still held)."""

    workload_key: str
    namespace: str
    local_queue: str
    cluster_queue: str
    start: float
    end: float | None
    usage: tuple[tuple[str, str, int], ...]  # (flavor, resource, quantity in core units)

    def seconds(self, since: float, until: float) -> float:
        """How long this interval overlaps [since, until]."""
        end = until if self.end is None else min(self.end, until)
        return max(0.0, end - max(self.start, since))


def _usage_tuple(usage: Mapping[tuple[str, str], int]) -> tuple[tuple[str, str, int], ...]:
    return tuple(sorted((f, r, int(q)) for (f, r), q in usage.items() if q))


class UsageLedger:
    """Opens an interval at QuotaReserved and closes it when the quota is released.

    With a store, every change is written through and open intervals are reloaded at start, so
    a restart neither loses nor double-counts the time a workload kept running.
    """

    def __init__(self, store: UsageStore | None = None) -> None:
        self.store = store
        self._closed: list[UsageInterval] = []
        self._open: dict[str, UsageInterval] = {}
        if store is not None:
            for interval in store.open_intervals():
                self._open[interval.workload_key] = interval

    def reserve(
        self,
        workload_key: str,
        *,
        namespace: str,
        local_queue: str,
        cluster_queue: str,
        usage: Mapping[tuple[str, str], int],
        now: float,
    ) -> UsageInterval:
        """Start charging. Idempotent for the same start (a restore after restart); a second
        reservation at a later time first closes the one still open."""
        current = self._open.get(workload_key)
        if current is not None:
            if current.start == now:
                return current
            self.release(workload_key, now)
        interval = UsageInterval(
            workload_key, namespace, local_queue, cluster_queue, now, None, _usage_tuple(usage)
        )
        self._open[workload_key] = interval
        if self.store is not None:
            self.store.put(interval)
        return interval

    def reserve_admission(self, state: WorkloadState, now: float) -> UsageInterval:
        """The same, from the engine's record of an admitted workload."""
        if state.admission is None:
            raise TelemetryInputError(f"Workload {state.key}: status.admission: not admitted")
        wl = state.workload
        start = state.admitted_at if state.admitted_at is not None else now
        return self.reserve(
            state.key,
            namespace=wl.namespace,
            local_queue=wl.queue_name,
            cluster_queue=state.admission.cluster_queue,
            usage=state.admission.usage(),
            now=start,
        )

    def release(self, workload_key: str, now: float) -> UsageInterval | None:
        """Stop charging (evicted and stopped, or finished); ``None`` if nothing was open."""
        current = self._open.pop(workload_key, None)
        if current is None:
            return None
        closed = UsageInterval(
            current.workload_key,
            current.namespace,
            current.local_queue,
            current.cluster_queue,
            current.start,
            max(now, current.start),
            current.usage,
        )
        self._closed.append(closed)
        if self.store is not None:
            self.store.put(closed)
        return closed

    def intervals(
        self, since: float | None = None, until: float | None = None
    ) -> list[UsageInterval]:
        """From the store when there is one (it has history from before this process)."""
        if self.store is not None:
            return self.store.intervals(since, until)
        lo, hi = _bounds(since, until)
        every = [*self._closed, *self._open.values()]
        return [i for i in every if i.start < hi and (i.end is None or i.end > lo)]


def _bounds(since: float | None, until: float | None) -> tuple[float, float]:
    return (-math.inf if since is None else since, math.inf if until is None else until)


class GroupBy(StrEnum):
    NAMESPACE = "namespace"
    LOCAL_QUEUE = "localqueue"
    CLUSTER_QUEUE = "clusterqueue"
    FLAVOR = "flavor"


def parse_group_by(value: str) -> GroupBy:
    try:
        return GroupBy(value.lower())
    except ValueError:
        allowed = "|".join(g.value for g in GroupBy)
        raise TelemetryInputError(
            f"report usage: --by: unknown {value!r} (allowed: {allowed})"
        ) from None


@dataclass(slots=True, frozen=True)
class UsageRow:
    group: str
    gpu_hours: float
    cpu_core_hours: float
    memory_gb_hours: float
    cost: float
    # GPU-hours of the group's flagged idle stretches (``telemetry.waste``): part of gpu_hours
    wasted_gpu_hours: float = 0.0

    def to_dict(self, by: GroupBy) -> dict[str, Any]:
        return {
            by.value: self.group,
            "gpuHours": self.gpu_hours,
            "cpuCoreHours": self.cpu_core_hours,
            "memoryGBHours": self.memory_gb_hours,
            "cost": self.cost,
            "wastedGPUHours": self.wasted_gpu_hours,
        }


def _group(interval: UsageInterval, flavor: str, by: GroupBy) -> str:
    if by is GroupBy.NAMESPACE:
        return interval.namespace
    if by is GroupBy.LOCAL_QUEUE:
        return f"{interval.namespace}/{interval.local_queue}"
    if by is GroupBy.CLUSTER_QUEUE:
        return interval.cluster_queue
    return flavor


def usage_report(
    intervals: Iterable[UsageInterval],
    *,
    until: float,
    since: float | None = None,
    by: GroupBy | str = GroupBy.NAMESPACE,
    prices: Mapping[str, FlavorPrice] | None = None,
) -> list[UsageRow]:
    """Totals per group over [since, until]; open intervals are charged up to ``until``.

    Memory is charged per GiB (2^30 bytes), CPU per core (1000 millicores), GPUs per device.
    """
    group_by = by if isinstance(by, GroupBy) else parse_group_by(by)
    if since is not None and since > until:
        raise TelemetryInputError(f"report usage: --since: {since} is after --until {until}")
    lo = -math.inf if since is None else since
    prices = prices or {}
    totals: dict[str, list[float]] = {}
    for interval in intervals:
        hours = interval.seconds(lo, until) / HOUR
        if hours <= 0:
            continue
        for flavor, resource, quantity in interval.usage:
            row = totals.setdefault(_group(interval, flavor, group_by), [0.0, 0.0, 0.0, 0.0])
            price = prices.get(flavor, FlavorPrice())
            if is_gpu(resource):
                amount = quantity * hours
                row[0] += amount
                row[3] += amount * price.gpu_hour
            elif resource == "cpu":
                amount = quantity / 1000.0 * hours
                row[1] += amount
                row[3] += amount * price.cpu_core_hour
            elif resource == "memory":
                amount = quantity / GIB * hours
                row[2] += amount
                row[3] += amount * price.memory_gb_hour
    return [UsageRow(group, *values) for group, values in sorted(totals.items())]
