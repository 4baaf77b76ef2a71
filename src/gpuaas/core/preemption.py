"""Classical preemption: which admitted workloads to evict so that a preemptor fits.

Follows Kueue's ``pkg/scheduler/preemption`` (classical mode): candidates from the own
ClusterQueue (withinClusterQueue) and from over-quota subtrees of the cohort tree
(reclaimWithinCohort), with hierarchical advantage and borrowWithinCohort deciding each cohort
candidate's variant; ordered by Kueue's CandidatesOrdering; removed greedily until the preemptor
fits, with and without borrowing; then minimized. This is a pure what-if: every removal from the
quota tree is put back before returning, and the result is a list of targets with reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, TypeVar

from gpuaas.core.cache import CQState
from gpuaas.core.objects import FlavorResource, PreemptionPolicy
from gpuaas.core.quota import QuotaNode, quantities_fit_in_quota
from gpuaas.core.state import Phase, WorkloadState

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


class Variant(IntEnum):
    NEVER = 0
    WITHIN_CQ = 1
    HIERARCHICAL_RECLAIM = 2
    RECLAIM_WITHOUT_BORROWING = 3
    RECLAIM_WHILE_BORROWING = 4


_VARIANT_REASON = {
    Variant.WITHIN_CQ: IN_CLUSTER_QUEUE,
    Variant.HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(slots=True)
class Target:
    workload: WorkloadState
    reason: str
    cq: CQState


@dataclass(slots=True)
class Preemptor:
    """What the preemption search needs to know about the incoming workload."""

    state: WorkloadState
    cq: CQState
    frs: set[FlavorResource]  # FlavorResources that need preemption
    usage: dict[FlavorResource, int]  # the assignment's usage
    now: float


def satisfies_policy(
    preemptor: WorkloadState, cand: WorkloadState, policy: PreemptionPolicy
) -> bool:
    if policy == PreemptionPolicy.ANY:
        return True
    lower = cand.priority < preemptor.priority
    if policy == PreemptionPolicy.LOWER_PRIORITY:
        return lower
    if policy == PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return lower or (
            cand.priority == preemptor.priority and preemptor.created_at < cand.created_at
        )
    return False


def uses_resources(wl: WorkloadState, frs: set[FlavorResource]) -> bool:
    for fr in wl.usage:  # noqa: SIM110 - a loop: called for every candidate of every search
        if fr in frs:
            return True
    return False


def past_min_runtime(wl: WorkloadState, cq: CQState, now: float) -> bool:
    """gpuaas extension: a workload younger than its CQ's minimum runtime is not a candidate."""
    mrt = cq.spec.min_runtime_seconds
    return mrt <= 0 or wl.admitted_at is None or now - wl.admitted_at >= mrt


def candidate_sort_key(wl: WorkloadState, preemptor_cq: str) -> tuple[int, int, int, float, int]:
    """Kueue's CandidatesOrdering."""
    return (
        0 if wl.phase == Phase.EVICTING else 1,
        1 if wl.cluster_queue == preemptor_cq else 0,
        wl.priority,
        -(wl.admitted_at or 0.0),
        wl.uid,
    )


class PreemptionSearch(Protocol):
    """Classical or fair-sharing target selection: a pure what-if over the quota tree."""

    def targets(self, p: Preemptor) -> list[Target]: ...


@dataclass(slots=True)
class _Candidate:
    wl: WorkloadState
    cq: CQState
    lca: QuotaNode | None
    variant: Variant


class ClassicalPreemption:
    """One preemption search over the live quota tree (restored before returning)."""

    def __init__(self, cqs: dict[str, CQState]) -> None:
        self.cqs = cqs

    # --- candidate collection ------------------------------------------------------------
    def _classify(
        self, p: Preemptor, wl: WorkloadState, cand_cq: CQState, advantage: bool
    ) -> Variant:
        if not uses_resources(wl, p.frs) or not past_min_runtime(wl, cand_cq, p.now):
            return Variant.NEVER
        pre = p.cq.spec.preemption
        same = cand_cq is p.cq
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if not satisfies_policy(p.state, wl, policy):
            return Variant.NEVER
        if same:
            return Variant.WITHIN_CQ
        if advantage:
            return Variant.HIERARCHICAL_RECLAIM
        bwc = pre.borrow_within_cohort
        if bwc.policy == PreemptionPolicy.NEVER:
            return Variant.RECLAIM_WITHOUT_BORROWING
        if wl.priority >= p.state.priority:
            return Variant.RECLAIM_WITHOUT_BORROWING
        if bwc.max_priority_threshold is not None and wl.priority > bwc.max_priority_threshold:
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING

    def _from_cq(
        self,
        p: Preemptor,
        cq: CQState,
        lca: QuotaNode | None,
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        pre = p.cq.spec.preemption
        policy = pre.within_cluster_queue if cq is p.cq else pre.reclaim_within_cohort
        # LowerPriority rejects most candidates on priority alone: check that first (the same
        # answer _classify gives, without its other checks).
        below = p.state.priority if policy == PreemptionPolicy.LOWER_PRIORITY else None
        for wl in cq.admitted.values():
            if below is not None and wl.priority >= below:
                continue
            v = self._classify(p, wl, cq, advantage)
            if v != Variant.NEVER:
                out.append(_Candidate(wl, cq, lca, v))

    def _in_subtree(
        self,
        p: Preemptor,
        current: QuotaNode,
        root: QuotaNode,
        skip: QuotaNode | None,
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        # Only children above their quota on a needed FlavorResource hold candidates
        # (Kueue skips subtrees within nominal); the tree keeps that set per node.
        for child in current.over_children(p.frs):
            if child is skip or child is p.cq.node:
                continue
            if not child.is_cq:
                self._in_subtree(p, child, root, skip, advantage, out)
                continue
            cq = self.cqs.get(child.name)
            if cq is not None and cq.active:
                self._from_cq(p, cq, root, advantage, out)

    def _collect(self, p: Preemptor) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        same: list[_Candidate] = []
        hier: list[_Candidate] = []
        prio: list[_Candidate] = []
        pre = p.cq.spec.preemption
        if pre.within_cluster_queue != PreemptionPolicy.NEVER:
            self._from_cq(p, p.cq, None, False, same)
        node = p.cq.node
        if node.parent is not None and pre.reclaim_within_cohort != PreemptionPolicy.NEVER:
            advantage, remaining = quantities_fit_in_quota(node, p.usage)
            previous: QuotaNode | None = None
            for ancestor in node.ancestors():
                self._in_subtree(
                    p, ancestor, ancestor, previous, advantage, hier if advantage else prio
                )
                fits, remaining = quantities_fit_in_quota(ancestor, remaining)
                advantage = advantage or fits
                previous = ancestor
        key = p.cq.name
        for lst in (same, hier, prio):
            if len(lst) > 1:
                lst.sort(key=lambda c: candidate_sort_key(c.wl, key))
        return same, hier, prio

    # --- the search ------------------------------------------------------------------------
    def _fits(self, p: Preemptor, allow_borrowing: bool) -> bool:
        node = p.cq.node
        for fr, v in p.usage.items():
            if not allow_borrowing and node.borrowing_with(fr, v):
                return False
            if v > node.available(fr):
                return False
        return True

    def _valid(self, p: Preemptor, c: _Candidate, borrowing: bool) -> bool:
        if c.cq is p.cq:
            return True
        if borrowing and c.variant == Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        if c.cq.node.within_nominal(p.frs):
            return False
        for node in c.cq.node.ancestors():
            if node is c.lca:
                break
            if node.within_nominal(p.frs):
                return False
        return True

    def targets(self, p: Preemptor) -> list[Target]:
        same, hier, prio = self._collect(p)
        if not same and not hier and not prio:
            return []

        def split(lst: list[_Candidate]) -> tuple[list[_Candidate], list[_Candidate]]:
            ev = [c for c in lst if c.wl.phase == Phase.EVICTING]
            return ev, [c for c in lst if c.wl.phase != Phase.EVICTING]

        eh, nh = split(hier)
        ep, np_ = split(prio)
        es, ns = split(same)
        candidates = eh + ep + es + nh + np_ + ns
        bwc_forbidden = p.cq.spec.preemption.borrow_within_cohort.policy == PreemptionPolicy.NEVER
        no_other = not hier and not prio
        if no_other or (bwc_forbidden and not self._under_nominal(p)):
            attempts = [True]
        elif bwc_forbidden and not hier:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            chosen: list[_Candidate] = []
            for c in candidates:
                if not self._valid(p, c, borrowing):
                    continue
                c.cq.node.remove_usages(c.wl.usage)
                chosen.append(c)
                if self._fits(p, borrowing):
                    chosen = self._fill_back(p, chosen, borrowing)
                    _restore(chosen)
                    return [Target(c.wl, _VARIANT_REASON[c.variant], c.cq) for c in chosen]
            _restore(chosen)
        return []

    def _under_nominal(self, p: Preemptor) -> bool:
        node = p.cq.node
        return all(node.nominal(fr) > node.usage.get(fr, 0) for fr in p.frs)

    def _fill_back(
        self, p: Preemptor, chosen: list[_Candidate], borrowing: bool
    ) -> list[_Candidate]:
        return fill_back(
            chosen, lambda c: (c.cq.node, c.wl.usage), lambda: self._fits(p, borrowing)
        )


T = TypeVar("T")


def fill_back(
    chosen: list[T],
    held: Callable[[T], tuple[QuotaNode, dict[FlavorResource, int]]],
    fits: Callable[[], bool],
) -> list[T]:
    """Kueue's fillBackWorkloads: walk the chosen victims back (all but the last added), put
    each back, and keep it un-preempted if the preemptor still fits. Victims' usage is out of
    the tree on entry; what stays chosen is still out on return."""
    for i in range(len(chosen) - 2, -1, -1):
        node, usage = held(chosen[i])
        node.add_usages(usage)
        if fits():
            chosen[i] = chosen[-1]
            chosen.pop()
        else:
            node.remove_usages(usage)
    return chosen


def _restore(chosen: Iterable[_Candidate]) -> None:
    for c in chosen:
        c.cq.node.add_usages(c.wl.usage)
