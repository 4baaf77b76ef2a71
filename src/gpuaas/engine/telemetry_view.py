"""What telemetry reads from the engine's views: queue rows for ``/metrics`` and GPU pinning.

This module turns the engine's read model (``engine.views``) into telemetry's rows: the
``MetricsSnapshot`` rows (ClusterQueue and LocalQueue status, quotas, usage) built at scrape
time, and the GPU pinning (``gpu index -> GpuHolder``), taken from the local runtime when one
runs, otherwise derived deterministically from the admitted workloads' GPU usage. It reads views
only (never the engine's lock or its ``Cluster``), changes no workload and decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from gpuaas.engine.views import HOLDING, ClusterView, WorkloadView
from gpuaas.inventory.gpus import GpuDevice
from gpuaas.runtimes.base import NotEnoughGpus
from gpuaas.runtimes.gpus import GpuAllocator
from gpuaas.telemetry import (
    ClusterQueueStatus,
    GpuHolder,
    LocalQueueStatus,
    LocalQueueUsageRow,
    QuotaRow,
    is_gpu,
)

log = logging.getLogger(__name__)

__all__ = ["HOLDING", "DerivedPinning", "Owners", "cluster_queue_rows", "holders"]

Owners = Mapping[int, tuple[str, str]]
"""GPU index -> (workload key, pod name): ``LocalRuntime.gpu_owners()``."""


# -- queue rows ------------------------------------------------------------------------------
def cluster_queue_rows(view: ClusterView) -> tuple[list[ClusterQueueStatus], list[QuotaRow]]:
    """Per ClusterQueue: pending (active / inadmissible), reserving, admitted, and quotas."""
    statuses: list[ClusterQueueStatus] = []
    quotas: list[QuotaRow] = []
    for cq in view.cluster_queues:
        cohort = cq.cohort or ""
        statuses.append(
            ClusterQueueStatus(
                name=cq.name,
                cohort=cohort,
                pending_active=cq.pending_active,
                pending_inadmissible=cq.pending_inadmissible,
                reserving_active=cq.reserving,
                admitted_active=cq.admitted,
            )
        )
        for rg in cq.spec.resource_groups:
            for fq in rg.flavors:
                for resource, quota in sorted(fq.resources.items()):
                    used = int(cq.usage.get((fq.name, resource), 0))
                    quotas.append(
                        QuotaRow(
                            cluster_queue=cq.name,
                            flavor=fq.name,
                            resource=resource,
                            nominal=quota.nominal,
                            usage=used,
                            reservation=used,
                            cohort=cohort,
                            borrowing_limit=quota.borrowing_limit,
                            lending_limit=quota.lending_limit,
                        )
                    )
    return statuses, quotas


def local_queue_rows(view: ClusterView) -> tuple[list[LocalQueueStatus], list[LocalQueueUsageRow]]:
    """Per LocalQueue: the same counts, and the quota its admitted workloads hold."""
    statuses = [
        LocalQueueStatus(
            lq.namespace,
            lq.name,
            lq.pending_active,
            lq.pending_inadmissible,
            lq.reserving,
            lq.admitted,
        )
        for lq in view.local_queues
    ]
    rows = [
        LocalQueueUsageRow(lq.namespace, lq.name, flavor, resource, qty, qty)
        for lq in view.local_queues
        for (flavor, resource), qty in sorted(lq.usage.items())
    ]
    return statuses, rows


# -- GPU pinning -----------------------------------------------------------------------------
def holders(workloads: Mapping[str, WorkloadView], owners: Owners) -> dict[int | str, GpuHolder]:
    """The runtime's owners as telemetry's pinning; GPUs of unknown workloads are left out."""
    out: dict[int | str, GpuHolder] = {}
    for index, (key, pod) in owners.items():
        w = workloads.get(key)
        if w is not None:
            out[index] = GpuHolder(
                w.namespace, w.name, pod, w.cluster_queue or "", w.workload.queue_name
            )
    return out


def gpu_pods(st: WorkloadView) -> list[tuple[str, int]]:
    """(pod name, GPUs) per pod, named as ``runtimes.podspecs`` names them."""
    if st.admission is None:
        return []
    single = len(st.admission.pod_sets) == 1
    name = st.workload.name
    out: list[tuple[str, int]] = []
    for ps in st.admission.pod_sets:
        total = sum(q for r, q in ps.resource_usage.items() if is_gpu(r))
        if total <= 0 or ps.count <= 0:
            continue
        per_pod = total // ps.count
        for i in range(ps.count):
            pod = f"{name}-{i}" if single else f"{name}-{ps.name}-{i}"
            out.append((pod, per_pod))
    return out


class DerivedPinning:
    """Pinning without a runtime: admitted workloads take the lowest free GPUs, in admission
    order, and keep them until they release their quota, as the local runtime would place them.

    A workload that does not fit the node's GPUs (quota larger than the node) is left unpinned
    and said once in the log: its GPUs are somewhere this node cannot see.
    """

    def __init__(self, gpus: Sequence[GpuDevice]) -> None:
        self._alloc = GpuAllocator(gpus)
        self._pods: dict[str, list[str]] = {}
        self._admitted_at: dict[str, float | None] = {}
        self._unplaced: set[str] = set()

    def owners(self, holding: Sequence[WorkloadView]) -> dict[int, tuple[str, str]]:
        """Pinning of the workloads ``holding`` quota now (``WorkloadView.holds_quota``)."""
        held = {w.key: w for w in holding if w.holds_quota}
        # 1. release workloads that no longer hold quota, or hold it from a new admission
        for key in list(self._pods):
            st = held.get(key)
            if st is None or st.admitted_at != self._admitted_at.get(key):
                for pod in self._pods.pop(key):
                    self._alloc.release(key, pod)
                self._admitted_at.pop(key, None)
        self._unplaced &= set(held)
        # 2. place new holders, oldest admission first
        new = sorted(
            (st for k, st in held.items() if k not in self._pods and k not in self._unplaced),
            key=lambda st: (st.admitted_at or 0.0, st.uid),
        )
        for st in new:
            pods = gpu_pods(st)
            if not pods:
                continue
            try:
                self._alloc.allocate(st.key, pods)
            except NotEnoughGpus as exc:
                self._unplaced.add(st.key)
                log.warning("GPU telemetry: %s; its GPUs are not attributed", exc)
                continue
            self._pods[st.key] = [p for p, _ in pods]
            self._admitted_at[st.key] = st.admitted_at
        return self._alloc.owners()
