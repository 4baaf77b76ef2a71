"""Flavor assignment: which ResourceFlavor each PodSet's resources get, and in what mode.

Follows Kueue's ``pkg/scheduler/flavorassigner``: resource groups are assigned independently,
flavors are tried in listed order (resuming a previous scan), each is checked against taints and
node selectors, then against quota (fit, preempt, reclaim, no candidates, no fit) with a
borrowing level, and flavorFungibility decides whether to stop or look further. Partial admission
(``minCount``) searches for the largest counts that fit. Preemption itself is not decided here:
an oracle callback says whether a single FlavorResource could be freed by preemption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from gpuaas.core.objects import (
    ClusterQueue,
    FlavorResource,
    FungibilityAction,
    FungibilityPreference,
    PodSet,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceGroup,
)
from gpuaas.core.quantity import format_quantity
from gpuaas.core.quota import QuotaNode, available_unclamped, lowest_subtree_that_fits

MAX_BORROW = 1 << 30


class PMode(IntEnum):
    """Kueue's granular preemption modes, worst first."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4


class Mode(IntEnum):
    """Kueue's FlavorAssignmentMode at PodSet and workload level."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 3


# Members bound once: on Python 3.11 each ``PMode.FIT`` is a descriptor lookup, and these
# comparisons run for every flavor of every attempt.
_P_NO_FIT, _P_NO_CANDIDATES, _P_PREEMPT, _P_RECLAIM, _P_FIT = (
    PMode.NO_FIT,
    PMode.NO_CANDIDATES,
    PMode.PREEMPT,
    PMode.RECLAIM,
    PMode.FIT,
)
_M_NO_FIT, _M_PREEMPT, _M_FIT = Mode.NO_FIT, Mode.PREEMPT, Mode.FIT
_TRY_NEXT = FungibilityAction.TRY_NEXT_FLAVOR
_PREEMPTION_OVER_BORROWING = FungibilityPreference.PREEMPTION_OVER_BORROWING


def _flavor_mode(pm: PMode) -> Mode:
    if pm == _P_NO_FIT:
        return _M_NO_FIT
    if pm == _P_FIT:
        return _M_FIT
    return _M_PREEMPT


@dataclass(slots=True)
class FlavorChoice:
    flavor: str
    mode: Mode
    borrow: int
    tried_idx: int = -1


@dataclass(slots=True)
class PodSetResult:
    name: str
    count: int
    requests: dict[str, int]  # totals for ``count`` pods, including "pods" when covered
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    def mode(self) -> Mode:
        if not self.reasons:
            return _M_FIT
        if not self.flavors:
            return _M_NO_FIT
        return min(fc.mode for fc in self.flavors.values())


@dataclass(slots=True)
class Assignment:
    pod_sets: list[PodSetResult]
    borrowing: int = 0
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    last_tried: list[dict[str, int]] = field(default_factory=list)
    _mode: Mode | None = None  # computed once the assignment is complete (see mode())

    def mode(self) -> Mode:
        """The workload's mode: the worst PodSet's. Only asked once ``assign`` has returned."""
        if self._mode is None:
            self._mode = min((ps.mode() for ps in self.pod_sets), default=_M_NO_FIT)
        return self._mode

    def message(self) -> str:
        parts = []
        for ps in self.pod_sets:
            if ps.reasons:
                parts.append(
                    f"couldn't assign flavors to pod set {ps.name}: {', '.join(ps.reasons)}"
                )
        return "; ".join(parts)

    def frs_needing_preemption(self) -> set[FlavorResource]:
        return {
            (fc.flavor, res)
            for ps in self.pod_sets
            for res, fc in ps.flavors.items()
            if fc.mode == _M_PREEMPT
        }

    def pending_flavors(self) -> bool:
        """Kueue's PendingFlavors: the scan stopped before the last flavor of some resource."""
        return any(idx != -1 for d in self.last_tried for idx in d.values())


Oracle = Callable[[FlavorResource, int], tuple[PMode, int]]


def _is_preferred(
    a_mode: PMode, a_borrow: int, b_mode: PMode, b_borrow: int, pref: FungibilityPreference | None
) -> bool:
    if a_mode == _P_NO_FIT:
        return False
    if b_mode == _P_NO_FIT:
        return True
    a_nc, b_nc = a_mode == _P_NO_CANDIDATES, b_mode == _P_NO_CANDIDATES
    if a_nc != b_nc:
        return not a_nc
    if pref == _PREEMPTION_OVER_BORROWING:
        if a_borrow != b_borrow:
            return a_borrow < b_borrow
        return a_mode > b_mode
    if a_mode != b_mode:
        return a_mode > b_mode
    return a_borrow < b_borrow


def _should_try_next(mode: PMode, borrow: int, cq: ClusterQueue) -> bool:
    if mode in (_P_NO_FIT, _P_NO_CANDIDATES):
        return True
    ff = cq.flavor_fungibility
    if mode in (_P_PREEMPT, _P_RECLAIM) and ff.when_can_preempt == _TRY_NEXT:
        return True
    return borrow > 0 and ff.when_can_borrow == _TRY_NEXT


def untolerated_taint(flavor: ResourceFlavor, ps: PodSet) -> str | None:
    """The first NoSchedule/NoExecute taint neither the pod nor the flavor tolerates."""
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if any(t.tolerates(taint) for t in ps.tolerations) or any(
            t.tolerates(taint) for t in flavor.tolerations
        ):
            continue
        return f"{taint.key}={taint.value}:{taint.effect}"
    return None


def matches_node_affinity(flavor: ResourceFlavor, ps: PodSet) -> bool:
    """nodeSelector and required node affinity, restricted to the keys the flavor defines."""
    labels = flavor.node_labels
    for k, v in ps.node_selector.items():
        if k in labels and labels[k] != v:
            return False
    terms = []
    for term in ps.required_affinity:
        exprs = tuple(e for e in term.match_expressions if e.key in labels)
        if not exprs:
            return True  # an empty term matches any flavor (terms are ORed)
        terms.append(exprs)
    if not terms:
        return True
    return any(all(e.matches(labels) for e in exprs) for exprs in terms)


class FlavorAssigner:
    """Assigns flavors for one workload in one ClusterQueue against the current quota tree."""

    def __init__(
        self,
        pod_sets: list[PodSet],
        cq: ClusterQueue,
        node: QuotaNode,
        rg_by_resource: dict[str, ResourceGroup],
        flavors: dict[str, ResourceFlavor],
        oracle: Oracle,
        fair_sharing: bool,
        last_tried: list[dict[str, int]] | None,
    ) -> None:
        self.pod_sets = pod_sets
        self.cq = cq
        self.node = node
        self.rg_by_resource = rg_by_resource
        self.flavors = flavors
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        self.last_tried = last_tried

    def assign(self, counts: list[int] | None = None) -> Assignment:
        assignment = Assignment(pod_sets=[])
        covers_pods = "pods" in self.rg_by_resource
        for i, ps in enumerate(self.pod_sets):
            count = ps.count if counts is None else counts[i]
            requests = {res: q * count for res, q in ps.requests.items()}
            if covers_pods:
                requests["pods"] = count
            result = PodSetResult(name=ps.name, count=count, requests=requests)
            self._assign_pod_set(i, ps, result, assignment.usage)
            assignment.pod_sets.append(result)
            tried: dict[str, int] = {}
            for res, fc in result.flavors.items():
                assignment.borrowing = max(assignment.borrowing, fc.borrow)
                fr = (fc.flavor, res)
                assignment.usage[fr] = assignment.usage.get(fr, 0) + requests[res]
                tried[res] = fc.tried_idx
            assignment.last_tried.append(tried)
            if result.mode() == _M_NO_FIT:
                return assignment
        return assignment

    def _assign_pod_set(
        self, idx: int, ps: PodSet, result: PodSetResult, assigned: dict[FlavorResource, int]
    ) -> None:
        group_flavors: dict[str, FlavorChoice] = {}
        for res, qty in result.requests.items():
            rg = self.rg_by_resource.get(res)
            if rg is None:
                if qty == 0:
                    continue
                result.reasons.append(f"resource {res} unavailable in ClusterQueue")
                result.flavors = {}
                return
            if res in group_flavors:
                continue
            chosen, reasons = self._find_flavor(idx, ps, rg, result.requests, res, assigned)
            if not chosen:
                result.reasons.extend(reasons)
                result.flavors = {}
                return
            group_flavors.update(chosen)
            result.reasons.extend(reasons)
        result.flavors = {r: fc for r, fc in group_flavors.items() if r in result.requests}

    def _find_flavor(
        self,
        idx: int,
        ps: PodSet,
        rg: ResourceGroup,
        requests: dict[str, int],
        res_name: str,
        assigned: dict[FlavorResource, int],
    ) -> tuple[dict[str, FlavorChoice], list[str]]:
        covered = rg.covered_resources
        group_requests = {r: q for r, q in requests.items() if r in covered}
        reasons: list[str] = []
        best: dict[str, FlavorChoice] = {}
        best_mode, best_borrow = _P_NO_FIT, MAX_BORROW
        start = 0
        if self.last_tried is not None and idx < len(self.last_tried):
            start = self.last_tried[idx].get(res_name, -1) + 1
        attempted = -1
        n_flavors = len(rg.flavors)
        for fidx in range(start, n_flavors):
            attempted = fidx
            fq = rg.flavors[fidx]
            fname = fq.name
            flavor = self.flavors.get(fname)
            if flavor is None:
                reasons.append(f"flavor {fname} not found")
                continue
            if flavor.node_taints:
                taint = untolerated_taint(flavor, ps)
                if taint is not None:
                    reasons.append(f"untolerated taint {taint} in flavor {fname}")
                    continue
            if (ps.node_selector or ps.required_affinity) and not matches_node_affinity(flavor, ps):
                reasons.append(f"flavor {fname} doesn't match node affinity")
                continue
            choices: dict[str, FlavorChoice] = {}
            rep_mode, rep_borrow = _P_FIT, 0
            for r, val in group_requests.items():
                fr = (fname, r)
                pmode, borrow, why = self._fits_quota(fr, assigned.get(fr, 0), val)
                if why:
                    reasons.append(why)
                # The worst mode across the group's resources represents the flavor; a plain
                # fit without borrowing never changes it (the common case, skipped cheaply).
                if (pmode != _P_FIT or borrow) and _is_preferred(
                    rep_mode, rep_borrow, pmode, borrow, self.cq.flavor_fungibility.preference
                ):
                    rep_mode, rep_borrow = pmode, borrow
                if rep_mode == _P_NO_FIT:
                    break
                choices[r] = FlavorChoice(fname, _flavor_mode(pmode), borrow)
            if not _should_try_next(rep_mode, rep_borrow, self.cq):
                best, best_mode, best_borrow = choices, rep_mode, rep_borrow
                break
            if _is_preferred(
                rep_mode, rep_borrow, best_mode, best_borrow, self.cq.flavor_fungibility.preference
            ):
                best, best_mode, best_borrow = choices, rep_mode, rep_borrow
        tried = -1 if attempted == n_flavors - 1 else attempted
        for fc in best.values():
            fc.tried_idx = tried
        if best_mode == _P_FIT:
            return best, []
        return best, reasons

    def _fits_quota(self, fr: FlavorResource, assumed: int, request: int) -> tuple[PMode, int, str]:
        node = self.node
        available = node.available(fr)
        val = assumed + request
        if val <= available:  # available never exceeds potential_available: a fit needs no more
            q = node.quotas.get(fr)
            if q is not None and node.usage.get(fr, 0) + val <= q.nominal:
                return _P_FIT, 0, ""  # within nominal: borrowing level 0
            return _P_FIT, lowest_subtree_that_fits(node, fr, val)[0], ""
        max_capacity = node.potential_available(fr)
        flavor, res = fr
        if val > max_capacity:
            return (
                _P_NO_FIT,
                0,
                f"insufficient quota for {res} in flavor {flavor}, request "
                f"({format_quantity(val, res)}) > maximum capacity ({format_quantity(max_capacity, res)})",
            )
        borrow, may_reclaim = lowest_subtree_that_fits(node, fr, val)
        why = (
            f"insufficient unused quota for {res} in flavor {flavor}, "
            f"{format_quantity(val - available, res)} more needed"
        )
        if node.nominal(fr) >= val or may_reclaim or self._can_preempt_while_borrowing():
            pmode, borrow_after = self.oracle(fr, val)
            return pmode, borrow_after, why
        return _P_NO_FIT, borrow, why

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.cq.preemption
        return p.borrow_within_cohort.policy != PreemptionPolicy.NEVER or (
            self.fair_sharing and p.reclaim_within_cohort != PreemptionPolicy.NEVER
        )


def reduce_pod_sets(
    pod_sets: list[PodSet], try_counts: Callable[[list[int]], object | None]
) -> object | None:
    """Kueue's PodSetReducer: binary search the smallest reduction that fits or can preempt."""
    full = [ps.count for ps in pod_sets]
    deltas = [
        ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets
    ]
    total = sum(deltas)
    if total == 0:
        return None
    lo, hi = 0, total + 1  # find the first i in [0, total] for which try_counts succeeds
    found: object | None = None
    found_idx = -1
    while lo < hi:
        mid = (lo + hi) // 2
        counts = [f - (d * mid) // total for f, d in zip(full, deltas, strict=True)]
        r = try_counts(counts)
        if r is not None:
            found, found_idx = r, mid
            hi = mid
        else:
            lo = mid + 1
    return found if found_idx == lo else None


def assign_if_fits(
    pod_sets: list[PodSet],
    cq: ClusterQueue,
    node: QuotaNode,
    rg_by_resource: dict[str, ResourceGroup],
    flavors: dict[str, ResourceFlavor],
    last_tried: list[dict[str, int]] | None,
) -> Assignment | None:
    """The answer ``FlavorAssigner.assign`` gives when every resource group fits, or None.

    Most attempts in a busy pool are plain fits on the first flavor a group may use. This path
    answers those without an assigner, an oracle or reason strings; whenever the scan would have
    to weigh a non-fitting flavor (or look past a fitting one, whenCanBorrow: TryNextFlavor) it
    returns None and the caller runs the full assigner, which then decides from scratch. The
    tests check that both give the same assignment wherever this one answers.
    """
    try_next_on_borrow = cq.flavor_fungibility.when_can_borrow == _TRY_NEXT
    covers_pods = "pods" in rg_by_resource
    quotas, usage_now = node.quotas, node.usage
    fit = _M_FIT
    assigned: dict[FlavorResource, int] = {}
    assignment = Assignment([], 0, assigned, [], fit)
    for i, ps in enumerate(pod_sets):
        count = ps.count
        requests = {res: q * count for res, q in ps.requests.items()}
        if covers_pods:
            requests["pods"] = count
        chosen: dict[str, FlavorChoice] = {}
        resume = last_tried[i] if last_tried is not None and i < len(last_tried) else None
        for res, qty in requests.items():
            rg = rg_by_resource.get(res)
            if rg is None:
                if qty == 0:
                    continue
                return None
            if res in chosen:
                continue
            start = resume.get(res, -1) + 1 if resume is not None else 0
            n_flavors = len(rg.flavors)
            found = False
            for fidx in range(start, n_flavors):
                fname = rg.flavors[fidx].name
                flavor = flavors.get(fname)
                if flavor is None:
                    continue
                if flavor.node_taints and untolerated_taint(flavor, ps) is not None:
                    continue
                if (ps.node_selector or ps.required_affinity) and not matches_node_affinity(
                    flavor, ps
                ):
                    continue
                # The first flavor the pods may use: it must fit every resource of the group.
                tried = -1 if fidx == n_flavors - 1 else fidx
                worst_borrow = 0
                covered = rg.covered_resources
                for r, val in requests.items():
                    if r not in covered:
                        continue
                    fr = (fname, r)
                    val += assigned.get(fr, 0)
                    if val > available_unclamped(node, fr):
                        return None
                    q = quotas.get(fr)
                    if q is not None and usage_now.get(fr, 0) + val <= q.nominal:
                        borrow = 0
                    else:
                        borrow = lowest_subtree_that_fits(node, fr, val)[0]
                        if borrow > worst_borrow:
                            worst_borrow = borrow
                    chosen[r] = FlavorChoice(fname, fit, borrow, tried)
                if worst_borrow and try_next_on_borrow:
                    return None
                found = True
                break
            if not found:
                return None
        assignment.pod_sets.append(PodSetResult(ps.name, count, requests, chosen, []))
        tried_by_res: dict[str, int] = {}
        for res, fc in chosen.items():
            if fc.borrow > assignment.borrowing:
                assignment.borrowing = fc.borrow
            fr = (fc.flavor, res)
            assigned[fr] = assigned.get(fr, 0) + requests[res]
            tried_by_res[res] = fc.tried_idx
        assignment.last_tried.append(tried_by_res)
    return assignment
