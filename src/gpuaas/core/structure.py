"""The cluster's structure: the cohort tree, each ClusterQueue's activeness, the warnings.

Rebuilt by ``Cluster.refresh_structure`` whenever a non-Workload object changed: cohorts and
their parents (cycles broken so that tree walks end), ClusterQueues hung under their cohorts,
subtree quotas recomputed, each ClusterQueue's inactive reason as Kueue's cache gives it (missing
flavors or admission checks, inactive checks, stopped, terminating, a cohort cycle), and the
configuration warnings. Then every inadmissible workload is requeued, as Kueue does on a
ClusterQueue, Cohort, ResourceFlavor or AdmissionCheck change. No I/O; decides no admission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.core.cache import CQState
from gpuaas.core.checks import inactive_reasons
from gpuaas.core.objects import StopPolicy
from gpuaas.core.quota import QuotaNode, quotas_of, recompute_tree

if TYPE_CHECKING:
    from gpuaas.core.cluster import Cluster


def rebuild(c: Cluster) -> None:
    """Rebuild the tree, activeness and warnings of ``c`` from its objects."""
    c._warnings = []
    nodes: dict[str, QuotaNode] = {}
    for name, co in c.cohorts.items():
        node = c.cohort_nodes.get(name) or QuotaNode(name, False, {})
        node.quotas = quotas_of(co.resource_groups)
        nodes[name] = node
    for cq in c.cqs.values():
        if cq.spec.cohort and cq.spec.cohort not in nodes:
            nodes[cq.spec.cohort] = c.cohort_nodes.get(cq.spec.cohort) or QuotaNode(
                cq.spec.cohort, False, {}
            )
    for co in c.cohorts.values():
        if co.parent and co.parent not in nodes:
            nodes[co.parent] = c.cohort_nodes.get(co.parent) or QuotaNode(co.parent, False, {})
    for node in nodes.values():
        node.children = []
        node.parent = None
        if node.name not in c.cohorts:
            node.quotas = {}
    cyclic: set[str] = set()
    for name, co in sorted(c.cohorts.items()):
        if co.parent:
            nodes[name].parent = nodes[co.parent]
            nodes[co.parent].children.append(nodes[name])
    for name in sorted(nodes):
        seen: set[str] = set()
        walk: QuotaNode | None = nodes[name]
        while walk is not None:
            if walk.name in seen:
                cyclic.add(name)
                break
            seen.add(walk.name)
            walk = walk.parent
    for name in cyclic:  # break cycles so that tree walks terminate
        cnode = nodes[name]
        if cnode.parent is not None and cnode in cnode.parent.children:
            cnode.parent.children.remove(cnode)
        cnode.parent = None
    for cq in sorted(c.cqs.values(), key=lambda c: c.name):
        cq.node.parent = None
        if cq.spec.cohort:
            parent = nodes[cq.spec.cohort]
            cq.node.parent = parent
            parent.children.append(cq.node)
    c.cohort_nodes = nodes
    for node in list(nodes.values()) + [cq.node for cq in c.cqs.values()]:
        if node.parent is None:
            recompute_tree(node)
    for cq in c.cqs.values():
        cq.generation += 1
        why = inactive_reason_of(c, cq, cyclic)
        cq.inactive_code, cq.inactive_reason = why if why is not None else ("", None)
        if cq.inactive_reason:
            c._warnings.append(f"ClusterQueue {cq.name} is inactive: {cq.inactive_reason}")
    for (ns, name), lq in sorted(c.local_queues.items()):
        if lq.cluster_queue not in c.cqs:
            c._warnings.append(
                f"LocalQueue {ns}/{name} references ClusterQueue {lq.cluster_queue}, which doesn't exist"
            )
    c._requeue_all()


def inactive_reason_of(c: Cluster, cq: CQState, cyclic: set[str]) -> tuple[str, str] | None:
    """Why ``cq`` is inactive: Kueue's Active=False reason and message, or None if active.
    Terminating alone, as in Kueue's ``inactiveReason``; otherwise every reason that holds, in
    Kueue's order (stopped, missing flavors in the spec's order, the checks'), the first one's
    reason and all their messages joined; a cohort cycle (Kueue keeps such a queue out of its
    snapshot) comes last."""
    if cq.terminating:
        return "Terminating", "terminating"
    why: list[tuple[str, str]] = []
    if cq.spec.stop_policy != StopPolicy.NONE:
        why.append(("Stopped", "is stopped"))
    flavors = [fq.name for rg in cq.spec.resource_groups for fq in rg.flavors]
    missing = [name for name in flavors if name not in c.flavors]
    if missing:
        why.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
    why += inactive_reasons(cq.spec, c.admission_checks, c._checks_active())
    node = cq.node.parent
    while node is not None:
        if node.name in cyclic:
            why.append(("Unknown", f"cohort {node.name} is part of a cycle"))
            break
        node = node.parent
    if not why:
        return None
    return why[0][0], ", ".join(message for _, message in why)


__all__ = ["inactive_reason_of", "rebuild"]
