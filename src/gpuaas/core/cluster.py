"""The engine's state and its one entry point: objects in, decisions out.

``Cluster`` holds every Kueue object, the quota tree, the pending queues and each workload's
status. ``apply``/``delete``/``finish`` change the world; ``schedule(now)`` runs scheduling cycles
until nothing changes at that instant, as the scenario contract defines "settled", and returns the
decisions (``core.decisions``) taken since the last call, in order. Kueue's events for them are
kept in ``events`` (drained by ``take_events``). It is pure: no I/O and no clock, ``now`` is always
passed in. Live runtimes construct it with ``instant_evictions=False`` and call
``confirm_stopped`` once an evicted workload's pods are gone.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import replace

from gpuaas.core import pending, prebuilt
from gpuaas.core.backoff import Backoff, BackoffStep, backoff_step
from gpuaas.core.cache import CQState
from gpuaas.core.checks import CheckGate
from gpuaas.core.config import SchedulerConfig
from gpuaas.core.decisions import Decision
from gpuaas.core.errors import ApplyError
from gpuaas.core.fairsharing import FairPreemption, fair_order
from gpuaas.core.interning import Shared
from gpuaas.core.lifecycle import Lifecycle
from gpuaas.core.max_exec import MaxExecution
from gpuaas.core.objects import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    KueueObject,
    LocalQueue,
    Namespace,
    QueueingStrategy,
    ResourceFlavor,
    StopPolicy,
    Workload,
    WorkloadPriorityClass,
)
from gpuaas.core.podsready import PodsReadyGate
from gpuaas.core.preemption import ClassicalPreemption, PreemptionSearch
from gpuaas.core.queues import ClusterQueueQueue
from gpuaas.core.quota import QuotaNode, quotas_of
from gpuaas.core.scheduler import Entry, Scheduler, classical_order_key
from gpuaas.core.state import (
    Admission,
    AdmissionCheckStatus,
    Event,
    Phase,
    WorkloadState,
)
from gpuaas.core.structure import rebuild

MAX_CYCLES_PER_INSTANT = 20_000
MAX_READMISSIONS = 5  # admissions of one workload within one instant before it counts as flapping


class Cluster:
    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        instant_evictions: bool = True,
        record_events: bool = True,
        requeue_batch_seconds: float = 0.0,
    ) -> None:
        self.config = config or SchedulerConfig()
        # Kueue's requeueBatchPeriod (1 s): a live server passes 1.0 and released workloads
        # return to their queues that long after the quota was freed; 0 (scenarios) returns
        # them as soon as nothing already queued is left to try at that instant.
        self.requeue_batch_seconds = requeue_batch_seconds
        self.instant_evictions = instant_evictions
        # Events are an output for whoever drains ``events`` (the server stores them). A caller
        # that never reads them (the scenario runner reports states) turns them off; conditions,
        # reasons and every decision stay the same.
        self.record_events = record_events
        self.namespaces: dict[str, Namespace] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cqs: dict[str, CQState] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.cohort_nodes: dict[str, QuotaNode] = {}
        self.local_queues: dict[tuple[str, str], LocalQueue] = {}
        self.priority_classes: dict[str, WorkloadPriorityClass] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        # Active as a check controller running beside the core says (set_check_active); a check
        # no controller speaks for is as active as its object's status says.
        self._check_active: dict[str, bool] = {}
        self.workloads: dict[str, WorkloadState] = {}
        self.preempted_keys: set[str] = set()
        # Workloads whose status may have changed since the caller last cleared this set: a
        # server persists only these instead of comparing every workload after each request.
        self.dirty: set[str] = set()
        self.admitted_now: dict[str, int] = {}  # admissions per workload in this schedule() call
        # (time, cq): when a workload's minimum runtime runs out it becomes a preemption
        # candidate, so the CQ's cohort tree must be looked at again then.
        self._wakeups: list[tuple[float, str]] = []
        self.backoff = Backoff()  # workloads kept out of their queue for a while (a Retry)
        self.events: list[Event] = []  # Kueue's events since the last take_events()
        self.decisions: list[Decision] = []  # since the last take_decisions() or schedule()
        self._seq = 0
        self.version = 0
        self._tree_dirty = True
        self._ready: set[str] = set()  # CQs that may have a head to pop
        self._requeue_gen: dict[int, int] = {}  # id(root node) -> inadmissible requeue count
        self._pending_requeue: dict[int, tuple[QuotaNode, float]] = {}  # root -> (root, due)
        self.evicting: dict[str, WorkloadState] = {}  # evicted, pods not yet confirmed gone
        self._warnings: list[str] = []
        self._scheduler = Scheduler(self)
        self.life = Lifecycle(self)
        self.gate = CheckGate(self)
        self.pods_ready = PodsReadyGate(self, self.config.wait_for_pods_ready)
        self.max_exec = MaxExecution(self)
        self.now = 0.0  # the instant being scheduled (set by schedule())
        # (namespace, ClusterQueue) -> does the CQ's namespaceSelector admit it, and
        # (namespace, LocalQueue) -> resolve_cq's answer. Both are forgotten on any apply or
        # delete of a non-Workload object and when a ClusterQueue is dropped: nothing else
        # changes the answers.
        self._ns_match: dict[tuple[str, str], bool] = {}
        self._routes: dict[tuple[str, str], tuple[str | None, str]] = {}
        # One shared copy of equal scheduling-equivalence keys and admissions (core.interning).
        self.shapes, self.admissions = Shared(), Shared()

    # --- apply / delete ----------------------------------------------------------------
    def apply(self, obj: KueueObject, now: float) -> None:
        if isinstance(obj, Workload):
            self.life.apply_workload(obj, now)
            return
        self._forget_routing()  # namespaces, selectors and queues only change below
        if isinstance(obj, Namespace):
            obj.labels.setdefault("kubernetes.io/metadata.name", obj.name)
            self.namespaces[obj.name] = obj
            self._requeue_all()
        elif isinstance(obj, ResourceFlavor):
            self.flavors[obj.name] = obj
            self._tree_dirty = True
        elif isinstance(obj, ClusterQueue):
            self._apply_cluster_queue(obj, now)
        elif isinstance(obj, Cohort):
            self.cohorts[obj.name] = obj
            self._tree_dirty = True
        elif isinstance(obj, LocalQueue):
            self._apply_local_queue(obj, now)
        elif isinstance(obj, WorkloadPriorityClass):
            self.priority_classes[obj.name] = obj
            self._reprioritize(obj, now)
        elif isinstance(obj, AdmissionCheck):
            self.admission_checks[obj.name] = obj
            self._tree_dirty = True  # ClusterQueues that name it may change activeness
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"unsupported object {type(obj).__name__}")
        self.version += 1

    def _apply_cluster_queue(self, spec: ClusterQueue, now: float) -> None:
        old = self.cqs.get(spec.name)
        if old is None:
            self.cqs[spec.name] = CQState.build(spec)
            self._reroute_pending(unrouted_only=True)
        else:
            old.spec = spec
            old.node.quotas = quotas_of(spec.resource_groups)
            old.index_groups()
            old.generation += 1
            # A terminating ClusterQueue stays terminating through an update (Kubernetes keeps
            # the deletionTimestamp): it admits nothing new until its workloads are gone.
            strict = spec.queueing_strategy == QueueingStrategy.STRICT_FIFO
            if old.queue.strict != strict:
                self._rebuild_queue(old, strict=strict)
        self._tree_dirty = True
        cq = self.cqs[spec.name]
        if spec.stop_policy != StopPolicy.NONE:
            self.refresh_structure()
            why = f"ClusterQueue {spec.name} is stopped"
            drain = spec.stop_policy == StopPolicy.HOLD_AND_DRAIN
            for wl in sorted(cq.admitted.values(), key=lambda w: w.uid):
                if wl.phase != Phase.ADMITTED:
                    continue
                if wl.awaiting_checks:
                    self.life.unreserve(wl, "Inadmissible", why, now)
                elif drain:
                    self.life.evict(wl, "ClusterQueueStopped", "The ClusterQueue is stopped", now)

    def _reprioritize(self, pc: WorkloadPriorityClass, now: float) -> None:
        """Kueue's WorkloadPriorityClass controller: on every create or change of a class, each
        workload that names it gets the class's value as its spec.priority."""
        for wl in sorted(self.workloads.values(), key=lambda w: w.uid):
            w = wl.workload
            if w.priority_class != pc.name or wl.phase == Phase.FINISHED:
                continue
            if w.priority != pc.value:
                wl.workload = replace(w, priority=pc.value)
            self.life.set_priority(wl, pc.value, now)

    def _apply_local_queue(self, lq: LocalQueue, now: float) -> None:
        old = self.local_queues.get((lq.namespace, lq.name))
        if old is not None and old.cluster_queue != lq.cluster_queue:
            # The CRD's rule (x-kubernetes-validations self == oldSelf): to move a LocalQueue's
            # workloads to another ClusterQueue, delete it and create it again.
            raise ApplyError(
                f"LocalQueue {lq.namespace}/{lq.name}", "spec.clusterQueue", "field is immutable"
            )
        self.local_queues[(lq.namespace, lq.name)] = lq
        self._tree_dirty = True  # warnings name LocalQueues pointing at missing ClusterQueues
        self._reroute_pending()
        if lq.stop_policy != StopPolicy.NONE:
            why = f"LocalQueue {lq.name} is stopped"
            drain = lq.stop_policy == StopPolicy.HOLD_AND_DRAIN
            for wl in self._of_local_queue(lq.namespace, lq.name):
                if wl.awaiting_checks:
                    self.life.unreserve(wl, "Inadmissible", why, now)
                elif drain:
                    self.life.evict(wl, "LocalQueueStopped", "The LocalQueue is stopped", now)

    def _of_local_queue(self, namespace: str, name: str) -> list[WorkloadState]:
        """The workloads of a LocalQueue that hold quota, in creation order."""
        return [
            wl
            for wl in sorted(self.workloads.values(), key=lambda w: w.uid)
            if wl.phase == Phase.ADMITTED
            and wl.workload.namespace == namespace
            and wl.workload.queue_name == name
        ]

    def delete_workload_object(self, namespace: str, name: str, now: float) -> Workload | None:
        """The Workload object itself is deleted (not its job). Kueue's job reconciler then
        finds the job without a Workload: it stops the job and, unless the job finished, creates
        a new Workload for it (``handleJobWithNoWorkload``), which queues afresh. Returns the
        Workload to create anew, or ``None`` (a plain Workload, or a finished job's)."""
        wl = self.workloads.get(f"{namespace}/{name}")
        if wl is None:
            return None
        again = (
            wl.workload if wl.workload.kind != "Workload" and wl.phase != Phase.FINISHED else None
        )
        self.delete("Workload", namespace, name, now)
        return again

    def delete(self, kind: str, namespace: str | None, name: str, now: float) -> bool:
        self.version += 1
        if kind == "Workload":
            return self.life.delete_workload(f"{namespace}/{name}", now)
        self._forget_routing()
        if kind == "Namespace":
            return self.namespaces.pop(name, None) is not None
        if kind == "ResourceFlavor":
            found = self.flavors.pop(name, None) is not None
        elif kind == "ClusterQueue":
            cq = self.cqs.get(name)
            if cq is None:
                return False
            why = f"ClusterQueue {name} is terminating or missing"
            for wl in sorted(cq.admitted.values(), key=lambda w: w.uid):
                if wl.phase == Phase.ADMITTED and wl.awaiting_checks:
                    self.life.unreserve(wl, "Inadmissible", why, now)
            if cq.admitted:
                cq.terminating = True  # Kueue keeps it until its workloads are gone
            else:
                self.drop_cq(cq)
            found = True
        elif kind == "Cohort":
            found = self.cohorts.pop(name, None) is not None
        elif kind == "LocalQueue":
            found = self.local_queues.pop((namespace or "default", name), None) is not None
            why = f"LocalQueue {name} is terminating or missing"
            for wl in self._of_local_queue(namespace or "default", name):
                if wl.awaiting_checks:
                    self.life.unreserve(wl, "Inadmissible", why, now)
            self._reroute_pending()
        elif kind == "WorkloadPriorityClass":
            return self.priority_classes.pop(name, None) is not None
        elif kind == "AdmissionCheck":
            found = self.admission_checks.pop(name, None) is not None
        else:
            return False
        self._tree_dirty = True
        self.refresh_structure()
        return found

    def next_uid(self) -> int:
        """The next workload's creation sequence (Kueue's UID tie-break, deterministic here)."""
        self._seq += 1
        return self._seq

    def warn(self, message: str) -> None:
        """A configuration problem worth telling the user (shown by ``warnings``)."""
        self._warnings.append(message)

    def take_decisions(self) -> list[Decision]:
        """The decisions since the last call (or ``schedule``), in the order they took effect."""
        out, self.decisions = self.decisions, []
        return out

    def take_events(self) -> list[Event]:
        """Kueue's events since the last call, for whoever keeps the audit trail."""
        out, self.events = self.events, []
        return out

    def _forget_routing(self) -> None:
        """Drop the cached namespace matches and LocalQueue routes (their inputs changed)."""
        self._ns_match.clear()
        self._routes.clear()

    def drop_cq(self, cq: CQState) -> None:
        del self.cqs[cq.name]
        self._forget_routing()
        for key in list(cq.queue.keys()):
            cq.queue.remove(key)
            wl = self.workloads[key]
            wl.cluster_queue = None
            wl.pending_reason = f"ClusterQueue {cq.name} doesn't exist"
        self._ready.discard(cq.name)
        self._tree_dirty = True

    # --- structure: quota tree, activeness, routing -------------------------------------
    def refresh_structure(self) -> None:
        """Rebuild the cohort tree, activeness and warnings if a non-Workload object changed."""
        if not self._tree_dirty:
            return
        self._tree_dirty = False
        rebuild(self)

    def _checks_active(self) -> dict[str, bool]:
        return {name: self.check_is_active(name) for name in self.admission_checks}

    def check_is_active(self, name: str) -> bool:
        """Kueue's Active condition of an AdmissionCheck, as gpuaas knows it."""
        if name in self._check_active:
            return self._check_active[name]
        ac = self.admission_checks.get(name)
        return ac is not None and ac.active is True

    def set_check_active(self, name: str, active: bool) -> None:
        """A check controller says whether it can evaluate its check (the Active condition)."""
        if self._check_active.get(name) == active:
            return
        self._check_active[name] = active
        self._tree_dirty = True
        self.version += 1

    def set_check_state(
        self,
        key: str,
        check: str,
        state: str,
        message: str,
        now: float,
        requeue_after_seconds: int | None = None,
    ) -> None:
        """An admission check's controller sets its state on a workload holding quota."""
        self.gate.set_state(key, check, state, message, now, requeue_after_seconds)

    def set_cluster_nomination(
        self, key: str, nominated: tuple[str, ...], cluster_name: str | None
    ) -> None:
        """A MultiKueue dispatcher nominates workers, or names the one that admitted it."""
        self.gate.set_cluster_nomination(key, nominated, cluster_name)

    def requeue_after(self, wl: WorkloadState, at: float) -> None:
        """Requeue with back-off: keep a pending workload out of its queue until ``at``."""
        self.backoff.park(wl, at)

    def _requeue_all(self) -> None:
        """A ClusterQueue, Cohort, ResourceFlavor, AdmissionCheck or Namespace changed: every
        tree's inadmissible workloads return, through Kueue's batch (``NotifyRetryInadmissible``
        -> ``notifyCohort``/``notifyClusterQueue``, as for a freed quota); heads already in the
        heaps are tried again at once."""
        for cq in self.cqs.values():
            cq.queue.blocked_at = None
            self._ready.add(cq.name)
            self.requeue_tree(cq, self.now)

    def requeue_tree(self, cq: CQState, now: float) -> None:
        """Kueue's QueueInadmissibleWorkloads for the CQ's root cohort (or the CQ alone).

        Batched as Kueue (v0.17 and later) batches it, 1 s after the workload was deleted,
        finished or evicted (``requeueBatchPeriod``): in that second Kueue keeps scheduling what
        is already in the heap. Here the move waits until no head is left to try at this instant
        (``schedule`` flushes it then), which is the same order without the wall clock.
        """
        root = cq.node.root()
        if id(root) not in self._pending_requeue:  # a waiting batch keeps its time, as AddAfter
            self._pending_requeue[id(root)] = (root, now + self.requeue_batch_seconds)

    def _flush_requeues(self, now: float) -> bool:
        """Move the released workloads of every batch due by ``now``; True if one was due."""
        due = [key for key, (_, at) in self._pending_requeue.items() if at <= now]
        for key in due:
            root, _ = self._pending_requeue.pop(key)
            # Kueue's queueInadmissibleCycle: a head popped before this move that fails now
            # goes straight back to the heap instead of the inadmissible set.
            self._requeue_gen[id(root)] = self._requeue_gen.get(id(root), 0) + 1
            members = [root] if root.is_cq else list(root.subtree_cqs())
            for node in members:
                member = self.cqs.get(node.name)
                if member is None:
                    continue
                member.queue.blocked_at = None
                if member.queue.requeue_inadmissible() or len(member.queue):
                    self._ready.add(member.name)
        return bool(due)

    def _rebuild_queue(self, cq: CQState, strict: bool) -> None:
        keys = list(cq.queue.keys())
        cq.queue = ClusterQueueQueue(strict=strict)
        for key in keys:
            self.push(self.workloads[key])

    def resolve_cq(self, wl: WorkloadState) -> tuple[str | None, str]:
        w = wl.workload
        key = (w.namespace, w.queue_name)
        found = self._routes.get(key)
        if found is None:
            found = self._routes[key] = self._route(*key)
        return found

    def _route(self, namespace: str, queue_name: str) -> tuple[str | None, str]:
        lq = self.local_queues.get((namespace, queue_name))
        if lq is None:
            return None, f"LocalQueue {queue_name} doesn't exist"
        if lq.cluster_queue not in self.cqs:
            return None, f"ClusterQueue {lq.cluster_queue} doesn't exist"
        if lq.stop_policy != StopPolicy.NONE:
            return None, f"LocalQueue {queue_name} is stopped"
        return lq.cluster_queue, ""

    def push(self, wl: WorkloadState, *, inadmissible: bool = False, alone: bool = False) -> None:
        """Put a pending workload in its ClusterQueue's queue (or leave it unrouted); ``alone``
        is the queue's (an inadmissible workload set aside without its shape)."""
        cq_name, why = self.resolve_cq(wl)
        self.dirty.add(wl.key)
        old = wl.cluster_queue
        if old is not None and old != cq_name and old in self.cqs:
            self.cqs[old].queue.remove(wl.key)
        wl.cluster_queue = cq_name
        if cq_name is None:
            wl.pending_reason = why
            return
        cq = self.cqs[cq_name]
        cq.queue.push(
            wl.key,
            (-wl.priority, wl.queued_at, wl.uid),
            wl.shape,
            inadmissible=inadmissible,
            alone=alone,
        )
        if not inadmissible:
            cq.queue.blocked_at = None
            self._ready.add(cq_name)

    def _reroute_pending(self, *, unrouted_only: bool = False) -> None:
        for wl in sorted(self.workloads.values(), key=lambda w: w.uid):
            if wl.phase == Phase.PENDING and not (unrouted_only and wl.cluster_queue is not None):
                self.push(wl)

    def namespace_matches(self, wl: WorkloadState, cq: CQState) -> bool:
        ns = wl.workload.namespace
        key = (ns, cq.name)
        found = self._ns_match.get(key)
        if found is not None:
            return found
        sel = cq.spec.namespace_selector
        if sel is None:
            found = False
        else:
            labels = self.namespaces[ns].labels if ns in self.namespaces else {}
            if "kubernetes.io/metadata.name" not in labels:
                labels = {**labels, "kubernetes.io/metadata.name": ns}
            found = sel.matches(labels)
        self._ns_match[key] = found
        return found

    # --- scheduling ------------------------------------------------------------------------
    def preemption_search(self) -> PreemptionSearch:
        if self.config.fair_sharing:
            return FairPreemption(self.cqs, self.config, cohort_weights=self._cohort_weights())
        return ClassicalPreemption(self.cqs)

    def _cohort_weights(self) -> dict[str, float]:
        return {n: c.fair_weight for n, c in self.cohorts.items()}

    def order_entries(self, entries: list[Entry]) -> list[Entry]:
        if self.config.fair_sharing:
            return fair_order(entries, cohort_weights=self._cohort_weights())
        return sorted(entries, key=classical_order_key)

    def _pop_heads(self) -> list[Entry]:
        """One head per active ClusterQueue, as Kueue's Heads(); pending requeues wait.

        A CQ whose head failed while nothing changed is *blocked*: popping it alone would fail
        the same way, so when only blocked CQs are left the instant is settled. But while other
        CQs have heads, blocked heads take part in the cycle as in Kueue, where they are popped
        every cycle: a StrictFIFO head with no preemption candidates keeps reserving quota, and
        a preemptor waiting for its victims keeps its usage, so that others cannot take it.
        """
        heads: list[Entry] = []
        blocked: list[CQState] = []
        version, cqs, ready = self.version, self.cqs, self._ready
        for name in sorted(ready):
            cq = cqs.get(name)
            if cq is None or cq.inactive_reason is not None or not cq.queue:
                ready.discard(name)  # gone, inactive or empty: added back when that changes
                continue
            if cq.queue.blocked_at == version:
                blocked.append(cq)
                continue
            entry = self._pop_head(cq)
            if entry is None:
                ready.discard(name)
            else:
                heads.append(entry)
        if heads:
            for cq in blocked:
                entry = self._pop_head(cq)
                if entry is not None:
                    heads.append(entry)
        return heads

    def _pop_head(self, cq: CQState) -> Entry | None:
        key: str | None = None
        if cq.sticky is not None and cq.sticky in cq.queue:
            key = cq.sticky
            cq.queue.remove(key)
        else:
            key = cq.queue.pop()
        if key is None:
            return None
        root = id(cq.node.root())
        return Entry(self.workloads[key], cq, self._requeue_gen.get(root, 0))

    def schedule(self, now: float) -> list[Decision]:
        """Run scheduling cycles until nothing changes at this instant.

        Returns every decision since the last ``schedule`` or ``take_decisions`` (those that
        ``apply``, ``delete``, ``finish`` and the rest took before it included), in order.
        """
        self.now = now
        self.refresh_structure()
        while self._wakeups and self._wakeups[0][0] <= now:
            _, name = heapq.heappop(self._wakeups)
            if name in self.cqs:
                self.requeue_tree(self.cqs[name], now)
        self.pods_ready.expire(now)  # waitForPodsReady: evict what timed out, before scheduling
        self.max_exec.expire(now)  # deactivate what ran past its maximum execution time
        for wl in self.backoff.due(now, self.workloads):
            self.pods_ready.backoff_finished(wl, now)
            self.dirty.add(wl.key)  # its status loses requeueState.requeueAt, as in Kueue
            self.push(wl)
        self.admitted_now.clear()
        for _ in range(MAX_CYCLES_PER_INSTANT):
            heads = self._pop_heads()
            if not heads:
                # Everything already in the heaps has been tried: now the workloads that freed
                # quota released from the inadmissible sets compete for what is left.
                if self._pending_requeue and self._flush_requeues(now):
                    continue
                break
            version = self.version
            self._scheduler.cycle(heads, now)
            if self.version == version and all(e.requeued_immediately for e in heads):
                # Nothing changed and every head went straight back to its heap (StrictFIFO, a
                # preemptor waiting for its victims, a skipped entry): the next cycle would be
                # this one again, as in Kueue where they keep failing. Block these CQs until
                # the state changes. (If a head went inadmissible, the next cycle differs.)
                for e in heads:
                    e.cq.queue.blocked_at = self.version
            if self.instant_evictions:
                self.life.complete_evictions(now)
            if any(self.admitted_now.get(e.state.key, 0) > MAX_READMISSIONS for e in heads):
                # Policies that let two workloads evict each other in turn (possible with fair
                # sharing, as in Kueue) would flap forever at one instant; stop and say so.
                self._warnings.append(
                    f"t={now}: workloads kept evicting each other; scheduling paused"
                )
                break
        else:  # pragma: no cover - a safety net, never expected
            self._warnings.append(f"scheduling did not settle at t={now} after many cycles")
        return self.take_decisions()

    def requeue(self, e: Entry) -> None:
        """Put a not-admitted head back where Kueue's RequeueIfNotPresent would."""
        wl, cq = e.state, e.cq
        if wl.phase != Phase.PENDING or wl.key not in self.workloads:
            return
        self.life.record_pending(e)
        if e.preempting:
            cq.sticky = wl.key
        elif cq.sticky == wl.key:
            cq.sticky = None
        if cq.queue.strict:
            immediate = e.requeue_reason != "NamespaceMismatch"
        else:
            immediate = e.requeue_reason in ("FailedAfterNomination", "PendingPreemption")
            if not immediate and e.requeue_reason in ("NoFit", "PreemptionNoCandidates"):
                root = id(cq.node.root())
                if self._requeue_gen.get(root, 0) > e.popped_requeue_gen or (
                    e.assignment is not None and e.assignment.pending_flavors()
                ):
                    immediate = True
        e.requeued_immediately = immediate
        # Only a workload that does not fit sets its whole shape aside (Kueue's equivalence
        # hashing, on by default since 0.18); any other reason sets aside the workload alone.
        alone = e.requeue_reason not in ("NoFit", "PreemptionNoCandidates")
        self.push(wl, inadmissible=not immediate, alone=alone)

    # --- queries -------------------------------------------------------------------------
    def add_wakeup(self, at: float, cq: str) -> None:
        heapq.heappush(self._wakeups, (at, cq))

    def next_wakeup(self) -> float | None:
        """The next instant at which ``schedule`` has something new to look at, if any."""
        times = [at for _, at in self._pending_requeue.values()]
        times += [
            t
            for t in (self.backoff.next_at(), self.pods_ready.next_at(), self.max_exec.next_at())
            if t is not None
        ]
        times += [self._wakeups[0][0]] if self._wakeups else []
        return min(times) if times else None

    def warnings(self) -> list[str]:
        self.refresh_structure()
        return list(self._warnings)

    def cluster_queue_usage(self, name: str) -> dict[tuple[str, str], int]:
        cq = self.cqs.get(name)
        return {} if cq is None else {fr: v for fr, v in cq.node.usage.items() if v}

    def pending_in(self, cq_name: str) -> list[WorkloadState]:
        cq = self.cqs.get(cq_name)
        if cq is None:
            return []
        return [self.workloads[k] for k in cq.queue.ordered()]

    def position(self, key: str) -> int | None:
        """0-based place of a pending workload in its ClusterQueue's order, if queued."""
        return pending.position(self, key)

    def why_pending(self, key: str, known: Mapping[str, int] | None = None) -> str:
        """Plain words: why the workload is not admitted, with its place in the queue
        (``known``: the places from ``positions``, for a caller asking about many)."""
        return pending.why_pending(self, key, known)

    def positions(self) -> dict[str, int]:
        """Every pending workload's 0-based place in its ClusterQueue's order."""
        return pending.positions(self)

    # --- lifecycle (delegated) ------------------------------------------------------------
    def finish(
        self, key: str, now: float, succeeded: bool = True, reason: str = "", message: str = ""
    ) -> bool:
        """The workload completed: release its quota; it stays listed as Finished (``reason``
        and ``message``: Kueue's Finished condition when not the job's own outcome)."""
        return self.life.finish(key, now, succeeded, reason, message)

    def sync_prebuilt(self, job: Workload, name: str, now: float) -> bool:
        """A job names Workload ``name`` as its own (prebuilt): Kueue's
        ``ensurePrebuiltWorkloadInSync`` finishes that Workload, reason OutOfSync, when the
        job's podSets are not equivalent to it (``core.prebuilt``). True if it did."""
        wl = self.workloads.get(f"{job.namespace}/{name}")
        if wl is None or wl.phase == Phase.FINISHED:
            return False
        admitted = wl.phase in (Phase.ADMITTED, Phase.EVICTING)
        if prebuilt.equivalent(job, wl.workload, ignore_tolerations=admitted):
            return False
        return self.life.finish(
            wl.key, now, False, prebuilt.OUT_OF_SYNC, prebuilt.OUT_OF_SYNC_MESSAGE
        )

    def confirm_stopped(self, key: str, now: float) -> None:
        """Live runtimes: the evicted workload's pods are gone; release quota and requeue it."""
        self.life.confirm_stopped(key, now)

    def evict(self, key: str, reason: str, message: str, now: float) -> bool:
        """Evict an admitted workload for a reason other than preemption (e.g. IdleGPU)."""
        wl = self.workloads.get(key)
        if wl is None or wl.phase != Phase.ADMITTED:
            return False
        self.life.evict(wl, reason, message, now)
        return True

    def set_pods_ready(self, key: str, ready: bool, now: float) -> bool:
        """The runtime says whether every pod of an admitted workload runs (waitForPodsReady's
        PodsReady condition); True if the condition changed. Inert unless it is enabled."""
        return self.pods_ready.set_pods_ready(key, ready, now)

    def evict_with_backoff(
        self,
        key: str,
        reason: str,
        message: str,
        now: float,
        *,
        limit: int | None,
        base_seconds: float,
        max_seconds: float,
    ) -> BackoffStep | None:
        """Evict an admitted workload and keep it out of its queue for a growing back-off, or
        deactivate it once ``limit`` back-off evictions are behind it (Kueue's
        ``requeuingStrategy``: ``requeueState.count``/``requeueAt``, then ``spec.active=false``).

        A requeued one is ordered by its eviction time, as Kueue orders a workload evicted with
        a back-off (``requeuingStrategy.timestamp: Eviction``), so it does not jump back to the
        head. None when the workload is not admitted.
        """
        wl = self.workloads.get(key)
        if wl is None or wl.phase != Phase.ADMITTED:
            return None
        step = backoff_step(wl.requeue_state_count, limit, now, base_seconds, max_seconds)
        if step.deactivate:
            self.life.deactivate(wl, message, now)
            return step
        wl.requeue_state_count = step.count
        wl.requeue_at = step.requeue_at
        wl.queued_at = now
        self.life.evict(wl, reason, message, now)
        return step

    def admitted(self) -> Iterable[WorkloadState]:
        return (w for w in self.workloads.values() if w.phase == Phase.ADMITTED)

    def restore_past_execution(self, key: str, seconds: int) -> None:
        """A restart gives a workload back its ``accumulatedPastExecutionTimeSeconds``."""
        wl = self.workloads.get(key)
        if wl is not None and seconds > 0:
            wl.past_exec_seconds = seconds
            self.max_exec.watch(wl)

    def restore_admission(
        self,
        workload: Workload,
        admission: Admission,
        admitted_at: float,
        now: float,
        checks: list[AdmissionCheckStatus] | None = None,
    ) -> None:
        """Re-establish an admitted workload after a restart, on the same flavors.

        ``now`` is the workload's original creation time (its place in queue order if it is
        ever requeued); ``admitted_at`` its last QuotaReserved transition.
        """
        self.life.apply_workload(workload, now)
        wl = self.workloads[workload.key]
        if wl.phase != Phase.PENDING:
            return
        cq = self.cqs.get(admission.cluster_queue)
        if cq is None:
            return
        self.refresh_structure()
        if wl.cluster_queue is not None and wl.cluster_queue in self.cqs:
            self.cqs[wl.cluster_queue].queue.remove(wl.key)
        wl.admission_checks = {c.name: c for c in checks or []}
        self.life.mark_admitted(wl, cq, admission, admitted_at, restored=True)


__all__ = ["ApplyError", "Cluster"]
