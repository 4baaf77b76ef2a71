"""What the dashboard shows, as one JSON document per caller: the summary and the usage history.

``build_summary`` reads the engine's read model once (``Engine.view``: immutable views at one
resourceVersion, never the engine's lock or its ``Cluster``) and shapes it for the page: totals, the cohort tree with per-resource utilization, ClusterQueues with their quotas
and preemption policies, LocalQueues, workloads (state, priority, flavors, preemptor, position,
why pending), flavors with the nodes that serve them (or why not), recent events and the GPU
panel (from the telemetry bridge the server hands in, if telemetry runs). Namespaced things are filtered to the caller's namespaces exactly as the API filters them;
cluster-scoped objects (flavors, the node inventory) are shown to everyone.
``UsageHistory`` is a bounded ring of per-ClusterQueue usage samples for the sparklines. This
module reads and shapes; it never changes the engine or decides anything about admission.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gpuaas.api.auth import Principal
from gpuaas.api.events import event_doc
from gpuaas.core.objects import ClusterQueue, Cohort, ResourceFlavor
from gpuaas.core.quantity import format_quantity
from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.views import ClusterQueueView, ClusterView, WorkloadView, nominal_by_resource
from gpuaas.inventory import NodeInventory, flavor_matches_node
from gpuaas.store import EventRecord
from gpuaas.vocab import render
from gpuaas.vocab.kinds import BY_KIND

JsonDoc = dict[str, Any]
GPU = "nvidia.com/gpu"
RECENT_EVENTS = 60
HISTORY_SAMPLES = 240  # at one sample per change or per few seconds: a quarter hour or more


class UsageHistory:
    """Per ClusterQueue and resource, the last ``HISTORY_SAMPLES`` usage totals over all flavors.

    A sample is taken on every committed change and every few seconds (by the router's sampler);
    identical consecutive samples still count, so the time axis stays even.
    """

    def __init__(self, size: int = HISTORY_SAMPLES) -> None:
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, dict[str, dict[str, int]]]] = deque(maxlen=size)

    def sample(self, engine: Engine, now: float | None = None) -> None:
        point = {cq.name: cq.usage_by_resource() for cq in engine.view().cluster_queues}
        with self._lock:
            self._samples.append((time.time() if now is None else now, point))

    def series(self, cq: str, now: tuple[float, dict[str, int]] | None = None) -> JsonDoc:
        """``{"t": [...], "resources": {res: [...]}}`` for one ClusterQueue, oldest first.

        ``now`` (time, usage) is appended as the newest point, so a sparkline never lags the
        bars next to it while the sampler catches up.
        """
        with self._lock:
            samples = list(self._samples)
        if now is not None:
            samples.append((now[0], {cq: now[1]}))
        resources = sorted({r for _, p in samples for r in p.get(cq, {})})
        return {
            "t": [round(t, 3) for t, _ in samples],
            "resources": {r: [p.get(cq, {}).get(r, 0) for _, p in samples] for r in resources},
        }


def _qty(value: int | None, res: str) -> str | None:
    return None if value is None else format_quantity(value, res)


def _policies(cq: ClusterQueue) -> JsonDoc:
    p = cq.preemption
    return {
        "withinClusterQueue": str(p.within_cluster_queue),
        "reclaimWithinCohort": str(p.reclaim_within_cohort),
        "borrowWithinCohort": {
            "policy": str(p.borrow_within_cohort.policy),
            "maxPriorityThreshold": p.borrow_within_cohort.max_priority_threshold,
        },
        "queueingStrategy": str(cq.queueing_strategy),
        "whenCanBorrow": str(cq.flavor_fungibility.when_can_borrow),
        "whenCanPreempt": str(cq.flavor_fungibility.when_can_preempt),
        "stopPolicy": str(cq.stop_policy),
        "fairWeight": cq.fair_weight,
    }


def _cluster_queues(
    view: ClusterView, history: UsageHistory
) -> tuple[list[JsonDoc], dict[str, ClusterQueue]]:
    specs: dict[str, ClusterQueue] = {}
    out: list[JsonDoc] = []
    for cq in view.cluster_queues:
        specs[cq.name] = cq.spec
        resources = []
        for r in render.quota_summary(cq.spec, dict(cq.usage)):
            res = r["resource"]
            resources.append(
                {
                    **{k: r[k] for k in ("flavor", "resource", "nominal", "usage", "borrowed")},
                    "borrowingLimit": r["borrowingLimit"],
                    "lendingLimit": r["lendingLimit"],
                    "display": {
                        "nominal": _qty(r["nominal"], res),
                        "usage": _qty(r["usage"], res),
                        "borrowed": _qty(r["borrowed"], res),
                        "borrowingLimit": _qty(r["borrowingLimit"], res),
                        "lendingLimit": _qty(r["lendingLimit"], res),
                    },
                }
            )
        out.append(
            {
                "name": cq.name,
                "cohort": cq.cohort,
                "active": cq.active,
                "warnings": list(cq.warnings),
                "pendingWorkloads": cq.pending,
                "admittedWorkloads": cq.reserving,
                "borrowing": any(r["borrowed"] > 0 for r in resources),
                "policies": _policies(cq.spec),
                "resources": resources,
                "history": history.series(cq.name, (time.time(), cq.usage_by_resource())),
            }
        )
    return out, specs


def _cohorts(cohorts: Sequence[Cohort], queues: Sequence[ClusterQueueView]) -> list[JsonDoc]:
    """The cohort tree: each cohort's members, children and utilization per resource.

    A cohort's capacity is its own quota plus its members' nominal quota, recursively; its usage
    is what its member ClusterQueues hold, recursively.
    """
    by_name = {co.name: co for co in cohorts}
    cqs = {q.name: q for q in queues}
    names = set(by_name) | {q.cohort for q in queues if q.cohort}
    names |= {c.parent for c in cohorts if c.parent}
    members = {n: sorted(q.name for q in queues if q.cohort == n) for n in names}
    children = {n: sorted(c.name for c in cohorts if c.parent == n) for n in names}

    def totals(name: str, seen: frozenset[str]) -> tuple[dict[str, int], dict[str, int]]:
        co = by_name.get(name)
        cap = nominal_by_resource(co.resource_groups) if co is not None else {}
        used: dict[str, int] = {}
        for q in members.get(name, []):
            for res, v in nominal_by_resource(cqs[q].spec.resource_groups).items():
                cap[res] = cap.get(res, 0) + v
            for (_, res), v in cqs[q].usage.items():
                used[res] = used.get(res, 0) + v
        for child in children.get(name, []):
            if child in seen:
                continue  # a cycle: the core breaks it too
            c_cap, c_used = totals(child, seen | {child})
            for res, v in c_cap.items():
                cap[res] = cap.get(res, 0) + v
            for res, v in c_used.items():
                used[res] = used.get(res, 0) + v
        return cap, used

    out: list[JsonDoc] = []
    for name in sorted(names):
        co = by_name.get(name)
        cap, used = totals(name, frozenset({name}))
        out.append(
            {
                "name": name,
                "explicit": co is not None,
                "parent": co.parent if co is not None else None,
                "fairWeight": co.fair_weight if co is not None else 1.0,
                "members": members.get(name, []),
                "children": children.get(name, []),
                "resources": [
                    {
                        "resource": res,
                        "capacity": cap.get(res, 0),
                        "usage": used.get(res, 0),
                        "display": {
                            "capacity": format_quantity(cap.get(res, 0), res),
                            "usage": format_quantity(used.get(res, 0), res),
                        },
                    }
                    for res in sorted(set(cap) | set(used))
                ],
            }
        )
    return out


def workload_state(st: WorkloadView) -> str:
    """One word for the badge: Admitted, Pending, Evicted (pending again), Evicting, ..."""
    evicted = st.conditions.get("Evicted")
    if st.phase == Phase.PENDING and evicted is not None and evicted.status == "True":
        return "Evicted"
    return str(st.phase)


def workload_rows(workloads: Iterable[WorkloadView]) -> list[JsonDoc]:
    """One row per workload, for the table (views from ``Engine.view(workloads=True)``)."""
    out: list[JsonDoc] = []
    for st in workloads:
        wl = st.workload
        flavors: dict[str, str] = {}
        usage: dict[str, str] = {}
        if st.admission is not None:
            for ps in st.admission.pod_sets:
                flavors.update(ps.flavors)
            for (_, res), v in st.admission.usage().items():
                usage[res] = format_quantity(v, res)
        requests = st.requests()
        evicted = st.condition("Evicted")
        idle = st.condition("GPUIdle")  # set by the telemetry's hoarding detector
        out.append(
            {
                "key": st.key,
                "namespace": wl.namespace,
                "name": wl.name,
                "kind": wl.kind,
                "queue": wl.queue_name,
                "clusterQueue": st.cluster_queue,
                "state": workload_state(st),
                "phase": str(st.phase),
                "priority": st.priority,
                "priorityClass": wl.priority_class,
                "flavors": flavors,
                "usage": usage,
                "requests": {r: format_quantity(v, r) for r, v in sorted(requests.items())},
                "gpus": requests.get(GPU, 0),
                "preemptedBy": st.preempted_by,
                "preemptionReason": st.preemption_reason,
                "evictionReason": evicted.reason if evicted is not None else None,
                "everPreempted": st.ever_preempted,
                "position": st.position,
                "queueLength": st.queue_length,
                "whyPending": st.why_pending,
                "createdAt": st.created_at,
                "admittedAt": st.admitted_at,
                "requeues": st.requeue_count,
                "idleGpu": idle.message if idle is not None else None,
                "admissionChecks": [
                    {"name": n, "state": state, "message": msg}
                    for n, state, msg in st.admission_checks
                ],
                "awaitingChecks": st.awaiting_checks,
            }
        )
    return out


def _node_matches(rf: ResourceFlavor, nodes: Iterable[NodeInventory]) -> list[JsonDoc]:
    """Per node: could a pod admitted with ``rf`` land there, and if so on which GPUs.

    Only the flavor's own labels, taints and tolerations are weighed; a workload's pod
    tolerations or nodeSelector may narrow (or widen) this further.
    """
    out: list[JsonDoc] = []
    for node in nodes:
        match = flavor_matches_node(rf, node.labels, node.taints)
        out.append(
            {
                "name": node.name,
                "matches": match.ok,
                "reason": match.reason or None,
                "gpus": [{"index": g.index, "uuid": g.uuid, "model": g.model} for g in node.gpus]
                if match.ok
                else [],
            }
        )
    return out


def _flavors(
    flavors: Sequence[ResourceFlavor],
    specs: dict[str, ClusterQueue],
    nodes: Sequence[NodeInventory],
) -> list[JsonDoc]:
    out: list[JsonDoc] = []
    for rf in flavors:
        name = rf.name
        using = sorted(
            q
            for q, s in specs.items()
            for g in s.resource_groups
            for f in g.flavors
            if f.name == name
        )
        resources = sorted(
            {r for s in specs.values() for g in s.resource_groups for f in g.flavors
             if f.name == name for r in f.resources}
        )  # fmt: skip
        out.append(
            {
                "name": name,
                "labels": dict(rf.node_labels),
                "taints": [
                    {"key": t.key, "value": t.value, "effect": t.effect} for t in rf.node_taints
                ],
                "tolerations": [
                    {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                    for t in rf.tolerations
                ],
                "clusterQueues": sorted(set(using)),
                "resources": resources,
                "nodes": _node_matches(rf, nodes),
            }
        )
    return out


def gpu_panel(
    telemetry: TelemetryBridge | None, workloads: list[JsonDoc], visible: Callable[[str], bool]
) -> JsonDoc:
    """GPUs and who holds them: from the telemetry bridge when it runs, else from quota.

    With telemetry on, every GPU of the node is listed with its holder (the runtime's pinning),
    utilization, memory and power, as last sampled. Without it, the panel lists the GPUs implied
    by admitted workloads' ``nvidia.com/gpu`` usage, per flavor, and says so. Holders in
    namespaces the caller cannot read are shown as "(another namespace)".
    """
    # Holders from the runtime's pinning now (samples may be seconds old); metrics as sampled.
    sampled = telemetry.gpus_now() if telemetry is not None else []
    if telemetry is not None and sampled:
        reported: list[JsonDoc] = []
        for a in sampled:
            g, holder = a.sample, a.holder
            key = holder.workload_key if holder is not None else None
            hidden = holder is not None and not visible(holder.namespace)
            reported.append(
                {
                    "node": telemetry.hostname,
                    "index": g.index,
                    "uuid": g.uuid,
                    "model": g.model,
                    "workload": "(another namespace)" if hidden else key,
                    "pod": None if hidden or holder is None else holder.pod,
                    "utilization": round(g.utilization_percent),
                    "memoryUsed": f"{g.memory_used_bytes / 2**30:.1f} / "
                    f"{g.memory_total_bytes / 2**30:.0f} GiB",
                    "power": None if g.power_watts is None else round(g.power_watts),
                }
            )
        return {"source": "telemetry", "note": "", "gpus": reported}
    gpus: list[JsonDoc] = []
    for w in workloads:
        if not holds_gpus(w):
            continue
        flavor = w["flavors"].get(GPU, "?")
        for i in range(int(w["gpus"])):
            gpus.append(
                {
                    "node": flavor,
                    "index": i,
                    "workload": w["key"],
                    "state": w["state"],
                    "model": None,
                }
            )
    return {
        "source": "quota",
        "note": "GPU telemetry is not wired yet: GPUs shown are implied by admitted workloads' "
        "nvidia.com/gpu quota, grouped by flavor.",
        "gpus": gpus,
    }


def _events(engine: Engine, principal: Principal) -> list[JsonDoc]:
    records: list[EventRecord]
    if principal.admin:
        records = engine.store.events(limit=RECENT_EVENTS)
    else:
        records = [
            r
            for r in engine.store.events(limit=1000)
            if r.namespace in principal.namespaces or r.namespace == ""
        ]
    return [event_doc(r) for r in records[-RECENT_EVENTS:]][::-1]


def build_summary(
    engine: Engine,
    principal: Principal,
    history: UsageHistory,
    node: NodeInventory | None = None,
    telemetry: TelemetryBridge | None = None,
) -> JsonDoc:
    """Everything the dashboard's pages show, filtered to what ``principal`` may read.

    ``node`` is the server's own node inventory; without one no flavor lists a matching node.
    ``telemetry`` is the server's telemetry bridge, if telemetry runs (the GPU panel).
    """
    # One consistent read: views at one resourceVersion, "why pending" for the table.
    view = engine.view(workloads=True, namespaces=principal.namespace_filter(), why_pending=True)
    lqs, _ = engine.list_objects(BY_KIND["LocalQueue"], principal.namespace_filter())
    queues = [
        {
            "namespace": d["metadata"]["namespace"],
            "name": d["metadata"]["name"],
            "clusterQueue": d["status"]["clusterQueue"],
            "pending": d["status"]["pendingWorkloads"],
            "admitted": d["status"]["admittedWorkloads"],
        }
        for d in lqs
    ]
    parts = SummaryParts(engine, principal, history, node, telemetry)
    return parts.assemble(view, workload_rows(view.workloads), queues)


class SummaryParts:
    """What a summary is made of besides its workload rows and LocalQueues, for one caller:
    ``build_summary`` reads those whole, the live feed keeps them from the changes it sees
    (``api.dashboard_rows``); both shape the rest here."""

    def __init__(
        self,
        engine: Engine,
        principal: Principal,
        history: UsageHistory,
        node: NodeInventory | None = None,
        telemetry: TelemetryBridge | None = None,
    ) -> None:
        self.engine, self.principal, self.history = engine, principal, history
        self.node, self.telemetry = node, telemetry

    def visible(self, ns: str) -> bool:
        return self.principal.admin or ns in self.principal.namespaces

    def assemble(
        self,
        view: ClusterView,
        workloads: list[JsonDoc],
        local_queues: list[JsonDoc],
        kept: tuple[dict[str, int], list[JsonDoc]] | None = None,
    ) -> JsonDoc:
        """The summary from ``view`` (its queues, cohorts and flavors), the table's rows and the
        LocalQueues (``namespace``, ``name``, ``clusterQueue``, ``pending``, ``admitted``).
        ``kept``: the rows' count per state and the rows holding GPUs (``gpu_holders``), where
        the caller keeps them as rows change (the live feed): else counted here, a pass over
        every row."""
        principal = self.principal
        nodes = [self.node] if self.node is not None else []
        cqs, specs = _cluster_queues(view, self.history)
        cohorts = _cohorts(view.cohorts, view.cluster_queues)
        flavors = _flavors(view.flavors, specs, nodes)
        if kept is None:
            counts = state_counts(workloads)
            holders = gpu_holders(workloads)
        else:
            counts, holders = dict(kept[0]), kept[1]
        gpus = gpu_panel(self.telemetry, holders, self.visible)
        events = _events(self.engine, principal)
        # An Evicted workload is pending again (its badge says both, and the queues count it
        # as pending, as Kueue's pendingWorkloads does): the overview's Pending must agree.
        counts["Pending"] += counts["Evicted"]
        return {
            "apiVersion": "gpuaas.dev/v1alpha1",
            "kind": "DashboardSummary",
            "resourceVersion": str(view.rv),
            "generatedAt": time.time(),
            "principal": {
                "name": principal.name,
                "admin": principal.admin,
                "namespaces": sorted(principal.namespaces),
            },
            "totals": {
                "clusterQueues": len(cqs),
                "cohorts": len(cohorts),
                "localQueues": len(local_queues),
                "flavors": len(flavors),
                "workloads": len(workloads),
                **{s[0].lower() + s[1:]: n for s, n in counts.items()},
                "gpusInUse": len(gpus["gpus"])
                if gpus["source"] == "quota"
                else sum(1 for g in gpus["gpus"] if g.get("workload")),
                "gpuQuota": sum(
                    r["nominal"] for q in cqs for r in q["resources"] if r["resource"] == GPU
                ),
            },
            "cohorts": cohorts,
            "clusterQueues": cqs,
            "localQueues": local_queues,
            "workloads": workloads,
            "flavors": flavors,
            "nodes": [
                {
                    "name": n.name,
                    "labels": dict(n.labels),
                    "gpus": len(n.gpus),
                    "taints": [
                        {"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints
                    ],
                }
                for n in nodes
            ],
            "events": events,
            "gpus": gpus,
        }


_STATES = ("Admitted", "Pending", "Evicted", "Evicting", "Finished", "Inactive")
GPU_HOLDING = ("Admitted", "Evicting")  # the states whose rows' GPUs the quota panel shows


def state_counts(rows: list[JsonDoc]) -> dict[str, int]:
    """How many rows are in each of the summary's states."""
    counts = dict.fromkeys(_STATES, 0)
    for w in rows:
        if w["state"] in counts:
            counts[w["state"]] += 1
    return counts


def holds_gpus(row: JsonDoc) -> bool:
    return bool(row["state"] in GPU_HOLDING and row["gpus"])


def gpu_holders(rows: list[JsonDoc]) -> list[JsonDoc]:
    """The rows whose GPUs the quota panel lists, in their order."""
    return [w for w in rows if holds_gpus(w)]
