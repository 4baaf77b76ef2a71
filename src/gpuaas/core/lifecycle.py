"""Workload lifecycle transitions and how they are recorded: conditions and events as Kueue writes them.

Admission (QuotaReserved, Admitted), preemption (Evicted/Preempted with the preemptor and the
paths), requeue after the pods are gone, finish, deactivation and deletion. Every transition that
frees quota bumps the ClusterQueue's allocatable generation and requeues the cohort tree's
inadmissible workloads, as Kueue's cache and queue manager do. ``Cluster`` owns one and delegates to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.core.errors import ApplyError
from gpuaas.core.objects import Workload
from gpuaas.core.preemption import HUMAN_REASONS
from gpuaas.core.queues import shape_of
from gpuaas.core.state import Admission, Event, Phase, PodSetAssignment, WorkloadState

if TYPE_CHECKING:
    from gpuaas.core.cache import CQState
    from gpuaas.core.cluster import Cluster
    from gpuaas.core.scheduler import Entry


def _cq_path(cq: CQState) -> str:
    parts = [cq.name] + [n.name for n in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


class Lifecycle:
    """Transitions of workloads in one ``Cluster``; the cluster owns the state they change."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster

    def _event(
        self,
        now: float,
        type_: str,
        reason: str,
        wl: WorkloadState,
        message: str,
        related: str | None = None,
    ) -> None:
        if not self.c.record_events:
            return
        self.c.events.append(
            Event(now, type_, reason, "Workload " + wl.key, message, wl.key, related)
        )

    # --- arrival and updates ---------------------------------------------------------------
    def _resolve_priority(self, w: Workload) -> int:
        if w.priority is not None:
            return w.priority
        if w.priority_class:
            pc = self.c.priority_classes.get(w.priority_class)
            if pc is not None:
                return pc.value
            self.c._warnings.append(
                f"Workload {w.key}: WorkloadPriorityClass {w.priority_class} doesn't exist; priority 0 used"
            )
        return 0

    def apply_workload(self, w: Workload, now: float) -> None:
        self.c._refresh_structure()
        old = self.c.workloads.get(w.key)
        if old is None:
            self.c._seq += 1
            prio = self._resolve_priority(w)
            wl = WorkloadState(
                w, uid=self.c._seq, created_at=now, priority=prio, shape=shape_of(w, prio)
            )
            self.c.workloads[w.key] = wl
            self.c.dirty.add(w.key)
            self.c.version += 1
            if not w.active:
                wl.phase = Phase.INACTIVE
                return
            self.c._push(wl)
            return
        self.c.version += 1
        self.c.dirty.add(w.key)
        if old.phase in (Phase.ADMITTED, Phase.EVICTING):
            if old.workload.pod_sets != w.pod_sets:
                raise ApplyError(
                    f"{w.kind} {w.key}",
                    "spec.podSets",
                    "field is immutable while quota is reserved",
                )
            if old.workload.queue_name != w.queue_name:
                raise ApplyError(
                    f"{w.kind} {w.key}",
                    "spec.queueName",
                    "field is immutable while quota is reserved",
                )
            old.workload = w
            if not w.active and old.phase == Phase.ADMITTED:
                self.evict(old, "Deactivated", "The workload is deactivated", now)
            return
        if old.phase == Phase.FINISHED:
            old.workload = w
            return
        old.workload = w
        old.priority = self._resolve_priority(w)
        old.shape = shape_of(w, old.priority)
        old.last_tried = None
        if not w.active:
            self._unqueue(old)
            old.phase = Phase.INACTIVE
            return
        old.phase = Phase.PENDING
        self._unqueue(old)
        self.c._push(old)

    def _unqueue(self, wl: WorkloadState) -> None:
        if wl.cluster_queue is not None and wl.cluster_queue in self.c.cqs:
            cq = self.c.cqs[wl.cluster_queue]
            cq.queue.remove(wl.key)
            if cq.sticky == wl.key:
                cq.sticky = None

    def delete_workload(self, key: str, now: float) -> bool:
        wl = self.c.workloads.pop(key, None)
        if wl is None:
            return False
        self._take_out(wl, now)
        return True

    def _take_out(self, wl: WorkloadState, now: float) -> None:
        """Out of the scheduler's hands: its quota released if it held any, else off its queue."""
        self.c.dirty.add(wl.key)
        self.c._evicting.pop(wl.key, None)
        if wl.phase in (Phase.ADMITTED, Phase.EVICTING):
            self._release(wl, now)
        else:
            self._unqueue(wl)

    # --- admission ---------------------------------------------------------------------------
    def admit(self, e: Entry, now: float) -> None:
        assert e.assignment is not None
        pod_sets = [
            PodSetAssignment(
                ps.name,
                {r: fc.flavor for r, fc in ps.flavors.items()},
                ps.count,
                {r: ps.requests[r] for r in ps.flavors},
            )
            for ps in e.assignment.pod_sets
        ]
        # The entry's usage was already checked to fit; it is now permanent in the tree.
        self.mark_admitted(
            e.state,
            e.cq,
            Admission(e.cq.name, pod_sets),
            now,
            restored=False,
            usage=dict(e.assignment.usage),
        )
        if e.cq.sticky == e.state.key:
            e.cq.sticky = None

    def mark_admitted(
        self,
        wl: WorkloadState,
        cq: CQState,
        admission: Admission,
        now: float,
        *,
        restored: bool,
        usage: dict[tuple[str, str], int] | None = None,
    ) -> None:
        """Record an admission; ``usage`` is the assignment's (derived from ``admission`` if
        not given: both say what the workload holds per flavor and resource)."""
        c, key = self.c, wl.key
        c.dirty.add(key)
        wl.admission = admission
        wl.usage = usage if usage is not None else admission.usage()
        wl.cluster_queue = cq.name
        wl.phase = Phase.ADMITTED
        wl.admitted_at = now
        wl.admission_count += 1
        c.admitted_now[key] = c.admitted_now.get(key, 0) + 1
        wl.pending_reason = ""
        wl.last_tried = None
        cq.node.add_usages(wl.usage)
        cq.admitted[key] = wl
        if cq.spec.min_runtime_seconds > 0:
            c.add_wakeup(now + cq.spec.min_runtime_seconds, cq.name)
        c.version += 1
        pairs = [f"{r}={f}" for ps in admission.pod_sets for r, f in ps.flavors.items()]
        flavors = pairs[0] if len(pairs) == 1 else ", ".join(sorted(set(pairs)))
        msg = f"Quota reserved in ClusterQueue {cq.name}"
        wl.set_condition("QuotaReserved", "True", "QuotaReserved", msg, now)
        wl.set_condition("Admitted", "True", "Admitted", "The workload is admitted", now)
        if "Evicted" in wl.conditions:
            wl.set_condition(
                "Evicted",
                "False",
                "QuotaReserved",
                "Previously: " + wl.conditions["Evicted"].message,
                now,
            )
        if restored or not c.record_events:
            return
        wait = now - wl.created_at
        self._event(
            now,
            "Normal",
            "QuotaReserved",
            wl,
            f"{msg}, wait time since queued was {wait:.0f}s; flavors: {flavors or 'none'}",
        )
        self._event(now, "Normal", "Admitted", wl, f"Admitted by ClusterQueue {cq.name}")

    def record_pending(self, e: Entry) -> None:
        wl = e.state
        msg = e.message or "waiting for quota"
        wl.pending_reason = msg
        changed = wl.set_condition("QuotaReserved", "False", e.reason, msg, self.c.now)
        if changed:
            self.c.dirty.add(wl.key)
            self._event(self.c.now, "Warning", e.reason, wl, msg)

    # --- preemption and eviction --------------------------------------------------------------
    def issue_preemptions(self, e: Entry, now: float) -> None:
        pre = e.state
        for t in sorted(e.targets, key=lambda t: t.workload.uid):
            victim = t.workload
            if victim.phase == Phase.EVICTING:
                continue
            self.c.dirty.update((victim.key, pre.key))
            human = HUMAN_REASONS.get(t.reason, "UNKNOWN")
            msg = (
                f"Preempted to accommodate a workload (UID: {pre.uid}, JobUID: {pre.key}) due to {human}; "
                f"preemptor path: {_cq_path(e.cq)}; preemptee path: {_cq_path(t.cq)}"
            )
            victim.preempted_by = pre.key
            victim.preemption_reason = t.reason
            victim.ever_preempted = True
            self.c.preempted_keys.add(victim.key)
            victim.set_condition("Preempted", "True", t.reason, msg, now)
            self._begin_eviction(victim, "Preempted", msg, now)
            self._event(
                now,
                "Normal",
                "Preempted",
                victim,
                f"{msg}; preemptor effective priority: {pre.priority}; preemptee effective priority: {victim.priority}",
                related=pre.key,
            )
            self._event(
                now,
                "Normal",
                "PreemptedWorkload",
                pre,
                f"Preempted workload {victim.key} (UID: {victim.uid}) in ClusterQueue {t.cq.name} ({t.reason})",
                related=victim.key,
            )

    def evict(self, wl: WorkloadState, reason: str, message: str, now: float) -> None:
        """Evict for a reason other than preemption (drain, deactivation, idle GPU)."""
        self._begin_eviction(wl, reason, message, now)
        if self.c.instant_evictions:
            self.complete_evictions(now)

    def _begin_eviction(self, wl: WorkloadState, reason: str, msg: str, now: float) -> None:
        self.c.dirty.add(wl.key)
        wl.phase = Phase.EVICTING
        wl.set_condition("Evicted", "True", reason, msg, now)
        wl.set_condition("Admitted", "False", reason, msg, now)
        self.c._evicting[wl.key] = wl
        self.c.version += 1
        self._event(now, "Normal", f"EvictedDueTo{reason}", wl, msg)

    def complete_evictions(self, now: float) -> None:
        for key in sorted(self.c._evicting, key=lambda k: self.c._evicting[k].uid):
            self.confirm_stopped(key, now)

    def confirm_stopped(self, key: str, now: float) -> None:
        """The evicted workload's pods are gone: release quota and requeue (or park) it."""
        wl = self.c._evicting.pop(key, None)
        if wl is None or wl.phase != Phase.EVICTING:
            return
        reason = wl.conditions["Evicted"].reason if "Evicted" in wl.conditions else "Evicted"
        self.c.dirty.add(key)
        self._release(wl, now)
        wl.admission = None
        wl.requeue_count += 1
        wl.set_condition(
            "QuotaReserved", "False", "Pending", f"The workload was evicted: {reason}", now
        )
        if not wl.workload.active:
            wl.phase = Phase.INACTIVE
            return
        wl.phase = Phase.PENDING
        wl.set_condition(
            "Requeued", "True", reason, "The workload was requeued after eviction", now
        )
        self._event(now, "Normal", "Requeued", wl, f"Requeued after eviction ({reason})")
        self.c._push(wl)

    def _release(self, wl: WorkloadState, now: float) -> None:
        cq = self.c.cqs.get(wl.cluster_queue or "")
        if cq is not None and cq.admitted.pop(wl.key, None) is not None:
            cq.node.remove_usages(wl.usage)
            cq.generation += 1
            self.c.requeue_tree(cq)
            if cq.terminating and not cq.admitted:
                self.c._drop_cq(cq)
                self.c._refresh_structure()
        wl.usage = {}
        self.c.version += 1

    def finish(self, key: str, now: float, succeeded: bool = True) -> bool:
        wl = self.c.workloads.get(key)
        if wl is None or wl.phase == Phase.FINISHED:
            return False
        self._take_out(wl, now)
        wl.phase = Phase.FINISHED
        reason, msg = (
            ("Succeeded", "Job finished successfully") if succeeded else ("Failed", "Job failed")
        )
        wl.set_condition("Finished", "True", reason, msg, now)
        self._event(now, "Normal", "Finished", wl, msg)
        self.c.version += 1
        return True
