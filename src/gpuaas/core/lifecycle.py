"""Workload lifecycle transitions: each changes phase and quota, then emits one decision.

Admission (Reserve, Admit), preemption (Evict with the preemptor and the paths), requeue after the
pods are gone (Release, Requeue), finish, deactivation and deletion. Every transition that frees
quota bumps the ClusterQueue's allocatable generation and requeues the cohort tree's inadmissible
workloads, as Kueue's cache and queue manager do. The decision goes to the Cluster's decision list
and to ``core.record``, which derives Kueue's conditions and events from it; nothing here writes a
condition or an event directly. ``Cluster`` owns one and delegates to it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpuaas.core import record
from gpuaas.core.decisions import (
    Admit,
    Deactivate,
    Decision,
    Delete,
    Evict,
    Finish,
    Pend,
    Release,
    Requeue,
    Reserve,
)
from gpuaas.core.errors import ApplyError
from gpuaas.core.interning import admission_key
from gpuaas.core.objects import MAX_EXEC_LABEL, Workload
from gpuaas.core.queues import shape_of
from gpuaas.core.state import Admission, Phase, PodSetAssignment, WorkloadState

if TYPE_CHECKING:
    from gpuaas.core.cache import CQState
    from gpuaas.core.cluster import Cluster
    from gpuaas.core.scheduler import Entry


_DEACTIVATED = "The workload is deactivated"


def _cq_path(cq: CQState) -> str:
    parts = [cq.name] + [n.name for n in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


class Lifecycle:
    """Transitions of workloads in one ``Cluster``; the cluster owns the state they change."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster

    def emit(self, wl: WorkloadState, d: Decision) -> None:
        """Record ``d``: in the decision list, as conditions on ``wl``, and as events."""
        c = self.c
        c.decisions.append(d)
        if wl.workload.max_exec_seconds is not None:
            c.max_exec.before(wl, d)
        write = record.CONDITION_WRITERS.get(type(d))  # record.conditions, one call fewer
        if write is not None:
            write(wl, d)
        if c.pods_ready.enabled:
            c.pods_ready.follow(wl, d)
        if c.record_events:
            c.events.extend(record.events(d, c.workloads))

    # --- arrival and updates ---------------------------------------------------------------
    def _resolve_priority(self, w: Workload) -> int:
        if w.priority is not None:
            return w.priority
        if w.priority_class:
            pc = self.c.priority_classes.get(w.priority_class)
            if pc is not None:
                return pc.value
            self.c.warn(
                f"Workload {w.key}: WorkloadPriorityClass {w.priority_class} doesn't exist; priority 0 used"
            )
        return 0

    def _shape(self, w: Workload, priority: int) -> object:
        shape = shape_of(w, priority)
        return self.c.shapes.shared(shape, shape)

    def apply_workload(self, w: Workload, now: float) -> None:
        self.c.refresh_structure()
        old = self.c.workloads.get(w.key)
        if old is not None and w.kind != "Workload" and not w.active_given and w.active:
            # A job's update: its Workload's spec.active is the Workload's own (set on the
            # Workload, or by Kueue's deactivation), which the job reconciler never touches.
            w = w if old.workload.active else replace(w, active=False)
        if old is None:
            prio = self._resolve_priority(w)
            wl = WorkloadState(
                w,
                uid=self.c.next_uid(),
                created_at=now,
                priority=prio,
                shape=self._shape(w, prio),
            )
            self.c.workloads[w.key] = wl
            self.c.dirty.add(w.key)
            self.c.version += 1
            if not w.active:
                wl.phase = Phase.INACTIVE
                return
            self.c.push(wl)
            return
        self.c.version += 1
        self.c.dirty.add(w.key)
        if old.phase in (Phase.ADMITTED, Phase.EVICTING):
            if old.workload.pod_sets != w.pod_sets and w.kind != "Workload":
                # Kueue's job webhook lets a running Job's parallelism change; its reconciler
                # then finds the Workload no longer matches the job (ensureOneWorkload): the job
                # is stopped, that Workload deleted and a new one created, which waits anew.
                self.delete_workload(w.key, now)
                self.apply_workload(w, now)
                return
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
            if (
                old.workload.max_exec_seconds != w.max_exec_seconds
                and old.conditions.get("Admitted") is not None
                and old.conditions["Admitted"].status == "True"
            ):
                raise ApplyError(  # the CRD's rule (Admitted); a job's webhook: unsuspended
                    f"{w.kind} {w.key}",
                    "spec.maximumExecutionTimeSeconds"
                    if w.kind == "Workload"
                    else f"metadata.labels[{MAX_EXEC_LABEL}]",
                    "is immutable while workload quota reserved",
                )
            if old.workload.priority_source != w.priority_source:
                raise ApplyError(  # the CRD's rules: set, unset, kind or PriorityClass name
                    f"{w.kind} {w.key}",
                    "spec.priorityClassRef",
                    "is immutable while workload quota reserved (a WorkloadPriorityClass's "
                    "name may change)",
                )
            old.workload = w
            self.set_priority(old, self._resolve_priority(w), now)
            if not w.active and old.phase == Phase.ADMITTED:
                self.evict(old, "Deactivated", _DEACTIVATED, now)
            return
        if (
            old.deactivated_by_check
            and old.phase == Phase.INACTIVE
            and w.active
            and w.active_given  # written on the Workload (a job's own, too), never by a job
            and not old.workload.active
        ):
            # The user set spec.active back to true on a Workload Kueue deactivated (a Rejected
            # check, the requeuing limit): Kueue requeues it (Requeued, WorkloadReactivated).
            # A manifest that leaves spec.active out leaves it false, as kubectl apply does.
            old.deactivated_by_check = False
        if old.phase == Phase.FINISHED or old.deactivated_by_check:
            # Finished stays finished; a job's workload that Kueue deactivated (a Rejected check,
            # the requeuing limit) stays inactive whatever its job's updates: the job carries no
            # spec.active to set back (delete and create the job to try again).
            old.workload = replace(w, active=False) if old.deactivated_by_check else w
            return
        old.workload = w
        old.priority = self._resolve_priority(w)
        old.shape = self._shape(w, old.priority)
        old.last_tried = None
        if not w.active:
            self._unqueue(old)
            old.requeue_state_count = 0  # Kueue clears requeueState on deactivation
            old.requeue_at = None
            if old.phase != Phase.INACTIVE:
                old.phase = Phase.INACTIVE
                self.emit(old, Deactivate(w.key, now, "Deactivated", _DEACTIVATED))
            return
        old.phase = Phase.PENDING
        self._unqueue(old)
        if old.requeue_at is None or old.requeue_at <= now:
            self.c.push(old)
        # else it is backing off and stays out until then (Kueue's PushOrUpdate puts it in the
        # inadmissible set while backoffWaitingTimeExpired is false); the back-off brings it.

    def set_priority(self, wl: WorkloadState, priority: int, now: float) -> None:
        """A workload's priority changed (its spec, its job's priority-class label, or the
        value of its WorkloadPriorityClass): a pending one takes its new place in its queue
        (and leaves the inadmissible set, as Kueue's PushOrUpdate does for a changed spec); one
        holding quota is a victim at its new priority, and the waiting workloads of its cohort
        tree are tried again (Kueue's PriorityChanged -> QueueAssociatedInadmissibleWorkloads)."""
        if priority == wl.priority:
            return
        c = self.c
        wl.priority = priority
        wl.shape = self._shape(wl.workload, priority)
        c.dirty.add(wl.key)
        c.version += 1
        if wl.phase == Phase.PENDING:
            if wl.requeue_at is None or wl.requeue_at <= now:  # not while it backs off
                c.push(wl)
        elif wl.phase in (Phase.ADMITTED, Phase.EVICTING):
            cq = c.cqs.get(wl.cluster_queue or "")
            if cq is not None:
                c.requeue_tree(cq, now)

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
        self.emit(wl, Delete(key, now))
        return True

    def _take_out(self, wl: WorkloadState, now: float) -> None:
        """Out of the scheduler's hands: its quota released if it held any, else off its queue."""
        self.c.dirty.add(wl.key)
        self.c.evicting.pop(wl.key, None)
        if wl.phase in (Phase.ADMITTED, Phase.EVICTING):
            self._release(wl, now)
        else:
            self._unqueue(wl)

    # --- admission ---------------------------------------------------------------------------
    def admit(self, e: Entry, now: float, *, usage_in_tree: bool = False) -> None:
        """Reserve the entry's quota; ``usage_in_tree``: the cycle already added its usage."""
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
            usage_in_tree=usage_in_tree,
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
        usage_in_tree: bool = False,
    ) -> None:
        """Record an admission; ``usage`` is the assignment's (derived from ``admission`` if
        not given: both say what the workload holds per flavor and resource)."""
        c, key = self.c, wl.key
        c.dirty.add(key)
        wl.admission = c.admissions.shared(admission_key(admission), admission)
        wl.usage = usage if usage is not None else admission.usage()
        wl.cluster_queue = cq.name
        wl.phase = Phase.ADMITTED
        wl.admitted_at = now
        # Its Evicted condition turns False, so Kueue orders it by its creation time again
        # (GetQueueOrderTimestamp reads an eviction's time only while it is Evicted for a
        # PodsReady timeout or a check): a later preemption does not send it to the back.
        wl.queued_at = wl.created_at
        wl.admission_count += 1
        c.admitted_now[key] = c.admitted_now.get(key, 0) + 1
        wl.pending_reason = ""
        wl.last_tried = None
        if not usage_in_tree:
            cq.node.add_usages(wl.usage)
        cq.admitted[key] = wl
        if cq.spec.min_runtime_seconds > 0:
            c.add_wakeup(now + cq.spec.min_runtime_seconds, cq.name)
        c.version += 1
        flavors = tuple(
            [(ps.name, r, f) for ps in admission.pod_sets for r, f in ps.flavors.items()]
        )
        wait = now - wl.created_at
        reserve = Reserve(key, now, cq.name, flavors, wait)
        admit = Admit(key, now, cq.name, wait)
        if restored:  # the state it had before the restart: conditions only, nothing new
            record.conditions(wl, reserve)
            if not wl.awaiting_checks:
                if wl.workload.max_exec_seconds is not None:
                    c.max_exec.before(wl, admit)
                record.conditions(wl, admit)
                if c.pods_ready.enabled:
                    c.pods_ready.follow(wl, admit)
            return
        self.emit(wl, reserve)
        if self.c.gate.on_reserve(wl, cq.spec, now):
            self.emit(wl, admit)

    def admit_checked(self, wl: WorkloadState, now: float) -> None:
        """Every admission check that applies is Ready: the reserved workload is Admitted."""
        cond = wl.conditions.get("Admitted")
        if wl.phase != Phase.ADMITTED or (cond is not None and cond.status == "True"):
            return
        self.c.dirty.add(wl.key)
        self.c.version += 1
        wait = now - wl.created_at
        self.emit(wl, Admit(wl.key, now, wl.cluster_queue or "", wait))

    def record_pending(self, e: Entry) -> None:
        wl = e.state
        msg = e.message or "waiting for quota"
        wl.pending_reason = msg
        old = wl.conditions.get("QuotaReserved")
        if old is None or old.status != "False" or old.reason != e.reason or old.message != msg:
            self.c.dirty.add(wl.key)
            self.emit(wl, Pend(wl.key, self.c.now, e.reason, msg))

    # --- preemption and eviction --------------------------------------------------------------
    def issue_preemptions(self, e: Entry, now: float) -> None:
        pre = e.state
        for t in sorted(e.targets, key=lambda t: t.workload.uid):
            victim = t.workload
            if victim.phase == Phase.EVICTING:
                continue
            self.c.dirty.update((victim.key, pre.key))
            msg = record.preemption_message(pre, _cq_path(e.cq), _cq_path(t.cq), t.reason)
            victim.preempted_by = pre.key
            victim.preemption_reason = t.reason
            victim.ever_preempted = True
            self.c.preempted_keys.add(victim.key)
            self._begin_eviction(
                victim,
                Evict(
                    victim.key,
                    now,
                    t.cq.name,
                    "Preempted",
                    msg,
                    preemptor=pre.key,
                    preemption_reason=t.reason,
                    preemptor_cluster_queue=e.cq.name,
                ),
            )

    def evict(self, wl: WorkloadState, reason: str, message: str, now: float) -> None:
        """Evict for a reason other than preemption (drain, deactivation, idle GPU)."""
        self._begin_eviction(wl, Evict(wl.key, now, wl.cluster_queue or "", reason, message))
        if self.c.instant_evictions:
            self.complete_evictions(now)

    def unreserve(self, wl: WorkloadState, reason: str, message: str, now: float) -> None:
        """Give back the quota a workload reserved but was not yet Admitted with (its checks are
        not all Ready) because its queue stopped or went away: Kueue's workload controller
        unsets the reservation (``UnsetQuotaReservationWithCondition``) rather than evicting it,
        so it is pending again, not preempted, its check states kept."""
        c = self.c
        c.dirty.add(wl.key)
        self._release(wl, now)
        wl.admission = None
        wl.phase = Phase.PENDING
        c.version += 1
        self.emit(wl, Pend(wl.key, now, reason, message))
        c.push(wl)

    def deactivate(self, wl: WorkloadState, cause: str, now: float) -> None:
        """Deactivate an admitted workload as Kueue's workload controller does after a
        DeactivationTarget: ``spec.active`` becomes false, ``requeueState`` is cleared, and it is
        evicted with reason Deactivated ("The workload is deactivated due to <cause>")."""
        wl.workload = replace(wl.workload, active=False)
        wl.requeue_state_count = 0
        wl.requeue_at = None
        self.evict(wl, "Deactivated", f"{_DEACTIVATED} due to {cause}", now)

    def _begin_eviction(self, wl: WorkloadState, d: Evict) -> None:
        self.c.dirty.add(wl.key)
        self.c.gate.reset_on_eviction(wl, d.time)
        wl.phase = Phase.EVICTING
        self.c.evicting[wl.key] = wl
        self.c.version += 1
        self.emit(wl, d)

    def complete_evictions(self, now: float) -> None:
        evicting = self.c.evicting
        for key in sorted(evicting, key=lambda k: evicting[k].uid):
            self.confirm_stopped(key, now)

    def confirm_stopped(self, key: str, now: float) -> None:
        """The evicted workload's pods are gone: release quota and requeue (or park) it."""
        wl = self.c.evicting.pop(key, None)
        if wl is None or wl.phase != Phase.EVICTING:
            return
        reason = wl.conditions["Evicted"].reason if "Evicted" in wl.conditions else "Evicted"
        self.c.dirty.add(key)
        self._release(wl, now)
        wl.admission = None
        wl.requeue_count += 1
        if not wl.workload.active or wl.deactivated_by_check:
            wl.phase = Phase.INACTIVE
            self.emit(wl, Deactivate(key, now, reason, _DEACTIVATED, after_eviction=True))
            return
        wl.phase = Phase.PENDING
        self.emit(wl, Requeue(key, now, reason))
        if wl.requeue_at is not None and wl.requeue_at > now:
            self.c.requeue_after(wl, wl.requeue_at)  # an admission check's Retry backoff
        else:
            wl.requeue_at = None
            self.c.push(wl)

    def _release(self, wl: WorkloadState, now: float) -> None:
        cq = self.c.cqs.get(wl.cluster_queue or "")
        if cq is not None and cq.admitted.pop(wl.key, None) is not None:
            cq.node.remove_usages(wl.usage)
            cq.generation += 1
            self.c.requeue_tree(cq, now)
            self.emit(wl, Release(wl.key, now, cq.name))
            if cq.terminating and not cq.admitted:
                self.c.drop_cq(cq)
                self.c.refresh_structure()
        wl.usage = {}
        self.c.version += 1

    def finish(
        self, key: str, now: float, succeeded: bool = True, reason: str = "", message: str = ""
    ) -> bool:
        wl = self.c.workloads.get(key)
        if wl is None or wl.phase == Phase.FINISHED:
            return False
        self._take_out(wl, now)
        wl.phase = Phase.FINISHED
        self.emit(wl, Finish(key, now, succeeded, reason, message))
        self.c.version += 1
        return True
