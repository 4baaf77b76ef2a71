"""One shared copy of equal values that the core keeps per workload for the workload's life.

A server holds every workload (100,000 and more); most share their scheduling-equivalence key
(``queues.shape_of``: about 0.3 KB of tuples) and their admission (``state.Admission``: the
ClusterQueue, flavors, counts and usage, about 0.6 KB), yet each used to keep copies of its own.
A ``Shared`` table hands out the first of equal values instead. Only values the core never
changes in place go through it (shapes are tuples; an admission is replaced, never mutated: see
docs/architecture.md, "The engine's read model"), and the copy handed out is equal to the one
given, so every decision is the same. Tables are bounded: past ``limit`` distinct values, new
ones stay with their workloads only, so distinct values a tenant makes up cannot grow it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from gpuaas.core.state import Admission

T = TypeVar("T")


class Shared:
    """Equal values, one copy each, looked up by a hashable key that identifies the value."""

    __slots__ = ("_kept", "_limit")

    def __init__(self, limit: int = 10_000) -> None:
        self._kept: dict[Hashable, object] = {}
        self._limit = limit

    def shared(self, key: Hashable, value: T) -> T:
        """The kept value for ``key`` (``value`` itself the first time); ``value`` must be what
        ``key`` identifies, and must never be changed in place afterwards."""
        kept = self._kept.get(key)
        if kept is not None:
            return kept  # type: ignore[return-value]
        if len(self._kept) < self._limit:
            self._kept[key] = value
        return value


def admission_key(admission: Admission) -> Hashable:
    """Everything an ``Admission`` holds, in order (dict order included), as a hashable value."""
    return (
        admission.cluster_queue,
        tuple(
            (p.name, tuple(p.flavors.items()), p.count, tuple(p.resource_usage.items()))
            for p in admission.pod_sets
        ),
    )
