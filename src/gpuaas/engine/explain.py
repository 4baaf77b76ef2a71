"""``explain``: why a workload is pending, where it stands, and what would have to change.

The reasons come from the core (``Cluster.why_pending``, ``position``); this module only adds the
arithmetic a person would do next: what the workload asks for, what its ClusterQueue has nominally
and in use per flavor, and which admitted workloads hold that quota. It decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import ClusterQueue
from gpuaas.core.quantity import format_quantity
from gpuaas.core.state import Phase

JsonDoc = dict[str, Any]


def _requests(cluster: Cluster, key: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for ps in cluster.workloads[key].workload.pod_sets:
        for res, qty in ps.requests.items():
            total[res] = total.get(res, 0) + qty * ps.count
    return total


def explain_workload(
    cluster: Cluster, key: str, core_cq: Callable[[str], ClusterQueue | None]
) -> JsonDoc:
    st = cluster.workloads[key]
    requests = _requests(cluster, key)
    out: JsonDoc = {
        "workload": key,
        "phase": str(st.phase),
        "priority": st.priority,
        "queue": st.workload.queue_name,
        "clusterQueue": st.cluster_queue,
        "requests": {r: format_quantity(v, r) for r, v in sorted(requests.items())},
        "reason": cluster.why_pending(key),
        "position": None,
        "queueLength": None,
        "ahead": [],
        "quota": [],
        "suggestions": [],
    }
    out["admissionChecks"] = [
        {"name": c.name, "state": c.state.value, "message": c.message}
        for c in st.admission_checks.values()
    ]
    if st.nominated_cluster_names or st.cluster_name:  # MultiKueue: where it may run, or runs
        out["nominatedClusterNames"] = list(st.nominated_cluster_names)
        out["clusterName"] = st.cluster_name
    if st.phase != Phase.PENDING:
        waiting = [c.name for c in st.admission_checks.values() if c.state.value != "Ready"]
        if st.phase == Phase.ADMITTED and waiting:
            out["reason"] = (
                f"quota reserved; waiting for admission check(s) {', '.join(waiting)} "
                "to be Ready before it is Admitted"
            )
            out["suggestions"].append(
                "its check controller decides: a check's state is in status.admissionChecks"
            )
        elif st.cluster_name is not None:
            out["suggestions"].append(
                f"nothing to change: it runs on worker cluster {st.cluster_name} (MultiKueue)"
            )
        elif st.admission is not None:
            out["suggestions"].append(
                f"nothing to change: it holds quota in ClusterQueue {st.admission.cluster_queue}"
            )
        return out
    suggestions: list[str] = out["suggestions"]
    if st.cluster_queue is None:
        suggestions.append(
            f"create LocalQueue {st.workload.namespace}/{st.workload.queue_name} pointing to a "
            "ClusterQueue, or set the workload's queue-name to an existing LocalQueue"
        )
        return out
    cq = core_cq(st.cluster_queue)
    if cq is None:
        suggestions.append(f"create ClusterQueue {st.cluster_queue}")
        return out
    pending = cluster.pending_in(cq.name)
    pos = cluster.position(key)
    if pos is not None:
        out["position"] = pos + 1
        out["queueLength"] = len(pending)
        out["ahead"] = [w.key for w in pending[:pos]]
    warnings = [w for w in cluster.warnings() if cq.name in w]
    suggestions.extend(f"fix: {w}" for w in warnings)
    usage = cluster.cluster_queue_usage(cq.name)
    for group in cq.resource_groups:
        for fq in group.flavors:
            for res, q in fq.resources.items():
                if res not in requests:
                    continue
                used = usage.get((fq.name, res), 0)
                need = requests[res]
                free = max(0, q.nominal - used)
                out["quota"].append(
                    {
                        "flavor": fq.name,
                        "resource": res,
                        "requested": format_quantity(need, res),
                        "nominal": format_quantity(q.nominal, res),
                        "used": format_quantity(used, res),
                        "free": format_quantity(free, res),
                    }
                )
                if need > q.nominal and cq.cohort is None:
                    suggestions.append(
                        f"raise nominalQuota of {res} in flavor {fq.name} of ClusterQueue "
                        f"{cq.name} to at least {format_quantity(need, res)} (it asks for more "
                        "than the queue can ever hold, and the queue has no cohort to borrow from)"
                    )
                elif need > free:
                    holders = [
                        w.key
                        for w in cluster.admitted()
                        if w.admission is not None
                        and w.admission.cluster_queue == cq.name
                        and (fq.name, res) in w.admission.usage()
                    ]
                    short = format_quantity(need - free, res)
                    who = f" (held by {', '.join(sorted(holders))})" if holders else ""
                    suggestions.append(
                        f"{short} more {res} must be free in flavor {fq.name}{who}: wait for "
                        "workloads to finish, raise the quota, borrow from the cohort, or give "
                        "this workload a priority its queue's preemption policy lets preempt with"
                    )
    if pos:
        suggestions.append(f"{pos} workload(s) are ahead of it in ClusterQueue {cq.name}")
    return out
