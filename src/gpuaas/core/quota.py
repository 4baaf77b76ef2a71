"""The quota tree: ClusterQueues and Cohorts with nominal quota, limits and usage per FlavorResource.

Follows Kueue's resource node arithmetic (``pkg/cache/scheduler/resource_node.go``): a node keeps
its ``localQuota`` (the part above its lending limit) to itself, lends the rest to its parent, and
borrows from the parent at most ``borrowingLimit``. This module only does arithmetic on the tree;
it knows nothing of workloads, queues or policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpuaas.core.objects import FlavorResource, ResourceGroup, ResourceQuota

UNLIMITED = 1 << 62


class QuotaNode:
    """A ClusterQueue or Cohort in the tree. ``usage`` is what is admitted under this node."""

    __slots__ = (
        "_height",
        "children",
        "is_cq",
        "local",
        "name",
        "over",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
    )

    def __init__(self, name: str, is_cq: bool, quotas: dict[FlavorResource, ResourceQuota]):
        self.name = name
        self.is_cq = is_cq
        self.quotas = quotas
        self.subtree_quota: dict[FlavorResource, int] = {}
        # Kueue's localQuota per FlavorResource (subtree quota above the lending limit), kept
        # with subtree_quota by recompute_tree: read on every usage change.
        self.local: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        # Children whose usage is above their subtree quota, per FlavorResource: the only ones a
        # preemption search in a cohort needs to visit (kept up to date by add/remove_usage).
        self.over: dict[FlavorResource, set[QuotaNode]] = {}
        self._height: int | None = None

    def __repr__(self) -> str:
        return f"QuotaNode({'cq' if self.is_cq else 'cohort'} {self.name})"

    # --- per-node quantities -------------------------------------------------------------
    def nominal(self, fr: FlavorResource) -> int:
        q = self.quotas.get(fr)
        return q.nominal if q is not None else 0

    def local_quota(self, fr: FlavorResource) -> int:
        return self.local.get(fr, 0)

    def _compute_local(self) -> None:
        sq = self.subtree_quota
        self.local = {
            fr: max(0, sq.get(fr, 0) - q.lending_limit)
            for fr, q in self.quotas.items()
            if q.lending_limit is not None
        }

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def ancestors(self) -> Iterator[QuotaNode]:
        """Parent to root (Kueue's PathParentToRoot)."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    # --- Kueue's arithmetic -------------------------------------------------------------
    def available(self, fr: FlavorResource) -> int:
        """Capacity usable now, clamped at zero for a ClusterQueue in debt."""
        return max(0, available_unclamped(self, fr))

    def potential_available(self, fr: FlavorResource) -> int:
        """The largest request this node could ever satisfy, ignoring usage."""
        if self.parent is None:
            return self.subtree_quota.get(fr, 0)
        avail = self.local_quota(fr) + self.parent.potential_available(fr)
        q = self.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            avail = min(avail, self.subtree_quota.get(fr, 0) + q.borrowing_limit)
        return avail

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        """Kueue's BorrowingWith: usage plus ``val`` goes above the node's own subtree quota."""
        if self.is_cq:
            return self.nominal(fr) < self.usage.get(fr, 0) + val
        return self.subtree_quota.get(fr, 0) < self.usage.get(fr, 0) + val

    def is_borrowing(self, fr: FlavorResource) -> bool:
        return self.borrowing_with(fr, 0)

    def within_nominal(self, frs: Iterable[FlavorResource]) -> bool:
        """Kueue's IsWithinNominalInResources (against SubtreeQuota)."""
        sq, us = self.subtree_quota, self.usage
        # An explicit loop: this is the hottest check of a preemption search.
        for fr in frs:  # noqa: SIM110
            if sq.get(fr, 0) < us.get(fr, 0):
                return False
        return True

    def _track_over(self, fr: FlavorResource) -> None:
        if self.parent is not None:
            _track_over(self, self.parent, fr, self.usage.get(fr, 0))

    def over_children(self, frs: Iterable[FlavorResource]) -> set[QuotaNode]:
        """Children above their own quota on at least one of ``frs``."""
        out: set[QuotaNode] = set()
        for fr in frs:
            members = self.over.get(fr)
            if members:
                out |= members
        return out

    def add_usage(self, fr: FlavorResource, val: int) -> None:
        # Kueue's addUsage: what the node's local quota cannot hold goes up to its parent.
        node: QuotaNode | None = self
        while node is not None and val != 0:
            usage = node.usage
            cur = usage.get(fr, 0)
            lq = node.local.get(fr, 0)
            local_avail = lq - cur if lq > cur else 0
            usage[fr] = cur + val
            parent = node.parent
            if parent is None:
                return
            _track_over(node, parent, fr, cur + val)
            if val <= local_avail:
                return
            val -= local_avail
            node = parent

    def remove_usage(self, fr: FlavorResource, val: int) -> None:
        node: QuotaNode | None = self
        while node is not None and val != 0:
            usage = node.usage
            cur = usage.get(fr, 0)
            lq = node.local.get(fr, 0)
            stored_in_parent = cur - lq
            usage[fr] = cur - val
            parent = node.parent
            if parent is None:
                return
            _track_over(node, parent, fr, cur - val)
            if stored_in_parent <= 0:
                return
            val = min(val, stored_in_parent)
            node = parent

    def add_usages(self, usage: dict[FlavorResource, int]) -> None:
        for fr, v in usage.items():
            self.add_usage(fr, v)

    def remove_usages(self, usage: dict[FlavorResource, int]) -> None:
        for fr, v in usage.items():
            self.remove_usage(fr, v)

    def fits(self, usage: dict[FlavorResource, int]) -> bool:
        # An explicit loop: checked for every entry of every scheduling cycle.
        for fr, v in usage.items():  # noqa: SIM110
            if v > 0 and v > available_unclamped(self, fr):
                return False
        return True

    def height(self) -> int:
        """Kueue's getNodeHeight for cohorts: 1 for a cohort of CQs, +1 per cohort level.

        The tree's shape changes only in ``recompute_tree``, which caches it."""
        if self._height is None:
            h = min(len(self.children), 1)
            for child in self.children:
                if not child.is_cq:
                    h = max(h, child.height() + 1)
            self._height = h
        return self._height

    def subtree_cqs(self) -> Iterator[QuotaNode]:
        for child in self.children:
            if child.is_cq:
                yield child
            else:
                yield from child.subtree_cqs()


def _track_over(node: QuotaNode, parent: QuotaNode, fr: FlavorResource, used: int) -> None:
    """Keep ``parent.over`` (children above their subtree quota) true for ``node``."""
    if used > node.subtree_quota.get(fr, 0):
        members = parent.over.get(fr)
        if members is None:
            parent.over[fr] = {node}
        else:
            members.add(node)
    else:
        members = parent.over.get(fr)
        if members:
            members.discard(node)


def available_unclamped(node: QuotaNode, fr: FlavorResource) -> int:
    # Written out (no helper calls): this is the innermost loop of flavor assignment.
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    if parent.parent is None:  # a flat cohort: the parent is the root
        parent_available = parent.subtree_quota.get(fr, 0) - parent.usage.get(fr, 0)
    else:
        parent_available = available_unclamped(parent, fr)
    q = node.quotas.get(fr)
    if q is None:  # no quota here: nothing local, no limit on what comes from the parent
        return parent_available
    sq = node.subtree_quota.get(fr, 0)
    used = node.usage.get(fr, 0)
    lq = node.local.get(fr, 0)
    if q.borrowing_limit is not None:
        used_in_parent = used - lq if used > lq else 0
        parent_available = min(sq - lq - used_in_parent + q.borrowing_limit, parent_available)
    return (lq - used if lq > used else 0) + parent_available


def quotas_of(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, ResourceQuota]:
    out: dict[FlavorResource, ResourceQuota] = {}
    for rg in groups:
        for fq in rg.flavors:
            for res, q in fq.resources.items():
                out[(fq.name, res)] = q
    return out


def recompute_tree(root: QuotaNode) -> None:
    """Recompute subtree quotas and cohort usage bottom-up (Kueue's updateCohortResourceNode).

    ClusterQueue usage is kept: it is the sum of the admitted workloads' usage.
    """
    root.over = {}
    root._height = None
    if root.is_cq:
        root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
        root._compute_local()
        return
    root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
    root.usage = {}
    for child in root.children:
        recompute_tree(child)
        for fr, cq in child.subtree_quota.items():
            root.subtree_quota[fr] = root.subtree_quota.get(fr, 0) + cq - child.local_quota(fr)
        for fr, cu in child.usage.items():
            delta = max(0, cu - child.local_quota(fr))
            if delta:
                root.usage[fr] = root.usage.get(fr, 0) + delta
    root._compute_local()
    for child in root.children:
        for fr in set(child.usage) | set(child.subtree_quota):
            child._track_over(fr)


def quantities_fit_in_quota(
    node: QuotaNode, requests: dict[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, v in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + v:
            fits = False
        remaining[fr] = max(0, v - node.local_available(fr))
    return fits, remaining


def lowest_subtree_that_fits(cq: QuotaNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
    """Kueue's FindHeightOfLowestSubtreeThatFits: (borrowing level, may reclaim in hierarchy)."""
    parent = cq.parent
    if parent is None:
        return 0, False
    q = cq.quotas.get(fr)
    if (q.nominal if q is not None else 0) >= cq.usage.get(fr, 0) + val:
        return 0, True  # within the CQ's nominal quota: no borrowing (the common case)
    remaining = val - cq.local_available(fr)
    node: QuotaNode | None = parent
    while node is not None:
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
        node = node.parent
    return cq.root().height(), False
