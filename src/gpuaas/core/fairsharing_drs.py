"""Dominant Resource Share (DRS): how far a ClusterQueue or Cohort borrows, relative to its weight.

Follows Kueue's ``pkg/cache/scheduler/fair_sharing.go`` exactly, because the fair-sharing order
and every fair-sharing preemption decision compare these values: per resource *name*, what a node
uses above its subtree quota (summed over flavors) is divided by what the parent could ever lend
of that resource (``potentialAvailable`` of the parent, summed over the root's flavors), times
1000; the largest ratio is the node's share, divided by its fair weight. A node that borrows with
weight 0 has an infinite share, and two such nodes compare by their unweighted ratios. This module
only reads the quota tree; it never changes usage and knows nothing of workloads or policies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpuaas.core.cache import CQState
from gpuaas.core.objects import FlavorResource
from gpuaas.core.quota import QuotaNode

DEFAULT_WEIGHT = 1.0


@dataclass(frozen=True, slots=True)
class DRS:
    """One node's share. ``borrowing`` is true even when no ratio could be computed (nothing to
    lend of that resource): Kueue prunes and prefers on ``borrowing``, compares on the ratio."""

    fair_weight: float = DEFAULT_WEIGHT
    unweighted_ratio: float = 0.0
    dominant_resource: str = ""
    borrowing: bool = False
    borrowed_frs: frozenset[FlavorResource] = frozenset()

    def is_zero(self) -> bool:
        return self.unweighted_ratio == 0

    def zero_weight_borrows(self) -> bool:
        return self.fair_weight == 0 and not self.is_zero()

    def weighted_share(self) -> float:
        """Kueue's PreciseWeightedShare: 0 when not borrowing, +inf for weight 0."""
        if self.is_zero():
            return 0.0
        if self.fair_weight == 0:
            return math.inf
        return self.unweighted_ratio / self.fair_weight

    def rounded_weighted_share(self) -> int:
        """``status.fairSharing.weightedShare``: ceil, or MaxInt64 when infinite."""
        if self.zero_weight_borrows():
            return (1 << 63) - 1
        return math.ceil(self.weighted_share())

    def is_borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


NEGATIVE_DRS = DRS(unweighted_ratio=-1.0)  # below every real share: a starting point for maxima


def compare_drs(a: DRS, b: DRS) -> int:
    """Kueue's CompareDRS: -1 when ``a`` should be scheduled first (preempted last)."""
    a_inf, b_inf = a.zero_weight_borrows(), b.zero_weight_borrows()
    if a_inf and b_inf:
        x, y = a.unweighted_ratio, b.unweighted_ratio
    elif a_inf:
        return 1
    elif b_inf:
        return -1
    else:
        x, y = a.weighted_share(), b.weighted_share()
    return (x > y) - (x < y)


class Weights:
    """Fair weights of the tree's nodes: ClusterQueues from their spec, Cohorts from their
    objects (an implicit Cohort, named only by a ClusterQueue, has the default weight 1)."""

    def __init__(
        self, cqs: Mapping[str, CQState], cohort_weights: Mapping[str, float] | None = None
    ) -> None:
        self.cqs = cqs
        self.cohorts = cohort_weights or {}

    def of(self, node: QuotaNode) -> float:
        if node.is_cq:
            cq = self.cqs.get(node.name)
            return cq.spec.fair_weight if cq is not None else DEFAULT_WEIGHT
        return self.cohorts.get(node.name, DEFAULT_WEIGHT)


def lendable(parent: QuotaNode) -> dict[str, int]:
    """Kueue's calculateLendable: per resource name, the parent's potentialAvailable summed over
    every FlavorResource of the root (whose subtree quota lists all of them, zeros included)."""
    out: dict[str, int] = {}
    for fr in parent.root().subtree_quota:
        out[fr[1]] = out.get(fr[1], 0) + parent.potential_available(fr)
    return out


def dominant_resource_share(node: QuotaNode, weight: float) -> DRS:
    """The node's DRS against its current usage (callers simulate an addition first)."""
    if node.parent is None:
        return DRS(fair_weight=weight)
    borrowed: dict[str, int] = {}
    frs: list[FlavorResource] = []
    for fr, quota in node.subtree_quota.items():
        amount = node.usage.get(fr, 0) - quota
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
            frs.append(fr)
    if not borrowed:
        return DRS(fair_weight=weight)
    lend = lendable(node.parent)
    ratio, dominant = 0.0, ""
    for res in sorted(borrowed):  # sorted: ties go to the alphabetically first resource
        lr = lend.get(res, 0)
        if lr > 0:
            r = float(borrowed[res]) * 1000.0 / float(lr)
            if r > ratio:
                ratio, dominant = r, res
    return DRS(weight, ratio, dominant, True, frozenset(frs))


def share_of(node: QuotaNode, weights: Weights) -> DRS:
    return dominant_resource_share(node, weights.of(node))
