"""Fluent builders for core objects, as Kueue's tests build them (``MakeWorkload(...).Priority(10).Obj()``).

Tests state only what matters to a case; everything else takes Kueue's defaults. Quantities are
given in Kubernetes syntax and parsed with the same function the manifests use.
"""

from __future__ import annotations

from gpuaas.core.objects import (
    AdmissionCheck,
    BorrowWithinCohort,
    CheckRule,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityAction,
    LabelSelector,
    LocalQueue,
    PodSet,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    WorkloadPriorityClass,
)
from gpuaas.core.quantity import parse_quantity

Q = str | int


def _quota(res: str, spec: Q | tuple[Q, Q | None] | tuple[Q, Q | None, Q | None]) -> ResourceQuota:
    if not isinstance(spec, tuple):
        return ResourceQuota(parse_quantity(spec, res))
    nominal, *limits = spec
    borrow = limits[0] if limits else None
    lend = limits[1] if len(limits) > 1 else None
    return ResourceQuota(
        parse_quantity(nominal, res),
        None if borrow is None else parse_quantity(borrow, res),
        None if lend is None else parse_quantity(lend, res),
    )


class ClusterQueueBuilder:
    def __init__(self, name: str) -> None:
        self._cq = ClusterQueue(name=name, namespace_selector=LabelSelector())

    def cohort(self, name: str) -> ClusterQueueBuilder:
        self._cq.cohort = name
        return self

    def strict_fifo(self) -> ClusterQueueBuilder:
        self._cq.queueing_strategy = QueueingStrategy.STRICT_FIFO
        return self

    def group(
        self, *flavors: tuple[str, dict[str, Q | tuple[Q, Q | None] | tuple[Q, Q | None, Q | None]]]
    ) -> ClusterQueueBuilder:
        """One resource group: ``("flavor", {"cpu": "6" | (nominal, borrowingLimit[, lendingLimit])})``."""
        fqs = [FlavorQuotas(f, {r: _quota(r, q) for r, q in res.items()}) for f, res in flavors]
        covered = tuple(flavors[0][1]) if flavors else ()
        self._cq.resource_groups.append(ResourceGroup(covered, fqs))
        return self

    def preemption(
        self,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str = "Never",
        threshold: int | None = None,
    ) -> ClusterQueueBuilder:
        self._cq.preemption = Preemption(
            PreemptionPolicy(within),
            PreemptionPolicy(reclaim),
            BorrowWithinCohort(PreemptionPolicy(borrow), threshold),
        )
        return self

    def fungibility(
        self, when_can_borrow: str = "MayStopSearch", when_can_preempt: str = "TryNextFlavor"
    ) -> ClusterQueueBuilder:
        self._cq.flavor_fungibility = FlavorFungibility(
            FungibilityAction(when_can_borrow), FungibilityAction(when_can_preempt)
        )
        return self

    def checks(self, *names: str, on_flavors: tuple[str, ...] = ()) -> ClusterQueueBuilder:
        """AdmissionChecks the ClusterQueue requires (on every flavor unless ``on_flavors``)."""
        self._cq.admission_checks += tuple(CheckRule(n, on_flavors) for n in names)
        return self

    def obj(self) -> ClusterQueue:
        return self._cq


def _res(keyword: str) -> str:
    """``nvidia_com_gpu`` -> ``nvidia.com/gpu``; plain names stay as they are."""
    if "_" not in keyword:
        return keyword
    head, _, tail = keyword.rpartition("_")
    return head.replace("_", ".") + "/" + tail


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._wl = Workload(namespace=namespace, name=name, queue_name="lq", pod_sets=[])

    def queue(self, name: str) -> WorkloadBuilder:
        self._wl.queue_name = name
        return self

    def priority(self, value: int) -> WorkloadBuilder:
        self._wl.priority = value
        return self

    def priority_class(self, name: str) -> WorkloadBuilder:
        self._wl.priority_class = name
        return self

    def pod_set(
        self, name: str = "main", count: int = 1, min_count: int | None = None, **requests: Q
    ) -> WorkloadBuilder:
        reqs = {_res(r): parse_quantity(q, _res(r)) for r, q in requests.items()}
        self._wl.pod_sets.append(PodSet(name=name, count=count, requests=reqs, min_count=min_count))
        return self

    def request(self, **requests: Q) -> WorkloadBuilder:
        return self.pod_set("main", 1, None, **requests)

    def runtime(self, seconds: float) -> WorkloadBuilder:
        self._wl.runtime_seconds = seconds
        return self

    def inactive(self) -> WorkloadBuilder:
        self._wl.active = False
        return self

    def obj(self) -> Workload:
        if not self._wl.pod_sets:
            self._wl.pod_sets.append(PodSet(name="main", count=1, requests={}))
        return self._wl


def admission_check(name: str, controller: str = "example.com/check") -> AdmissionCheck:
    return AdmissionCheck(name, controller)


def flavor(name: str, **labels: str) -> ResourceFlavor:
    return ResourceFlavor(name=name, node_labels=dict(labels))


def local_queue(name: str, cluster_queue: str, namespace: str = "default") -> LocalQueue:
    return LocalQueue(namespace=namespace, name=name, cluster_queue=cluster_queue)


def cohort(name: str, parent: str | None = None) -> Cohort:
    return Cohort(name=name, parent=parent)


def priority_class(name: str, value: int) -> WorkloadPriorityClass:
    return WorkloadPriorityClass(name=name, value=value)
