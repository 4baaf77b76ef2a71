"""The engine's read model: immutable views of its state, built under its lock, read anywhere.

Everything outside the engine's settle (HTTP routes, the dashboard stream, ``/metrics``, the
runtime and telemetry bridges) reads the engine through these values, never through its lock or
its live ``Cluster``. This module owns the view types and the functions that build them from a
``Cluster``; ``engine.readmodel`` calls the builders under the engine lock and hands the result out.
It must not change the Cluster, decide anything, or keep a reference to a mutable core record.

Shape, and why: each view is a frozen, slotted dataclass; mappings are ``MappingProxyType`` over a
copy made here, sequences are tuples, and conditions are copied (the core updates a Condition in
place). Parsed specs (``Workload``, ``ClusterQueue``, ``Cohort``, ``ResourceFlavor``) and an
``Admission`` are shared, not copied: the core never mutates them once built (an apply or a new
admission replaces the object), and copying 50,000 workloads' pod sets for every dashboard frame
would cost more than the read itself. A builder only computes what its caller asks for: "why
pending" and the queue positions are opt-in, workloads can be narrowed by key, namespace or phase.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import ClusterQueue, Cohort, ResourceFlavor, ResourceGroup, Workload
from gpuaas.core.state import Admission, Condition, Phase, WorkloadState

FlavorResource = tuple[str, str]  # (flavor, resource)
HOLDING = (Phase.ADMITTED, Phase.EVICTING)  # phases that hold quota
_EMPTY: Mapping[FlavorResource, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ConditionView:
    """A copy of one Kueue condition (the core updates its own in place)."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: float

    @property
    def true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """One workload as it stood when the view was built.

    ``workload`` and ``admission`` are shared with the core, which replaces and never mutates
    them. ``why_pending`` is set only when asked for and the workload is pending; ``position``
    and ``queue_length`` (1-based place in its ClusterQueue's pending order) only when asked for.
    """

    key: str
    uid: int
    workload: Workload
    phase: Phase
    cluster_queue: str | None
    priority: int
    admission: Admission | None
    created_at: float
    admitted_at: float | None
    admission_count: int
    requeue_count: int
    preempted_by: str | None
    preemption_reason: str | None
    ever_preempted: bool
    pending_reason: str
    conditions: Mapping[str, ConditionView]
    usage: Mapping[FlavorResource, int]
    why_pending: str | None = None
    position: int | None = None
    queue_length: int | None = None
    # (check name, state, message) of every admission check that applies, in the CQ's order
    admission_checks: tuple[tuple[str, str, str], ...] = ()
    # Kueue's status.requeueState: back-off evictions so far, and when it may be queued again
    requeue_state_count: int = 0
    requeue_at: float | None = None

    @property
    def awaiting_checks(self) -> bool:
        """Holds quota, but not every admission check is Ready: no pod may run yet."""
        return self.phase == Phase.ADMITTED and any(
            s != "Ready" for _, s, _ in self.admission_checks
        )

    @property
    def namespace(self) -> str:
        return self.workload.namespace

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def priority_class(self) -> str | None:
        return self.workload.priority_class

    @property
    def annotations(self) -> Mapping[str, str]:
        return MappingProxyType(self.workload.annotations)

    @property
    def holds_quota(self) -> bool:
        return self.phase in HOLDING and self.admission is not None

    def condition(self, type_: str) -> ConditionView | None:
        """The condition ``type_`` if it is currently True."""
        c = self.conditions.get(type_)
        return c if c is not None and c.true else None

    def requests(self) -> dict[str, int]:
        """Total requests per resource over all pods."""
        out: dict[str, int] = {}
        for ps in self.workload.pod_sets:
            for res, q in ps.requests.items():
                out[res] = out.get(res, 0) + q * ps.count
        return out


@dataclass(frozen=True, slots=True)
class ClusterQueueView:
    """A ClusterQueue: its spec, the quota its workloads hold, and its workload counts.

    ``reserving`` counts workloads holding quota (evicting ones included); ``admitted`` those
    admitted and not being evicted. ``warnings`` are the core's warnings naming this queue.
    """

    name: str
    spec: ClusterQueue
    usage: Mapping[FlavorResource, int]
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    warnings: tuple[str, ...]

    @property
    def cohort(self) -> str | None:
        return self.spec.cohort

    @property
    def pending(self) -> int:
        return self.pending_active + self.pending_inadmissible

    @property
    def active(self) -> bool:
        return not self.warnings

    def usage_by_resource(self) -> dict[str, int]:
        """Usage per resource summed over flavors, zero for every resource it has quota for."""
        out = dict.fromkeys(nominal_by_resource(self.spec.resource_groups), 0)
        for (_, res), used in self.usage.items():
            out[res] = out.get(res, 0) + used
        return out


@dataclass(frozen=True, slots=True)
class LocalQueueView:
    """A LocalQueue and the same counts for its workloads; ``usage`` is the quota they hold."""

    namespace: str
    name: str
    cluster_queue: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    usage: Mapping[FlavorResource, int]


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One consistent read: everything at one resourceVersion ``rv``.

    ``workloads`` and ``local_queues`` are empty unless asked for (``Engine.view``).
    """

    rv: int
    cluster_queues: tuple[ClusterQueueView, ...]
    cohorts: tuple[Cohort, ...]
    flavors: tuple[ResourceFlavor, ...]
    local_queues: tuple[LocalQueueView, ...]
    workloads: tuple[WorkloadView, ...]
    warnings: tuple[str, ...]

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        return next((q for q in self.cluster_queues if q.name == name), None)


def nominal_by_resource(groups: Iterable[ResourceGroup]) -> dict[str, int]:
    """Nominal quota per resource, summed over the flavors of ``groups``."""
    out: dict[str, int] = {}
    for group in groups:
        for fq in group.flavors:
            for res, q in fq.resources.items():
                out[res] = out.get(res, 0) + q.nominal
    return out


# -- builders (the engine calls these under its lock) ----------------------------------------------
def _condition(c: Condition) -> ConditionView:
    return ConditionView(c.type, c.status, c.reason, c.message, c.last_transition_time)


def workload_view(
    cluster: Cluster,
    st: WorkloadState,
    *,
    why: bool = False,
    position: tuple[int, int] | None = None,
    known: Mapping[str, int] | None = None,
) -> WorkloadView:
    """``known``: queue places computed once (``Cluster.positions``) when many are built."""
    return WorkloadView(
        key=st.key,
        uid=st.uid,
        workload=st.workload,
        phase=st.phase,
        cluster_queue=st.cluster_queue,
        priority=st.priority,
        admission=st.admission,
        created_at=st.created_at,
        admitted_at=st.admitted_at,
        admission_count=st.admission_count,
        requeue_count=st.requeue_count,
        preempted_by=st.preempted_by,
        preemption_reason=st.preemption_reason,
        ever_preempted=st.ever_preempted,
        pending_reason=st.pending_reason,
        conditions=MappingProxyType({t: _condition(c) for t, c in st.conditions.items()}),
        usage=MappingProxyType(dict(st.usage)) if st.usage else _EMPTY,
        why_pending=(
            cluster.why_pending(st.key, known) if why and st.phase == Phase.PENDING else None
        ),
        position=position[0] if position else None,
        queue_length=position[1] if position else None,
        admission_checks=tuple(
            (c.name, c.state.value, c.message) for c in st.admission_checks.values()
        ),
        requeue_state_count=st.requeue_state_count,
        requeue_at=st.requeue_at,
    )


def positions(cluster: Cluster) -> dict[str, tuple[int, int]]:
    """(1-based position, queue length) of every pending workload in its ClusterQueue."""
    out: dict[str, tuple[int, int]] = {}
    for cq in cluster.cqs:
        pending = cluster.pending_in(cq)
        for i, w in enumerate(pending):
            out[w.key] = (i + 1, len(pending))
    return out


def workload_views(
    cluster: Cluster,
    *,
    keys: Collection[str] | None = None,
    namespaces: Collection[str] | None = None,
    phases: Collection[Phase] | None = None,
    why_pending: bool = False,
    with_positions: bool = False,
) -> tuple[WorkloadView, ...]:
    """Workloads in creation order, narrowed by ``keys``, ``namespaces`` and ``phases``."""
    if keys is not None:
        states = [st for k in keys if (st := cluster.workloads.get(k)) is not None]
    else:
        states = list(cluster.workloads.values())
    keep: Callable[[WorkloadState], bool] = lambda st: (  # noqa: E731
        (namespaces is None or st.workload.namespace in namespaces)
        and (phases is None or st.phase in phases)
    )
    order = positions(cluster) if with_positions else {}
    # Each queue ordered once for the whole list, not once per pending workload.
    known = cluster.positions() if why_pending else None
    return tuple(
        workload_view(cluster, st, why=why_pending, position=order.get(st.key), known=known)
        for st in sorted(filter(keep, states), key=lambda st: st.uid)
    )


def evicting_by_cluster_queue(cluster: Cluster) -> dict[str, int]:
    """Per ClusterQueue, its workloads being evicted (still holding quota).

    Read from the core's index of evicting workloads (a handful at any time), so that a queue's
    admitted count is its holders less these: no pass over every admitted workload, which made
    each view (the dashboard's sampler, ``/metrics``) cost O(admitted) under the engine lock.
    """
    out: dict[str, int] = {}
    for key, st in cluster.evicting.items():
        cq = cluster.cqs.get(st.cluster_queue or "")
        if cq is not None and key in cq.admitted:
            out[cq.name] = out.get(cq.name, 0) + 1
    return out


def cluster_queue_views(cluster: Cluster) -> tuple[ClusterQueueView, ...]:
    warnings = cluster.warnings()
    evicting = evicting_by_cluster_queue(cluster)
    out: list[ClusterQueueView] = []
    for name in sorted(cluster.cqs):
        cq = cluster.cqs[name]
        active = cq.queue.active_count()
        out.append(
            ClusterQueueView(
                name=name,
                spec=cq.spec,
                usage=MappingProxyType(cluster.cluster_queue_usage(name)),
                pending_active=active,
                pending_inadmissible=len(cq.queue) - active,
                reserving=len(cq.admitted),
                admitted=len(cq.admitted) - evicting.get(name, 0),
                warnings=tuple(w for w in warnings if name in w),
            )
        )
    return tuple(out)


def local_queue_views(cluster: Cluster) -> tuple[LocalQueueView, ...]:
    """Every LocalQueue the core knows, with its workloads' counts and held quota."""
    counts: dict[tuple[str, str], list[int]] = {lq: [0, 0, 0, 0] for lq in cluster.local_queues}
    usage: dict[tuple[str, str], dict[FlavorResource, int]] = {}
    for st in cluster.workloads.values():
        lq = (st.workload.namespace, st.workload.queue_name)
        c = counts.get(lq)
        if c is None:
            continue
        if st.phase == Phase.PENDING:
            cq = cluster.cqs.get(st.cluster_queue or "")
            c[1 if cq is not None and cq.queue.is_inadmissible(st.key) else 0] += 1
        elif st.phase in HOLDING:
            c[2] += 1
            c[3] += st.phase == Phase.ADMITTED
            held = usage.setdefault(lq, {})
            for fr, qty in st.usage.items():
                held[fr] = held.get(fr, 0) + qty
    return tuple(
        LocalQueueView(
            namespace=ns,
            name=name,
            cluster_queue=cluster.local_queues[(ns, name)].cluster_queue,
            pending_active=c[0],
            pending_inadmissible=c[1],
            reserving=c[2],
            admitted=c[3],
            usage=MappingProxyType(usage.get((ns, name), {})),
        )
        for (ns, name), c in sorted(counts.items())
    )


def cluster_view(
    cluster: Cluster,
    rv: int,
    *,
    workloads: bool = False,
    namespaces: Collection[str] | None = None,
    why_pending: bool = False,
    local_queues: bool = False,
    phases: Collection[Phase] | None = None,
) -> ClusterView:
    return ClusterView(
        rv=rv,
        cluster_queues=cluster_queue_views(cluster),
        cohorts=tuple(cluster.cohorts[n] for n in sorted(cluster.cohorts)),
        flavors=tuple(cluster.flavors[n] for n in sorted(cluster.flavors)),
        local_queues=local_queue_views(cluster) if local_queues else (),
        workloads=workload_views(
            cluster,
            namespaces=namespaces,
            phases=phases,
            why_pending=why_pending,
            with_positions=True,
        )
        if workloads
        else (),
        warnings=tuple(cluster.warnings()),
    )
