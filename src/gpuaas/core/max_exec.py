"""Kueue's maximum execution time: ``spec.maximumExecutionTimeSeconds`` on a Workload, the
``kueue.x-k8s.io/max-exec-time-seconds`` label on a Job, RayCluster or RayJob.

A workload that has been Admitted for that long in all is deactivated ("exceeding the maximum
execution time": evicted with reason Deactivated, ``spec.active`` false), as Kueue's workload
controller does (``reconcileMaxExecutionTime``). Earlier admissions count: each time Admitted
turns False the seconds it was True (truncated, as Kueue's int32) are added to
``status.accumulatedPastExecutionTimeSeconds`` (Kueue's ``SyncAdmittedCondition``), which is
cleared when the limit deactivates the workload, as Kueue clears it. Slurm users know this as a
job's time limit (``--time``). Time is passed in: the deadlines are a heap that ``Cluster.schedule``
reads, and ``next_wakeup`` tells the caller when the next one falls.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from gpuaas.core.decisions import Admit, Decision, Evict
from gpuaas.core.state import Phase, WorkloadState

if TYPE_CHECKING:
    from gpuaas.core.cluster import Cluster

EXCEEDED = "exceeding the maximum execution time"  # Kueue's deactivation message's cause


def _admitted_since(wl: WorkloadState) -> float | None:
    cond = wl.conditions.get("Admitted")
    return cond.last_transition_time if cond is not None and cond.status == "True" else None


class MaxExecution:
    """The deadlines of the Admitted workloads that have a maximum execution time."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self._due: list[tuple[float, int, str]] = []  # (deadline, uid, key); stale ones skipped

    def before(self, wl: WorkloadState, d: Decision) -> None:
        """``d`` is about to be recorded for ``wl``, which has a limit: an admission starts its
        clock, an eviction of an Admitted workload adds the time it ran."""
        limit = wl.workload.max_exec_seconds
        assert limit is not None
        if type(d) is Admit:
            heapq.heappush(self._due, (d.time + limit - wl.past_exec_seconds, wl.uid, wl.key))
        elif type(d) is Evict:
            since = _admitted_since(wl)
            if since is not None:
                wl.past_exec_seconds += int(d.time - since)

    def watch(self, wl: WorkloadState) -> None:
        """Its deadline again (a restart gave it back its Admitted time and its past time)."""
        limit, since = wl.workload.max_exec_seconds, _admitted_since(wl)
        if limit is not None and since is not None and wl.phase == Phase.ADMITTED:
            heapq.heappush(self._due, (since + limit - wl.past_exec_seconds, wl.uid, wl.key))

    def next_at(self) -> float | None:
        return self._due[0][0] if self._due else None

    def expire(self, now: float) -> None:
        """Deactivate every Admitted workload whose time is up at ``now``."""
        due = self._due
        while due and due[0][0] <= now:
            _, uid, key = heapq.heappop(due)
            wl = self.c.workloads.get(key)
            if wl is None or wl.uid != uid or wl.phase != Phase.ADMITTED:
                continue  # gone, another of that name, or no longer holding quota
            limit, since = wl.workload.max_exec_seconds, _admitted_since(wl)
            if limit is None or since is None:
                continue  # its limit was removed, or it awaits its checks again
            at = since + limit - wl.past_exec_seconds
            if at > now:  # admitted again since this deadline was set
                heapq.heappush(due, (at, uid, key))
                continue
            wl.past_exec_seconds = 0  # Kueue clears it with the deactivation target
            self.c.dirty.add(key)
            self.c.life.deactivate(wl, EXCEEDED, now)
