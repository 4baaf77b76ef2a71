"""Why a workload is pending and where it stands: the plain-words answers ``explain`` shows.

Reads a ``Cluster``'s queues and reasons; changes nothing and decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpuaas.core.state import Phase

if TYPE_CHECKING:
    from gpuaas.core.cluster import Cluster


def position(c: Cluster, key: str) -> int | None:
    wl = c.workloads.get(key)
    if wl is None or wl.phase != Phase.PENDING or wl.cluster_queue not in c.cqs:
        return None
    order = c.cqs[wl.cluster_queue].queue.ordered()
    return order.index(key) if key in order else None


def positions(c: Cluster) -> dict[str, int]:
    """Every pending workload's 0-based place in its ClusterQueue, each queue ordered once
    (``position`` orders its queue per call: a list of many pending workloads uses this)."""
    out: dict[str, int] = {}
    for cq in c.cqs.values():
        out.update((k, i) for i, k in enumerate(cq.queue.ordered()))
    return out


def why_pending(c: Cluster, key: str, known: Mapping[str, int] | None = None) -> str:
    """``known``: the places from ``positions``, when the caller asks about many workloads."""
    wl = c.workloads.get(key)
    if wl is None:
        return f"workload {key} doesn't exist"
    if wl.phase != Phase.PENDING:
        return f"workload {key} is {wl.phase.value}, not pending"
    if wl.cluster_queue is None:
        return wl.pending_reason or "not routed to a ClusterQueue"
    cq = c.cqs.get(wl.cluster_queue)
    if cq is None:
        return f"ClusterQueue {wl.cluster_queue} doesn't exist"
    if not cq.active:
        return f"ClusterQueue {cq.name} is inactive: {cq.inactive_reason}"
    pos = position(c, key) if known is None else known.get(key)
    where = (
        f"position {pos + 1} of {len(cq.queue)} in ClusterQueue {cq.name}"
        if pos is not None
        else ""
    )
    reason = wl.pending_reason or "waiting for its turn in the queue"
    return f"{reason} ({where})" if where else reason


__all__ = ["position", "positions", "why_pending"]
