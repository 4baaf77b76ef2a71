"""Pending workloads per ClusterQueue: the active heap and the inadmissible set.

Kueue keeps one heap per ClusterQueue ordered by priority, queue-order timestamp and UID
(``pkg/cache/queue/cluster_queue.go``). Under BestEffortFIFO a workload that cannot be admitted
moves to the inadmissible set together with every pending workload of the same scheduling shape
(scheduling-equivalence hashing), and they return only when something in the cohort tree frees
quota. Here a shape is a *group*: the heap holds group heads, so moving a whole shape in or out is
O(1) and a cohort-wide requeue costs one push per shape rather than one per workload.
StrictFIFO keeps a failed head in place; the CQ is then blocked until the state changes.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

from gpuaas.core.objects import Workload

SortKey = tuple[int, float, int]  # (-priority, queue-order timestamp, uid)


def shape_of(wl: Workload, priority: int) -> object:
    """The scheduling-equivalence key (Kueue's scheduling hash inputs)."""
    return (
        priority,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.tolerations,
                ps.required_affinity,
            )
            for ps in wl.pod_sets
        ),
    )


@dataclass(slots=True)
class _Group:
    items: list[tuple[SortKey, str]] = field(default_factory=list)  # heap
    inadmissible: bool = False
    # Set for a workload set aside alone (see ``push``): the shape it goes back to.
    alone_from: Hashable = None


_ALONE = object()  # the first half of an alone workload's group key: never a shape


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue."""

    __slots__ = ("_groups", "_heap", "_where", "blocked_at", "strict")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self._groups: dict[Hashable, _Group] = {}
        self._heap: list[tuple[SortKey, Hashable]] = []
        self._where: dict[str, tuple[Hashable, SortKey]] = {}
        # StrictFIFO: the state version at which the head last failed (None: not blocked).
        self.blocked_at: int | None = None

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def push(
        self,
        key: str,
        sort_key: SortKey,
        shape: Hashable,
        *,
        inadmissible: bool = False,
        alone: bool = False,
    ) -> None:
        """Add a pending workload. A new arrival of an inadmissible shape stays inadmissible.

        ``alone``: an inadmissible workload is set aside by itself, its shape left where it
        is, as Kueue moves a whole equivalence class only for NoFit and PreemptionNoCandidates
        (``requeueIfNotPresent``): a namespace mismatch or a misconfigured workload says
        nothing of the others of its shape. It rejoins its shape when the inadmissible return."""
        if key in self._where:
            self.remove(key)
        if alone and inadmissible and not self.strict:
            self._groups[(_ALONE, key)] = _Group([(sort_key, key)], True, shape)
            self._where[key] = ((_ALONE, key), sort_key)
            return
        group_key = key if self.strict else shape
        group = self._groups.get(group_key)
        if group is None:
            group = self._groups[group_key] = _Group()
            group.inadmissible = inadmissible
        elif inadmissible:
            # The workload itself failed and its group is active: the group goes inadmissible.
            group.inadmissible = True
        heapq.heappush(group.items, (sort_key, key))
        self._where[key] = (group_key, sort_key)
        if not group.inadmissible and group.items[0][1] == key:
            heapq.heappush(self._heap, (sort_key, group_key))

    def remove(self, key: str) -> bool:
        loc = self._where.pop(key, None)
        if loc is None:
            return False
        group_key, sort_key = loc
        group = self._groups[group_key]
        was_head = group.items[0][1] == key
        group.items.remove((sort_key, key))
        if not group.items:
            del self._groups[group_key]
            return True
        heapq.heapify(group.items)
        if was_head and not group.inadmissible:
            heapq.heappush(self._heap, (group.items[0][0], group_key))
        return True

    def _clean_top(self) -> tuple[SortKey, Hashable] | None:
        heap = self._heap
        while heap:
            sort_key, group_key = heap[0]
            group = self._groups.get(group_key)
            if group is not None and not group.inadmissible and group.items[0][0] == sort_key:
                return heap[0]
            heapq.heappop(heap)
        return None

    def head(self) -> str | None:
        top = self._clean_top()
        if top is None:
            return None
        return self._groups[top[1]].items[0][1]

    def pop(self) -> str | None:
        """Take the head out of the queue (the caller pushes it back if it is not admitted)."""
        heap, groups = self._heap, self._groups
        while heap:  # _clean_top(), written out: this runs for every head of every cycle
            sort_key, group_key = heapq.heappop(heap)
            group = groups.get(group_key)
            if group is not None and not group.inadmissible and group.items[0][0] == sort_key:
                break
        else:
            return None
        _, key = heapq.heappop(group.items)
        del self._where[key]
        if group.items:
            heapq.heappush(self._heap, (group.items[0][0], group_key))
        else:
            del self._groups[group_key]
        return key

    def requeue_inadmissible(self) -> bool:
        """Move every inadmissible shape back to the heap; True if anything moved."""
        moved = False
        alone = []
        for group_key, group in self._groups.items():
            if group.inadmissible:
                moved = True
                if group.alone_from is not None:
                    alone.append(group_key)
                    continue
                group.inadmissible = False
                heapq.heappush(self._heap, (group.items[0][0], group_key))
        for group_key in alone:  # back into their shapes, now active
            group = self._groups[group_key]
            for sort_key, key in list(group.items):
                self.push(key, sort_key, group.alone_from)
        return moved

    def keys(self) -> Iterator[str]:
        return iter(self._where)

    def ordered(self) -> list[str]:
        """Every pending workload in queue order (active and inadmissible alike)."""
        return [key for key, _ in sorted(self._where.items(), key=lambda kv: kv[1][1])]

    def is_inadmissible(self, key: str) -> bool:
        loc = self._where.get(key)
        return loc is not None and self._groups[loc[0]].inadmissible

    def active_count(self) -> int:
        return sum(len(g.items) for g in self._groups.values() if not g.inadmissible)
