"""Read-side views of ClusterQueues for the API: status and the per-queue summary.

They read the core's state directly (the parsed spec, the queue, the admitted set), so a list of
ClusterQueues costs one pass over the queues, not one pass over every workload per queue.
Callers hold the engine lock.
"""

from __future__ import annotations

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import ClusterQueue
from gpuaas.core.state import Phase
from gpuaas.store import JsonDoc
from gpuaas.vocab import render


def core_cq(cluster: Cluster, name: str) -> ClusterQueue | None:
    cq = cluster.cqs.get(name)
    return None if cq is None else cq.spec


def counts(cluster: Cluster, name: str) -> tuple[int, int]:
    """(pending, admitted) workloads of one ClusterQueue; admitted includes those evicting."""
    cq = cluster.cqs.get(name)
    return (0, 0) if cq is None else (len(cq.queue), len(cq.admitted))


def cq_status(cluster: Cluster, name: str) -> JsonDoc:
    cq = core_cq(cluster, name)
    if cq is None:
        return {}
    pending, admitted = counts(cluster, name)
    usage = cluster.cluster_queue_usage(name)
    cluster.refresh_structure()  # activeness as of every object applied so far
    state = cluster.cqs[name]
    inactive = None if state.active else (state.inactive_code, state.inactive_reason or "")
    return render.cluster_queue_status(cq, usage, pending, admitted, inactive)


def cluster_queue_summary(cluster: Cluster, names: list[str]) -> list[JsonDoc]:
    """Per ClusterQueue: cohort, quotas and limits, usage, pending and admitted counts."""
    out: list[JsonDoc] = []
    warnings_all = cluster.warnings()
    for name in sorted(names):
        cq = core_cq(cluster, name)
        if cq is None:
            continue
        pending, admitted = counts(cluster, name)
        warnings = [w for w in warnings_all if cq.name in w]
        out.append(
            {
                "name": cq.name,
                "cohort": cq.cohort,
                "active": not warnings,
                "warnings": warnings,
                "pendingWorkloads": pending,
                "admittedWorkloads": admitted,
                "resources": render.quota_summary(cq, cluster.cluster_queue_usage(cq.name)),
            }
        )
    return out


def local_queue_status(cluster: Cluster, namespace: str, name: str, cluster_queue: str) -> JsonDoc:
    """Counts of one LocalQueue's workloads, as Kueue's LocalQueue status shows them."""
    pending = admitted = 0
    for st in cluster.workloads.values():
        wl = st.workload
        if wl.namespace != namespace or wl.queue_name != name:
            continue
        if st.phase == Phase.PENDING:
            pending += 1
        elif st.phase in (Phase.ADMITTED, Phase.EVICTING):
            admitted += 1
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
        "clusterQueue": cluster_queue,
    }
