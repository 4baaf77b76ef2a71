"""Fair Sharing preemption: which admitted workloads to evict, judged by Dominant Resource Share.

Follows Kueue v0.19's ``fairPreemptions`` (``pkg/scheduler/preemption/preemption.go`` and
``pkg/scheduler/preemption/fairsharing``) with its default gates (FairSharingPreemptWithinNominal
on): candidates are the own ClusterQueue's workloads (withinClusterQueue) and those of every
borrowing ClusterQueue in the root cohort's tree (reclaimWithinCohort); the preemptor's usage is
simulated as admitted; target ClusterQueues are taken from the most unfair subtree down, and a
cross-queue victim is taken only while the configured strategies (LessThanOrEqualToFinalShare,
then LessThanInitialShare) say it makes things fairer, or unconditionally while the preemptor
stays within its nominal quota. The search is a pure what-if over the live quota tree: every
usage change is undone before returning. The admission order of one cycle lives in
``fairsharing_order``; ``fair_order`` is re-exported here because the core imports it from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from gpuaas.core.cache import CQState
from gpuaas.core.config import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    SchedulerConfig,
)
from gpuaas.core.fairsharing_drs import (
    DRS,
    NEGATIVE_DRS,
    Weights,
    compare_drs,
    share_of,
)
from gpuaas.core.fairsharing_order import fair_order
from gpuaas.core.objects import PreemptionPolicy
from gpuaas.core.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    ClassicalPreemption,
    Preemptor,
    Target,
    candidate_sort_key,
    fill_back,
    past_min_runtime,
    satisfies_policy,
    uses_resources,
)
from gpuaas.core.quota import QuotaNode
from gpuaas.core.state import WorkloadState

# Kueue's FairSharingPreemptWithinNominal gate (beta, on by default since v0.17).
PREEMPT_WITHIN_NOMINAL = True

# (preemptor's new share, target's old share, target's share after removing the candidate)
Strategy = Callable[[DRS, DRS, DRS], bool]


def less_than_or_equal_to_final_share(preemptor_new: DRS, _old: DRS, target_new: DRS) -> bool:
    """Rule S2-a: the preemptor ends no more unfair than the target after the removal."""
    return compare_drs(preemptor_new, target_new) <= 0


def less_than_initial_share(preemptor_new: DRS, target_old: DRS, _new: DRS) -> bool:
    """Rule S2-b: the preemptor ends strictly less unfair than the target was."""
    return compare_drs(preemptor_new, target_old) < 0


STRATEGIES: dict[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: less_than_or_equal_to_final_share,
    LESS_THAN_INITIAL_SHARE: less_than_initial_share,
}


@dataclass(slots=True)
class _Candidate:
    wl: WorkloadState
    cq: CQState


@dataclass(slots=True)
class _TargetQueue:
    """Kueue's TargetClusterQueue: a ClusterQueue the ordering says to take a victim from."""

    ordering: _Ordering
    cq: CQState

    def in_cluster_queue(self) -> bool:
        return self.cq is self.ordering.preemptor_cq

    def has_workload(self) -> bool:
        return bool(self.ordering.by_cq.get(self.cq.name))

    def pop(self) -> _Candidate:
        return self.ordering.by_cq[self.cq.name].pop(0)

    def shares(self) -> tuple[DRS, DRS]:
        """(preemptor's almost-LCA share, target's almost-LCA share), usage as it is now."""
        lca = self._lca()
        o = self.ordering
        return (
            share_of(_almost_lca(o.preemptor_cq.node, lca), o.weights),
            share_of(_almost_lca(self.cq.node, lca), o.weights),
        )

    def share_after_removal(self, c: _Candidate) -> DRS:
        node = self.cq.node
        node.remove_usages(c.wl.usage)
        try:
            return share_of(_almost_lca(node, self._lca()), self.ordering.weights)
        finally:
            node.add_usages(c.wl.usage)

    def _lca(self) -> QuotaNode:
        for ancestor in self.cq.node.ancestors():
            if ancestor in self.ordering.preemptor_ancestors:
                return ancestor
        raise AssertionError(f"ClusterQueue {self.cq.name} shares no cohort with the preemptor")


def _almost_lca(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    """The node on ``node``'s path whose parent is ``lca``."""
    below = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return below
        below = ancestor
    raise AssertionError(f"{lca!r} is not an ancestor of {node!r}")


@dataclass(slots=True)
class _Ordering:
    """Kueue's TargetClusterQueueOrdering: repeatedly descend from the root into the child with
    the highest share, pruning subtrees that no longer borrow or have no candidates left."""

    preemptor_cq: CQState
    cqs: Mapping[str, CQState]
    weights: Weights
    now: float
    by_cq: dict[str, list[_Candidate]] = field(default_factory=dict)
    preemptor_ancestors: set[QuotaNode] = field(default_factory=set)
    pruned_cqs: set[str] = field(default_factory=set)
    pruned_cohorts: set[QuotaNode] = field(default_factory=set)

    @classmethod
    def build(cls, p: Preemptor, cands: list[_Candidate], fp: FairPreemption) -> _Ordering:
        o = cls(p.cq, fp.cqs, fp.weights, p.now)
        o.preemptor_ancestors = set(p.cq.node.ancestors())
        for c in cands:
            o.by_cq.setdefault(c.cq.name, []).append(c)
        return o

    def drop(self, t: _TargetQueue) -> None:
        self.pruned_cqs.add(t.cq.name)

    def targets(self) -> Iterator[_TargetQueue]:
        node = self.preemptor_cq.node
        if node.parent is None:
            t = _TargetQueue(self, self.preemptor_cq)
            while t.cq.name not in self.pruned_cqs and t.has_workload():
                yield t
            return
        root = node.root()
        while root not in self.pruned_cohorts:
            t2 = self._next(root)
            if t2 is not None:
                yield t2

    def _key(self, cq_name: str) -> tuple[int, int, int, float, int]:
        return candidate_sort_key(self.by_cq[cq_name][0].wl, self.preemptor_cq.name)

    def _next(self, cohort: QuotaNode) -> _TargetQueue | None:
        best_cq: CQState | None = None
        best_cq_drs = NEGATIVE_DRS
        best_cohort: QuotaNode | None = None
        best_cohort_drs = NEGATIVE_DRS
        for child in cohort.children:
            if not child.is_cq or child.name in self.pruned_cqs:
                continue
            cq = self.cqs.get(child.name)
            drs = share_of(child, self.weights)
            if (
                cq is None
                or (not drs.borrowing and cq is not self.preemptor_cq)
                or not self.by_cq.get(child.name)
            ):
                self.pruned_cqs.add(child.name)
                continue
            cmp = compare_drs(drs, best_cq_drs)
            if cmp == 1 or (
                cmp == 0 and best_cq is not None and self._key(cq.name) < self._key(best_cq.name)
            ):
                best_cq, best_cq_drs = cq, drs
        for child in cohort.children:
            if child.is_cq or child in self.pruned_cohorts:
                continue
            drs = share_of(child, self.weights)
            if not drs.borrowing and child not in self.preemptor_ancestors:
                self.pruned_cohorts.add(child)
            elif compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(cohort)
            return None
        # A Cohort wins a tie: inside it the most unfair node can be chosen.
        if best_cohort is not None and compare_drs(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        assert best_cq is not None
        return _TargetQueue(self, best_cq)


class FairPreemption(ClassicalPreemption):
    """One fair-sharing preemption search (same contract as ``ClassicalPreemption.targets``)."""

    def __init__(
        self,
        cqs: dict[str, CQState],
        config: SchedulerConfig,
        *,
        cohort_weights: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(cqs)
        self.weights = Weights(cqs, cohort_weights)
        names = config.preemption_strategies or (
            LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            LESS_THAN_INITIAL_SHARE,
        )
        self.strategies = [STRATEGIES[n] for n in names]

    # --- candidates ------------------------------------------------------------------------
    def _eligible(
        self, p: Preemptor, wl: WorkloadState, cq: CQState, policy: PreemptionPolicy
    ) -> bool:
        return (
            satisfies_policy(p.state, wl, policy)
            and uses_resources(wl, p.frs)
            and past_min_runtime(wl, cq, p.now)
        )

    def candidates(self, p: Preemptor) -> list[_Candidate]:
        """Kueue's findCandidates, sorted by CandidatesOrdering."""
        out: list[_Candidate] = []
        pre = p.cq.spec.preemption
        if pre.within_cluster_queue != PreemptionPolicy.NEVER:
            for wl in p.cq.admitted.values():
                if self._eligible(p, wl, p.cq, pre.within_cluster_queue):
                    out.append(_Candidate(wl, p.cq))
        node = p.cq.node
        if node.parent is not None and pre.reclaim_within_cohort != PreemptionPolicy.NEVER:
            for cq_node in node.root().subtree_cqs():
                cq = self.cqs.get(cq_node.name)
                if cq is None or cq is p.cq or not cq.active:
                    continue
                if not any(cq_node.is_borrowing(fr) for fr in p.frs):
                    continue
                for wl in cq.admitted.values():
                    if self._eligible(p, wl, cq, pre.reclaim_within_cohort):
                        out.append(_Candidate(wl, cq))
        out.sort(key=lambda c: candidate_sort_key(c.wl, p.cq.name))
        return out

    # --- the search --------------------------------------------------------------------------
    def targets(self, p: Preemptor) -> list[Target]:
        cands = self.candidates(p)
        if not cands:
            return []
        node = p.cq.node
        node.add_usages(p.usage)  # shares must include the incoming workload
        try:
            fits, chosen, retry = self._first(p, cands)
            if not fits and len(self.strategies) > 1:
                fits, chosen = self._second(p, retry, chosen)
        finally:
            node.remove_usages(p.usage)
        if not fits:
            _restore(chosen)
            return []
        chosen = self._fill_back_fs(p, chosen)
        _restore(chosen)
        return chosen

    def _fits_fs(self, p: Preemptor) -> bool:
        """Kueue's workloadFitsForFairSharing: the simulated preemptor usage set aside."""
        node = p.cq.node
        node.remove_usages(p.usage)
        try:
            return self._fits(p, True)
        finally:
            node.add_usages(p.usage)

    def _take(self, chosen: list[Target], c: _Candidate, reason: str) -> None:
        c.cq.node.remove_usages(c.wl.usage)
        chosen.append(Target(c.wl, reason, c.cq))

    def _first(
        self, p: Preemptor, cands: list[_Candidate]
    ) -> tuple[bool, list[Target], list[_Candidate]]:
        """Kueue's runFirstFsStrategy: (fits, targets, candidates to retry under rule S2-b)."""
        ordering = _Ordering.build(p, cands, self)
        strategy = self.strategies[0]
        chosen: list[Target] = []
        retry: list[_Candidate] = []
        within_nominal = PREEMPT_WITHIN_NOMINAL and not any(
            p.cq.node.is_borrowing(fr) for fr in p.frs
        )
        for tq in ordering.targets():
            if tq.in_cluster_queue() or within_nominal:
                reason = IN_CLUSTER_QUEUE if tq.in_cluster_queue() else IN_COHORT_RECLAMATION
                self._take(chosen, tq.pop(), reason)
                if self._fits_fs(p):
                    return True, chosen, []
                continue
            preemptor_new, target_old = tq.shares()
            if _unsatisfiable(preemptor_new, target_old):
                while tq.has_workload():
                    retry.append(tq.pop())
                continue
            while tq.has_workload():
                c = tq.pop()
                if strategy(preemptor_new, target_old, tq.share_after_removal(c)):
                    self._take(chosen, c, IN_COHORT_FAIR_SHARING)
                    if self._fits_fs(p):
                        return True, chosen, []
                    break  # shares changed: the ordering picks the next queue afresh
                retry.append(c)
        return False, chosen, retry

    def _second(
        self, p: Preemptor, retry: list[_Candidate], chosen: list[Target]
    ) -> tuple[bool, list[Target]]:
        """Kueue's runSecondFsStrategy (rule S2-b): at most one more victim per ClusterQueue."""
        ordering = _Ordering.build(p, retry, self)
        for tq in ordering.targets():
            preemptor_new, target_old = tq.shares()
            c = tq.pop()
            if less_than_initial_share(preemptor_new, target_old, target_old):
                self._take(chosen, c, IN_COHORT_FAIR_SHARING)
                if self._fits_fs(p):
                    return True, chosen
            ordering.drop(tq)
        return False, chosen

    def _fill_back_fs(self, p: Preemptor, chosen: list[Target]) -> list[Target]:
        """Kueue's fillBackWorkloads with borrowing allowed: un-preempt what is not needed."""
        return fill_back(
            chosen, lambda t: (t.cq.node, t.workload.usage), lambda: self._fits(p, True)
        )


def _unsatisfiable(preemptor_new: DRS, target_old: DRS) -> bool:
    """No candidate of the target can pass either rule: the preemptor's share is infinite and
    the target's is not (removing usage never makes a share infinite)."""
    inf = float("inf")
    return preemptor_new.weighted_share() == inf and target_old.weighted_share() != inf


def _restore(chosen: list[Target]) -> None:
    for t in chosen:
        t.cq.node.add_usages(t.workload.usage)


__all__ = ["FairPreemption", "fair_order"]
