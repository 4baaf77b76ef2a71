"""Requeue with back-off: pending workloads kept out of their queue until a given instant.

The one back-off mechanism of the core. An admission check's Retry uses it (Kueue's
``requeueState.requeueAt``, from the check's ``requeueAfterSeconds``); anything else that evicts
and wants the workload back later (a runtime's restarts, idle-GPU eviction) can use it too. It
only remembers who waits until when; the ``Cluster`` puts them back in their queues.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping

from gpuaas.core.state import Phase, WorkloadState


class Backoff:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []  # (until, uid, key)

    def park(self, wl: WorkloadState, until: float) -> None:
        """Keep ``wl`` (pending, not in its queue) out until ``until``."""
        wl.requeue_at = until
        wl.pending_reason = f"waiting for its back-off to end at t={until:g}"
        heapq.heappush(self._heap, (until, wl.uid, wl.key))

    def due(self, now: float, workloads: Mapping[str, WorkloadState]) -> Iterator[WorkloadState]:
        """The workloads whose back-off ended by ``now``, still pending and still parked."""
        while self._heap and self._heap[0][0] <= now:
            until, _, key = heapq.heappop(self._heap)
            wl = workloads.get(key)
            if wl is None or wl.phase != Phase.PENDING or wl.requeue_at != until:
                continue  # deleted, deactivated or parked again since
            wl.requeue_at = None
            yield wl

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None


__all__ = ["Backoff"]
