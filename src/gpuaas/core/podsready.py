"""Kueue's ``waitForPodsReady``: the PodsReady condition, its timeout, requeue with back-off.

With ``waitForPodsReady`` enabled, an admitted workload whose pods are not all running within
``timeout`` of its admission (or within ``recoveryTimeout`` of a pod failing after they all ran)
is evicted with reason ``PodsReadyTimeout`` and requeued after a back-off of ``base * 2^(n-1)``
seconds (capped), ``n`` being its ``requeueState.count``; once ``count + 1`` would exceed
``backoffLimitCount`` it is deactivated instead (``DeactivatedDueToRequeuingLimitExceeded``), as
Kueue's workload controller does (``reconcileNotReadyTimeout``, ``triggerDeactivation``,
``UpdateRequeueState``). The condition follows Kueue's job reconciler
(``generatePodsReadyCondition``): WaitForStart, Started, WaitForRecovery, Recovered. With
``blockAdmission`` no other workload is admitted while one holding quota is not PodsReady
(``waitForPodsReadyIfNeeded``). Whether pods are ready is reported from outside
(``set_pods_ready``, the runtime bridge); time is always passed in. It never touches quota
directly: evictions go through the ``Lifecycle``.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuaas.core.backoff import backoff_step
from gpuaas.core.config import EVICTION_TIMESTAMP, WaitForPodsReady
from gpuaas.core.decisions import Admit, Decision, Evict, Requeue
from gpuaas.core.state import Phase, WorkloadState

if TYPE_CHECKING:
    from gpuaas.core.cluster import Cluster

PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
DEACTIVATED_BY_REQUEUING_LIMIT = "DeactivatedDueToRequeuingLimitExceeded"
BACKOFF_FINISHED = "BackoffFinished"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"  # QuotaReserved=False while admission is blocked
BLOCKED_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"

NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"
LIMIT_MESSAGE = (
    "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
)


def next_condition(
    current: tuple[str, str] | None, admitted: bool, ready: bool
) -> tuple[str, str, str]:
    """Kueue's ``generatePodsReadyCondition``: (status, reason, message) from the current
    (status, reason), whether the workload is admitted and whether its pods are ready."""
    if not admitted:
        return "False", WAIT_FOR_START, NOT_READY_MESSAGE
    if ready:
        recovering = current is not None and current[1] in (WAIT_FOR_RECOVERY, RECOVERED)
        return "True", RECOVERED if recovering else STARTED, READY_MESSAGE
    if current is None:
        return "False", WAIT_FOR_START, NOT_READY_MESSAGE
    if current[0] == "True" or current[1] == WAIT_FOR_RECOVERY:
        return "False", WAIT_FOR_RECOVERY, RECOVERY_MESSAGE
    return "False", WAIT_FOR_START, NOT_READY_MESSAGE


def timeout_left(wl: WorkloadState, cfg: WaitForPodsReady, now: float) -> tuple[str, float] | None:
    """Kueue's ``admittedNotReadyWorkload``: the cause (WaitForStart or WaitForRecovery) and the
    seconds left before the timeout, or None when no timeout runs for ``wl``."""
    admitted = wl.conditions.get("Admitted")
    if wl.phase != Phase.ADMITTED or admitted is None or admitted.status != "True":
        return None
    cond = wl.conditions.get(PODS_READY)
    if cond is not None and cond.status == "True":
        return None
    if cond is None or cond.reason in (WAIT_FOR_START, PODS_READY):
        return WAIT_FOR_START, max(cfg.timeout_seconds - (now - admitted.last_transition_time), 0.0)
    if cond.reason == WAIT_FOR_RECOVERY and cfg.recovery_timeout_seconds is not None:
        elapsed = now - cond.last_transition_time
        return WAIT_FOR_RECOVERY, max(cfg.recovery_timeout_seconds - elapsed, 0.0)
    return None


class PodsReadyGate:
    """The waitForPodsReady part of one ``Cluster``; inert when the configuration disables it."""

    def __init__(self, cluster: Cluster, cfg: WaitForPodsReady | None) -> None:
        self.c = cluster
        self.cfg = cfg
        self._deadlines: list[tuple[float, int, str]] = []  # (when to look again, uid, key)

    @property
    def enabled(self) -> bool:
        return self.cfg is not None

    @property
    def block_admission(self) -> bool:
        return self.cfg is not None and self.cfg.block_admission

    # --- what happens to the workload --------------------------------------------------------
    def follow(self, wl: WorkloadState, d: Decision) -> None:
        """After a decision about ``wl``: keep its PodsReady condition and its timeout."""
        if self.cfg is None:
            return
        if isinstance(d, Admit):
            self._set(wl, next_condition(self._current(wl), True, False), d.time)
            self._watch(wl, d.time)
        elif isinstance(d, Evict):
            self._set(wl, next_condition(self._current(wl), False, False), d.time)
        elif (
            isinstance(d, Requeue)
            and d.reason == EVICTED_BY_PODS_READY_TIMEOUT
            and wl.requeue_at is not None
            and wl.requeue_at > d.time
        ):
            # Requeued=False until the back-off ends (Kueue's requeueState.requeueAt)
            msg = f"Exceeded the PodsReady timeout {wl.key}"
            wl.set_condition("Requeued", "False", EVICTED_BY_PODS_READY_TIMEOUT, msg, d.time)

    def restored(self, wl: WorkloadState, now: float) -> None:
        """An admission restored after a restart: its timeout runs from its admission again."""
        if self.cfg is not None:
            self._watch(wl, now)

    def backoff_finished(self, wl: WorkloadState, now: float) -> None:
        """The requeue back-off ran out: Requeued=True, reason BackoffFinished."""
        cond = wl.conditions.get("Requeued")
        if (
            cond is not None
            and cond.status == "False"
            and cond.reason == EVICTED_BY_PODS_READY_TIMEOUT
        ):
            msg = "The workload backoff was finished"
            wl.set_condition("Requeued", "True", BACKOFF_FINISHED, msg, now)
            self.c.dirty.add(wl.key)

    def set_pods_ready(self, key: str, ready: bool, now: float) -> bool:
        """The runtime says whether every pod of ``key`` runs; True if the condition changed."""
        wl = self.c.workloads.get(key)
        if self.cfg is None or wl is None or wl.phase != Phase.ADMITTED:
            return False
        admitted = wl.conditions.get("Admitted")
        is_admitted = admitted is not None and admitted.status == "True"
        changed = self._set(wl, next_condition(self._current(wl), is_admitted, ready), now)
        if changed:
            self.c.version += 1  # an admission blocked on readiness may go on now
            self._watch(wl, now)
        return changed

    # --- time ----------------------------------------------------------------------------------
    def expire(self, now: float) -> None:
        """Evict (or deactivate) every admitted workload whose PodsReady timeout ran out."""
        cfg = self.cfg
        if cfg is None:
            return
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, key = heapq.heappop(self._deadlines)
            wl = self.c.workloads.get(key)
            if wl is None:
                continue
            left = timeout_left(wl, cfg, now)
            if left is None:
                continue
            if now + left[1] > now:  # not "left > 0": a float remainder that adds nothing to
                # now (a timeout of 3010ms is 3.0100000000000002 s) would be pushed at now again
                heapq.heappush(self._deadlines, (now + left[1], wl.uid, key))
                continue
            self._time_out(wl, cfg, now)

    def next_at(self) -> float | None:
        return self._deadlines[0][0] if self._deadlines else None

    def blocks_admission(self) -> bool:
        """blockAdmission: some workload holding quota is not PodsReady (Kueue's
        ``WorkloadsNotReady`` of every ClusterQueue in the cache)."""
        if self.cfg is None or not self.cfg.block_admission:
            return False
        for cq in self.c.cqs.values():
            for wl in cq.admitted.values():
                cond = wl.conditions.get(PODS_READY)
                if cond is None or cond.status != "True":
                    return True
        return False

    # --- internals -----------------------------------------------------------------------------
    def _time_out(self, wl: WorkloadState, cfg: WaitForPodsReady, now: float) -> None:
        strategy = cfg.requeuing_strategy
        step = backoff_step(
            wl.requeue_state_count,
            strategy.backoff_limit_count,
            now,
            strategy.backoff_base_seconds,
            strategy.backoff_max_seconds,
        )
        if step.deactivate:
            wl.deactivated_by_check = True  # Kueue sets spec.active=false (DeactivationTarget)
            wl.workload = replace(wl.workload, active=False)
            wl.requeue_state_count, wl.requeue_at = 0, None  # Kueue clears requeueState
            self.c.life.evict(wl, DEACTIVATED_BY_REQUEUING_LIMIT, LIMIT_MESSAGE, now)
            return
        wl.requeue_state_count, wl.requeue_at = step.count, step.requeue_at
        if strategy.timestamp == EVICTION_TIMESTAMP:
            wl.queued_at = now  # ordered by the Evicted condition's time
        self.c.life.evict(
            wl, EVICTED_BY_PODS_READY_TIMEOUT, f"Exceeded the PodsReady timeout {wl.key}", now
        )

    def _watch(self, wl: WorkloadState, now: float) -> None:
        assert self.cfg is not None
        left = timeout_left(wl, self.cfg, now)
        if left is not None:
            heapq.heappush(self._deadlines, (now + left[1], wl.uid, wl.key))

    @staticmethod
    def _current(wl: WorkloadState) -> tuple[str, str] | None:
        cond = wl.conditions.get(PODS_READY)
        return None if cond is None else (cond.status, cond.reason)

    def _set(self, wl: WorkloadState, cond: tuple[str, str, str], now: float) -> bool:
        changed = wl.set_condition(PODS_READY, *cond, now)
        if changed:
            self.c.dirty.add(wl.key)
        return changed


__all__ = [
    "BLOCKED_MESSAGE",
    "DEACTIVATED_BY_REQUEUING_LIMIT",
    "EVICTED_BY_PODS_READY_TIMEOUT",
    "PODS_READY",
    "WAITING_FOR_PODS_READY",
    "PodsReadyGate",
    "next_condition",
    "timeout_left",
]
