"""What telemetry reads from the core ``Cluster``: queue rows for ``/metrics`` and GPU pinning.

This module owns two read-only views of engine state for the telemetry bridge: the
``MetricsSnapshot`` rows (ClusterQueue and LocalQueue status, quotas, usage) built at scrape
time, and the GPU pinning (``gpu index -> GpuHolder``), taken from the local runtime when one
runs, otherwise derived deterministically from the admitted workloads' GPU usage. It changes no
workload and decides nothing; the caller holds the engine lock while it reads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from gpuaas.core.cluster import Cluster
from gpuaas.core.state import Phase, WorkloadState
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

HOLDING = (Phase.ADMITTED, Phase.EVICTING)

Owners = Mapping[int, tuple[str, str]]
"""GPU index -> (workload key, pod name): ``LocalRuntime.gpu_owners()``."""


# -- queue rows ------------------------------------------------------------------------------
def cluster_queue_rows(cluster: Cluster) -> tuple[list[ClusterQueueStatus], list[QuotaRow]]:
    """Per ClusterQueue: pending (active / inadmissible), reserving, admitted, and quotas."""
    statuses: list[ClusterQueueStatus] = []
    quotas: list[QuotaRow] = []
    for name in sorted(cluster.cqs):
        cq = cluster.cqs[name]
        cohort = cq.spec.cohort or ""
        active = cq.queue.active_count()
        admitted = sum(1 for w in cq.admitted.values() if w.phase == Phase.ADMITTED)
        statuses.append(
            ClusterQueueStatus(
                name=name,
                cohort=cohort,
                pending_active=active,
                pending_inadmissible=len(cq.queue) - active,
                reserving_active=len(cq.admitted),
                admitted_active=admitted,
            )
        )
        usage = cq.node.usage
        for rg in cq.spec.resource_groups:
            for fq in rg.flavors:
                for resource, quota in sorted(fq.resources.items()):
                    used = int(usage.get((fq.name, resource), 0))
                    quotas.append(
                        QuotaRow(
                            cluster_queue=name,
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


def local_queue_rows(cluster: Cluster) -> tuple[list[LocalQueueStatus], list[LocalQueueUsageRow]]:
    """Per LocalQueue: the same counts, and the quota its admitted workloads hold."""
    counts: dict[tuple[str, str], list[int]] = {lq: [0, 0, 0, 0] for lq in cluster.local_queues}
    usage: dict[tuple[str, str, str, str], int] = {}
    for st in cluster.workloads.values():
        lq = (st.workload.namespace, st.workload.queue_name)
        c = counts.get(lq)
        if c is None:
            continue
        if st.phase == Phase.PENDING:
            cq = cluster.cqs.get(st.cluster_queue or "")
            inadmissible = cq is not None and cq.queue.is_inadmissible(st.key)
            c[1 if inadmissible else 0] += 1
        elif st.phase in HOLDING:
            c[2] += 1
            if st.phase == Phase.ADMITTED:
                c[3] += 1
            for (flavor, resource), qty in st.usage.items():
                k = (*lq, flavor, resource)
                usage[k] = usage.get(k, 0) + qty
    statuses = [
        LocalQueueStatus(ns, name, c[0], c[1], c[2], c[3])
        for (ns, name), c in sorted(counts.items())
    ]
    rows = [
        LocalQueueUsageRow(ns, name, flavor, resource, qty, qty)
        for (ns, name, flavor, resource), qty in sorted(usage.items())
    ]
    return statuses, rows


# -- GPU pinning -----------------------------------------------------------------------------
def holder_of(cluster: Cluster, key: str, pod: str) -> GpuHolder | None:
    st = cluster.workloads.get(key)
    if st is None:
        return None
    wl = st.workload
    return GpuHolder(wl.namespace, wl.name, pod, st.cluster_queue or "", wl.queue_name)


def holders(cluster: Cluster, owners: Owners) -> dict[int | str, GpuHolder]:
    """The runtime's owners as telemetry's pinning; GPUs of unknown workloads are left out."""
    out: dict[int | str, GpuHolder] = {}
    for index, (key, pod) in owners.items():
        h = holder_of(cluster, key, pod)
        if h is not None:
            out[index] = h
    return out


def gpu_pods(st: WorkloadState) -> list[tuple[str, int]]:
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

    def owners(self, cluster: Cluster) -> dict[int, tuple[str, str]]:
        holding = {
            k: st
            for k, st in cluster.workloads.items()
            if st.phase in HOLDING and st.admission is not None
        }
        # 1. release workloads that no longer hold quota, or hold it from a new admission
        for key in list(self._pods):
            st = holding.get(key)
            if st is None or st.admitted_at != self._admitted_at.get(key):
                for pod in self._pods.pop(key):
                    self._alloc.release(key, pod)
                self._admitted_at.pop(key, None)
        self._unplaced &= set(holding)
        # 2. place new holders, oldest admission first
        new = sorted(
            (st for k, st in holding.items() if k not in self._pods and k not in self._unplaced),
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
