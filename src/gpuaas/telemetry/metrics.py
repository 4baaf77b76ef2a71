"""The ``/metrics`` exposition: Kueue's queue metrics and DCGM's GPU metrics, computed at scrape.

This module owns metric names, label names and unit conversions, chosen so that existing Kueue
and DCGM-exporter Grafana dashboards read gpuaas unchanged. It owns a dedicated
``CollectorRegistry`` (never the process-global one, so two servers or two tests never share
series) and a custom collector that calls a snapshot provider at every scrape. It decides
nothing and keeps no state: the engine fills ``MetricsSnapshot``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gpuaas.telemetry.samples import MIB, AttributedSample
from gpuaas.telemetry.snapshot import (
    WAIT_BUCKETS,
    HistogramValue,
    MetricsSnapshot,
)

REPLICA_ROLE = "standalone"  # Kueue's value for a single, non-HA manager
SnapshotProvider = Callable[[], MetricsSnapshot]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

DCGM_LABELS = [
    "gpu",
    "UUID",
    "device",
    "modelName",
    "Hostname",
    "container",
    "namespace",
    "pod",
    "workload",
    "cluster_queue",
]


def kueue_quantity(resource: str, value: int | None) -> float:
    """Core units to Kueue's metric units: CPU millicores to cores; ``None`` (unset) to +Inf."""
    if value is None:
        return math.inf
    return value / 1000.0 if resource == "cpu" else float(value)


class GpuaasCollector(Collector):
    def __init__(self, provider: SnapshotProvider) -> None:
        self.provider = provider

    def describe(self) -> list[Metric]:
        # Empty: the registry must not call the provider at registration time.
        return []

    def collect(self) -> Iterator[Metric]:
        snap = self.provider()
        yield from _queue_metrics(snap)
        yield from _counter_metrics(snap)
        yield from _gpu_metrics(snap.gpus)
        yield from _hoarding_metrics(snap)


def build_registry(provider: SnapshotProvider) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuaasCollector(provider))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The body of a ``/metrics`` response (``CONTENT_TYPE``)."""
    return generate_latest(registry)


def _queue_metrics(snap: MetricsSnapshot) -> Iterator[Metric]:
    r = REPLICA_ROLE
    pending = GaugeMetricFamily(
        "kueue_pending_workloads",
        "The number of pending workloads, per 'cluster_queue' and 'status'.",
        labels=["cluster_queue", "status", "replica_role"],
    )
    reserving = GaugeMetricFamily(
        "kueue_reserving_active_workloads",
        "The number of Workloads that are reserving quota, per 'cluster_queue'",
        labels=["cluster_queue", "replica_role"],
    )
    admitted = GaugeMetricFamily(
        "kueue_admitted_active_workloads",
        "The number of admitted Workloads that are active, per 'cluster_queue'",
        labels=["cluster_queue", "replica_role"],
    )
    for cq in snap.cluster_queues:
        pending.add_metric([cq.name, "active", r], cq.pending_active)
        pending.add_metric([cq.name, "inadmissible", r], cq.pending_inadmissible)
        reserving.add_metric([cq.name, r], cq.reserving_active)
        admitted.add_metric([cq.name, r], cq.admitted_active)
    yield from (pending, reserving, admitted)

    quota_labels = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]
    families = {
        "nominal": GaugeMetricFamily(
            "kueue_cluster_queue_nominal_quota",
            "Reports the cluster_queue's resource nominal quota within all the flavors",
            labels=quota_labels,
        ),
        "usage": GaugeMetricFamily(
            "kueue_cluster_queue_resource_usage",
            "Reports the cluster_queue's total resource usage within all the flavors",
            labels=quota_labels,
        ),
        "reservation": GaugeMetricFamily(
            "kueue_cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors",
            labels=quota_labels,
        ),
        "borrowing": GaugeMetricFamily(
            "kueue_cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors. "
            "If borrowingLimit is unset, this metric reports +Inf.",
            labels=quota_labels,
        ),
        "lending": GaugeMetricFamily(
            "kueue_cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors. "
            "If lendingLimit is unset, this metric reports +Inf.",
            labels=quota_labels,
        ),
    }
    for q in snap.quotas:
        labels = [q.cohort, q.cluster_queue, q.flavor, q.resource, r]
        families["nominal"].add_metric(labels, kueue_quantity(q.resource, q.nominal))
        families["usage"].add_metric(labels, kueue_quantity(q.resource, q.usage))
        families["reservation"].add_metric(labels, kueue_quantity(q.resource, q.reservation))
        families["borrowing"].add_metric(labels, kueue_quantity(q.resource, q.borrowing_limit))
        families["lending"].add_metric(labels, kueue_quantity(q.resource, q.lending_limit))
    yield from families.values()

    lq_pending = GaugeMetricFamily(
        "kueue_local_queue_pending_workloads",
        "The number of pending workloads, per 'local_queue' and 'status'.",
        labels=["name", "namespace", "status", "replica_role"],
    )
    lq_reserving = GaugeMetricFamily(
        "kueue_local_queue_reserving_active_workloads",
        "The number of Workloads that are reserving quota, per 'localQueue'",
        labels=["name", "namespace", "replica_role"],
    )
    lq_admitted = GaugeMetricFamily(
        "kueue_local_queue_admitted_active_workloads",
        "The number of admitted Workloads that are active, per 'localQueue'",
        labels=["name", "namespace", "replica_role"],
    )
    for lq in snap.local_queues:
        lq_pending.add_metric([lq.name, lq.namespace, "active", r], lq.pending_active)
        lq_pending.add_metric([lq.name, lq.namespace, "inadmissible", r], lq.pending_inadmissible)
        lq_reserving.add_metric([lq.name, lq.namespace, r], lq.reserving_active)
        lq_admitted.add_metric([lq.name, lq.namespace, r], lq.admitted_active)
    lq_usage_labels = ["name", "namespace", "flavor", "resource", "replica_role"]
    lq_usage = GaugeMetricFamily(
        "kueue_local_queue_resource_usage",
        "Reports the localQueue's total resource usage within all the flavors",
        labels=lq_usage_labels,
    )
    lq_reservation = GaugeMetricFamily(
        "kueue_local_queue_resource_reservation",
        "Reports the localQueue's total resource reservation within all the flavors",
        labels=lq_usage_labels,
    )
    for u in snap.local_queue_usage:
        labels = [u.name, u.namespace, u.flavor, u.resource, r]
        lq_usage.add_metric(labels, kueue_quantity(u.resource, u.usage))
        lq_reservation.add_metric(labels, kueue_quantity(u.resource, u.reservation))
    yield from (lq_pending, lq_reserving, lq_admitted, lq_usage, lq_reservation)


def _histogram(name: str, doc: str, values: dict[tuple[str, str], HistogramValue]) -> Metric:
    family = HistogramMetricFamily(
        name, doc, labels=["cluster_queue", "priority_class", "replica_role"]
    )
    for (cq, pc), h in sorted(values.items()):
        buckets = [(_le(bound), float(n)) for bound, n in zip(WAIT_BUCKETS, h.buckets, strict=True)]
        buckets.append(("+Inf", float(h.count)))
        family.add_metric([cq, pc, REPLICA_ROLE], buckets, h.sum)
    return family


def _le(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) else repr(bound)


def _counter_metrics(snap: MetricsSnapshot) -> Iterator[Metric]:
    c, r = snap.counters, REPLICA_ROLE
    cq_pc = ["cluster_queue", "priority_class", "replica_role"]
    per_cq: list[CounterMetricFamily] = []
    for name, what, counts in (
        ("kueue_quota_reserved_workloads", "quota reserved", c.quota_reserved),
        ("kueue_admitted_workloads", "admitted", c.admitted),
        ("kueue_finished_workloads", "finished", c.finished),
    ):
        family = CounterMetricFamily(
            name, f"The total number of {what} workloads per 'cluster_queue'", labels=cq_pc
        )
        for (cq, pc), n in sorted(counts.items()):
            family.add_metric([cq, pc, r], n)
        per_cq.append(family)
    evicted = CounterMetricFamily(
        "kueue_evicted_workloads",
        "The number of evicted workloads per 'cluster_queue'",
        labels=["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
    )
    for (cq, reason, cause, pc), n in sorted(c.evicted.items()):
        evicted.add_metric([cq, reason, cause, pc, r], n)
    preempted = CounterMetricFamily(
        "kueue_preempted_workloads",
        "The number of preempted workloads per 'preempting_cluster_queue'",
        labels=["preempting_cluster_queue", "reason", "replica_role"],
    )
    for (cq, reason), n in sorted(c.preempted.items()):
        preempted.add_metric([cq, reason, r], n)
    yield from (*per_cq, evicted, preempted)
    yield _histogram(
        "kueue_admission_wait_time_seconds",
        "The time between a workload was created or requeued until admission, per 'cluster_queue'",
        c.admission_wait,
    )
    yield _histogram(
        "kueue_quota_reserved_wait_time_seconds",
        "The time between a workload was created or requeued until it got quota reservation, "
        "per 'cluster_queue'",
        c.quota_reserved_wait,
    )


def _gpu_metrics(gpus: tuple[AttributedSample, ...]) -> Iterator[Metric]:
    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=DCGM_LABELS)

    util = gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
    fb_used = gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
    fb_free = gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
    power = gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
    sm_active = gauge(
        "DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."
    )
    sm_occ = gauge("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.")
    copy = gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).")
    for item in gpus:
        s, h = item.sample, item.holder
        labels = [
            str(s.index),
            s.uuid,
            f"nvidia{s.index}",
            s.model,
            s.hostname,
            "",
            h.namespace if h else "",
            h.pod if h else "",
            h.workload if h else "",
            h.cluster_queue if h else "",
        ]
        util.add_metric(labels, s.utilization_percent)
        fb_used.add_metric(labels, float(s.memory_used_bytes // MIB))
        fb_free.add_metric(labels, float(s.memory_free_bytes // MIB))
        if s.power_watts is not None:
            power.add_metric(labels, s.power_watts)
        if s.sm_active is not None:
            sm_active.add_metric(labels, s.sm_active)
        if s.sm_occupancy is not None:
            sm_occ.add_metric(labels, s.sm_occupancy)
        if s.memory_copy_util_percent is not None:
            copy.add_metric(labels, s.memory_copy_util_percent)
    yield from (util, fb_used, fb_free, power, sm_active, sm_occ, copy)


def _hoarding_metrics(snap: MetricsSnapshot) -> Iterator[Metric]:
    labels = ["namespace", "workload", "cluster_queue", "action", "state"]
    flagged = GaugeMetricFamily(
        "gpuaas_hoarding_workload",
        "1 for each workload flagged for holding idle GPUs (gpuaas; no Kueue or DCGM equivalent).",
        labels=labels,
    )
    wasted = GaugeMetricFamily(
        "gpuaas_hoarding_wasted_gpu_hours",
        "GPU-hours wasted in the current idle stretch of a flagged workload.",
        labels=labels,
    )
    idle_gpus = GaugeMetricFamily(
        "gpuaas_hoarding_idle_gpus",
        "GPUs held idle by a flagged workload.",
        labels=labels,
    )
    for row in snap.hoarding:
        values = [row.namespace, row.workload, row.cluster_queue, row.action.value, row.state]
        flagged.add_metric(values, 1.0)
        wasted.add_metric(values, row.wasted_gpu_hours)
        idle_gpus.add_metric(values, float(row.gpus))
    yield from (flagged, wasted, idle_gpus)
