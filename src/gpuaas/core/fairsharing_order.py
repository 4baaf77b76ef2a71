"""The order in which one cycle's nominated entries are processed when Fair Sharing is on.

Follows Kueue v0.19's ``pkg/scheduler/fair_sharing_iterator.go`` with its default gates
(FairSharingPrioritizeNonBorrowing on, PrioritizePreemptorWorkloads off): for each next entry, a
tournament runs from the root cohort of some remaining entry; at every cohort the children's
nominees are compared by (1) not borrowing from this cohort on the FlavorResources the nominee
requests, (2) the lowest share of the child after hypothetically admitting the nominee, (3) higher
priority, (4) earlier queue order. Entries of ClusterQueues without a cohort come out as they are.
The shares are recomputed at every pop against the live quota tree, which the scheduler changes
as it admits (or reserves for) earlier entries: that is why the order is produced lazily. Each
hypothetical admission is undone at once; this module never leaves usage behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from gpuaas.core.fairsharing_drs import DRS, Weights, compare_drs, share_of
from gpuaas.core.objects import FlavorResource
from gpuaas.core.quota import QuotaNode

if TYPE_CHECKING:
    from gpuaas.core.scheduler import Entry

# Kueue's FairSharingPrioritizeNonBorrowing gate (beta, on by default since v0.17).
PRIORITIZE_NON_BORROWING = True


class FairOrder(list["Entry"]):
    """The cycle's entries. As a list it holds them all (``len``, indexing, ``in``); iterating
    it yields them in tournament order, each chosen only when the previous one has been
    processed. Once a full pass has run, later passes repeat that order."""

    def __init__(self, entries: list[Entry], weights: Weights) -> None:
        super().__init__(entries)
        self._weights = weights
        self._done: list[Entry] | None = None

    def __iter__(self) -> Iterator[Entry]:
        if self._done is not None:
            return iter(self._done)
        return self._lazy()

    def _lazy(self) -> Iterator[Entry]:
        remaining = [self[i] for i in range(len(self))]
        order: list[Entry] = []
        while remaining:
            e = self._pop(remaining)
            order.append(e)
            yield e
        self._done = order

    def _pop(self, remaining: list[Entry]) -> Entry:
        first = remaining[0]
        if first.cq.node.parent is None:
            return remaining.pop(0)
        root = first.cq.node.root()
        by_cq = {id(e.cq.node): e for e in remaining if e.cq.node.root() is root}
        cmp = _Comparer(self._weights)
        cmp.compute(by_cq.values())
        winner = _tournament(root, cmp, by_cq)
        assert winner is not None  # ``first`` is in this tree
        remaining.remove(winner)
        return winner


class _Comparer:
    """Kueue's entryComparer: shares per (cohort, entry) with the entry's usage added."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.drs: dict[tuple[int, int], DRS] = {}
        self.requested: dict[int, Mapping[FlavorResource, int]] = {}

    def compute(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            assert e.assignment is not None
            usage = e.assignment.usage
            node: QuotaNode = e.cq.node
            node.add_usages(usage)
            try:
                self.requested[id(e)] = dict(usage)
                drs = share_of(node, self.weights)
                for ancestor in node.ancestors():
                    self.drs[(id(ancestor), id(e))] = drs
                    drs = share_of(ancestor, self.weights)
            finally:
                node.remove_usages(usage)

    def less(self, a: Entry, b: Entry, cohort: QuotaNode) -> bool:
        a_drs = self.drs[(id(cohort), id(a))]
        b_drs = self.drs[(id(cohort), id(b))]
        if PRIORITIZE_NON_BORROWING:
            a_borrow = a_drs.is_borrowing_on(self.requested[id(a)])
            b_borrow = b_drs.is_borrowing_on(self.requested[id(b)])
            if a_borrow != b_borrow:
                return not a_borrow
        c = compare_drs(a_drs, b_drs)
        if c != 0:
            return c < 0
        if a.state.priority != b.state.priority:
            return a.state.priority > b.state.priority
        return (a.state.queued_at, a.state.uid) < (b.state.queued_at, b.state.uid)


def _tournament(cohort: QuotaNode, cmp: _Comparer, by_cq: dict[int, Entry]) -> Entry | None:
    """Kueue's runTournament: one nominee per cohort, bubbled up to the root."""
    nominees: list[Entry] = []
    for child in cohort.children:
        if not child.is_cq:
            nominee = _tournament(child, cmp, by_cq)
            if nominee is not None:
                nominees.append(nominee)
    for child in cohort.children:
        if child.is_cq and id(child) in by_cq:
            nominees.append(by_cq[id(child)])
    if not nominees:
        return None
    best = nominees[0]
    for current in nominees[1:]:
        if cmp.less(current, best, cohort):
            best = current
    return best


def fair_order(
    entries: list[Entry], *, cohort_weights: Mapping[str, float] | None = None
) -> list[Entry]:
    """The fair-sharing processing order of one cycle's entries (lazy, see ``FairOrder``)."""
    cqs = {e.cq.name: e.cq for e in entries}
    return FairOrder(entries, Weights(cqs, cohort_weights))
