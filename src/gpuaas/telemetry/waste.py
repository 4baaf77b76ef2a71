"""GPU time wasted by idle holders: the flagged idle stretches, for the usage report.

This module owns the record of every idle stretch that the hoarding detector flagged (who, which
queues and flavor, how many GPUs, from when the GPUs went idle to the last sample that still found
them idle) and the sum of their GPU-hours per report group over ``[since, until]``. A stretch
counts from its ``idle_since``, the window included, as the ``WASTED-GPU-HOURS`` column of
``gpuaas get hoarding`` does; a stretch never flagged (the GPUs came back within the window) is
not waste. It is pure: the caller passes the flagged rows and the time; it reads no clock and
stores nothing durable (the record lives as long as the server).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpuaas.telemetry.accounting import GroupBy, UsageRow

HOUR = 3600.0


@dataclass(slots=True, frozen=True)
class IdleStretch:
    """One flagged idle stretch of one workload; ``end`` moves on while it stays idle."""

    workload_key: str
    namespace: str
    local_queue: str
    cluster_queue: str
    flavor: str
    gpus: int
    start: float
    end: float

    def gpu_seconds(self, lo: float, hi: float) -> float:
        return max(0.0, min(self.end, hi) - max(self.start, lo)) * self.gpus

    def group(self, by: GroupBy) -> str:
        if by is GroupBy.NAMESPACE:
            return self.namespace
        if by is GroupBy.LOCAL_QUEUE:
            return f"{self.namespace}/{self.local_queue}"
        if by is GroupBy.CLUSTER_QUEUE:
            return self.cluster_queue
        return self.flavor


class WasteLog:
    """Open stretches by workload, closed ones in order. Feed it the flagged stretches each
    sample (``observe``); a workload missing from a call has its stretch closed."""

    def __init__(self) -> None:
        self._open: dict[str, IdleStretch] = {}
        self._closed: list[IdleStretch] = []

    def observe(self, flagged: Iterable[IdleStretch]) -> None:
        seen: dict[str, IdleStretch] = {}
        for s in flagged:
            old = self._open.get(s.workload_key)
            if old is not None and old.start != s.start:
                self._closed.append(old)  # a new stretch began without a clear in between
            seen[s.workload_key] = (
                s
                if old is None or old.start != s.start
                else replace(old, end=max(old.end, s.end), gpus=s.gpus)
            )
        for key, old in self._open.items():
            if key not in seen:
                self._closed.append(old)
        self._open = seen

    def stretches(self) -> list[IdleStretch]:
        return [*self._closed, *self._open.values()]


def wasted_gpu_hours(
    stretches: Iterable[IdleStretch],
    *,
    until: float,
    since: float | None = None,
    by: GroupBy = GroupBy.NAMESPACE,
) -> dict[str, float]:
    """GPU-hours of flagged idle stretches per group, clipped to ``[since, until]``."""
    lo = -math.inf if since is None else since
    out: dict[str, float] = {}
    for s in stretches:
        seconds = s.gpu_seconds(lo, until)
        if seconds > 0:
            group = s.group(by)
            out[group] = out.get(group, 0.0) + seconds / HOUR
    return out


def with_waste(rows: Iterable[UsageRow], wasted: dict[str, float]) -> list[UsageRow]:
    """The usage rows with each group's wasted GPU-hours filled in (groups sorted)."""
    out = {r.group: replace(r, wasted_gpu_hours=wasted.get(r.group, 0.0)) for r in rows}
    for group, hours in wasted.items():
        if group not in out:  # its usage lies outside the window or the report's namespaces
            out[group] = UsageRow(group, 0.0, 0.0, 0.0, 0.0, hours)
    return [out[g] for g in sorted(out)]


__all__ = ["IdleStretch", "WasteLog", "wasted_gpu_hours", "with_waste"]
