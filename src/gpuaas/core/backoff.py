"""Requeue with back-off: pending workloads kept out of their queue until a given instant.

The one back-off mechanism of the core. An admission check's Retry uses it (Kueue's
``requeueState.requeueAt``, from the check's ``requeueAfterSeconds``); anything else that evicts
and wants the workload back later (a runtime's restarts, idle-GPU eviction) can use it too. It
only remembers who waits until when; the ``Cluster`` puts them back in their queues.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gpuaas.core.state import Phase, WorkloadState

# Kueue's waitForPodsReady.requeuingStrategy defaults (``backoffBaseSeconds``,
# ``backoffMaxSeconds``); the idle-GPU eviction uses the same curve.
DEFAULT_BACKOFF_BASE_SECONDS = 60.0
DEFAULT_BACKOFF_MAX_SECONDS = 3600.0


def requeue_backoff_seconds(count: int, base: float, maximum: float) -> float:
    """Kueue's requeue delay after the ``count``-th backoff eviction: ``base * 2^(count-1)``,
    capped at ``maximum`` (``workload.UpdateRequeueState``; Kueue's 0.0001 jitter is left out so
    that a replay is exact)."""
    if count < 1:
        return 0.0
    # 2**count overflows float past ~1024: the cap is reached long before.
    return min(maximum, base * 2.0 ** min(count - 1, 64))


@dataclass(frozen=True, slots=True)
class BackoffStep:
    """What one more backoff eviction does: requeue at ``requeue_at``, or deactivate.

    ``count`` is Kueue's ``requeueState.count`` after this eviction (the number of backoff
    evictions so far, this one included); a deactivation clears it, as Kueue clears
    ``requeueState`` when it deactivates a workload.
    """

    count: int
    requeue_at: float | None
    deactivate: bool


def backoff_step(
    count: int, limit: int | None, now: float, base: float, maximum: float
) -> BackoffStep:
    """Kueue's ``triggerDeactivation`` then ``UpdateRequeueState``, for a workload evicted with
    ``count`` backoff evictions behind it: past ``limit`` (``backoffLimitCount``; ``None`` means
    requeue forever) it is deactivated, otherwise requeued after the growing delay."""
    if limit is not None and count + 1 > limit:
        return BackoffStep(count + 1, None, True)
    step = count + 1
    return BackoffStep(step, now + requeue_backoff_seconds(step, base, maximum), False)


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


__all__ = [
    "DEFAULT_BACKOFF_BASE_SECONDS",
    "DEFAULT_BACKOFF_MAX_SECONDS",
    "Backoff",
    "BackoffStep",
    "backoff_step",
    "requeue_backoff_seconds",
]
