"""Acting on an idle GPU holder, and remembering whom it acted on.

The hoarding detector (``telemetry.hoarding``) says a holder is idle and its rule says act; this
module carries that out for the telemetry bridge: the owner kind's ``Stop`` where one is
registered (``engine.idle_actions``), else Kueue's eviction with a growing requeue back-off and,
past the rule's ``backoffLimitCount``, deactivation (``Cluster.evict_with_backoff``, the pure rule
in ``core.backoff``). It remembers each holder it acted on (count, state, when it may return) so
``gpuaas get hoarding`` can list it after its flag is gone (``hoarding_rows``). It runs inside the
bridge's hooks, under the engine lock and the bridge's lock; it decides nothing about idleness and
does not schedule anything itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuaas.core.backoff import backoff_step
from gpuaas.core.state import Phase
from gpuaas.engine.idle_actions import IdleAction, IdleActions
from gpuaas.engine.views import WorkloadView
from gpuaas.telemetry import HoardingAction, HoardingDecision, HoardingRow, HoardingRule

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

IDLE_GPU = "IdleGPU"  # the eviction reason (Kueue's Evicted reason, a gpuaas one)


@dataclass(slots=True)
class IdleHistory:
    """What was done to one idle holder, for ``gpuaas get hoarding`` after its flag is gone."""

    namespace: str
    workload: str
    cluster_queue: str
    gpus: int
    evictions: int  # idle evictions (or stops) so far, the last one included
    last_at: float
    state: str  # BackingOff, Deactivated, Stopped; Readmitted once it holds quota again
    action: HoardingAction
    wasted_gpu_hours: float
    requeue_at: float | None = None


class IdleResponder:
    """Carries out ``Evict`` hoarding decisions by owner kind; keeps the history per workload."""

    def __init__(self, actions: IdleActions) -> None:
        self.actions = actions
        self.history: dict[str, IdleHistory] = {}

    def act(
        self,
        engine: Engine,
        w: WorkloadView,
        d: HoardingDecision,
        rule: HoardingRule | None,
        now: float,
    ) -> bool:
        """Act on idle ``w``; True when it was evicted, deactivated or stopped."""
        past = self.history.get(w.key)
        # After a restart the count is the workload's requeueState (deactivation clears it).
        done = past.evictions if past is not None else w.requeue_state_count
        action, stop = self.actions.resolve(w.workload.kind)
        if action is IdleAction.STOP and stop is not None and stop(engine, w, d.message, now):
            self._remember(d, done + 1, now, "Stopped", None)
            return True
        if rule is None:
            return False
        limit, base = rule.backoff_limit_count, rule.backoff_base_seconds
        most = rule.backoff_max_seconds
        # The pure rule the core applies, read first to word the message.
        step = backoff_step(w.requeue_state_count, limit, now, base, most)
        if step.deactivate:
            message = (
                f"exceeding the maximum number of idle-GPU evictions (backoffLimitCount {limit}): "
                f"idle eviction {done + 1}; {d.message}"
            )
        else:
            wait = (step.requeue_at or now) - now
            message = f"{d.message}; idle eviction {done + 1}, requeued after {wait:.0f}s back-off"
        # The core's Evict decision says it (reason IdleGPU, or Deactivated); the bridge's
        # counters count it from there.
        taken = engine.evict_with_backoff(
            w.key, IDLE_GPU, message, now, limit=limit, base_seconds=base, max_seconds=most
        )
        if taken is None:
            return False
        state = "Deactivated" if taken.deactivate else "BackingOff"
        self._remember(d, done + 1, now, state, taken.requeue_at)
        return True

    def readmitted(self, key: str) -> None:
        """It holds quota again: judged afresh; its count stays, shown if it is flagged again."""
        past = self.history.get(key)
        if past is not None:
            past.state = "Readmitted"

    def forget(self, key: str) -> None:
        self.history.pop(key, None)

    def _remember(
        self, d: HoardingDecision, evictions: int, now: float, state: str, requeue_at: float | None
    ) -> None:
        self.history[d.workload_key] = IdleHistory(
            namespace=d.namespace,
            workload=d.workload,
            cluster_queue=d.cluster_queue,
            gpus=d.gpus,
            evictions=evictions,
            last_at=now,
            state=state,
            action=d.action,
            wasted_gpu_hours=d.wasted_gpu_hours,
            requeue_at=requeue_at,
        )


def hoarding_rows(
    flagged: Sequence[HoardingRow],
    history: Mapping[str, IdleHistory],
    views: Mapping[str, WorkloadView],
    now: float,
) -> list[HoardingRow]:
    """The rows of ``gpuaas get hoarding``: the flagged holders (with their idle-eviction count),
    then those acted on that hold no GPU now (backing off, deactivated, stopped)."""
    rows: list[HoardingRow] = []
    listed = set()
    for r in flagged:
        key = f"{r.namespace}/{r.workload}"
        past = history.get(key)
        rows.append(replace(r, idle_evictions=past.evictions) if past is not None else r)
        listed.add(key)
    for key, h in sorted(history.items()):
        state = acted_state(h, views.get(key), now)
        if key in listed or state is None:
            continue
        rows.append(
            HoardingRow(
                namespace=h.namespace,
                workload=h.workload,
                cluster_queue=h.cluster_queue,
                gpus=h.gpus,
                idle_since=h.last_at,
                idle_seconds=0.0,
                wasted_gpu_hours=h.wasted_gpu_hours,
                action=h.action,
                state=state,
                idle_evictions=h.evictions,
                requeue_at=h.requeue_at if state == "BackingOff" else None,
            )
        )
    return rows


def acted_state(h: IdleHistory, w: WorkloadView | None, now: float) -> str | None:
    """What ``gpuaas get hoarding`` says of a holder acted on; None once it runs again (it is
    listed again when flagged again) or is gone."""
    if w is None:
        return None
    if h.state == "Stopped":
        return "Stopped" if not w.holds_quota else None
    if w.phase == Phase.INACTIVE:
        return "Deactivated"
    if w.phase == Phase.PENDING and w.requeue_at is not None and w.requeue_at > now:
        return "BackingOff"
    if w.phase == Phase.EVICTING:
        return "Evicting"
    return None


__all__ = ["IDLE_GPU", "IdleHistory", "IdleResponder", "acted_state", "hoarding_rows"]
