"""/metrics scraped with prometheus-client and parsed back: Kueue and DCGM names, labels, values."""

from __future__ import annotations

import math

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.telemetry import (
    ClusterQueueStatus,
    GpuHolder,
    HoardingAction,
    HoardingRow,
    KueueCounters,
    LocalQueueStatus,
    LocalQueueUsageRow,
    MetricsSnapshot,
    Profile,
    QuotaRow,
    SimulatedCollector,
    attribute,
)
from gpuaas.telemetry.metrics import build_registry

Labels = frozenset[tuple[str, str]]


def scrape(snapshot: MetricsSnapshot) -> dict[str, dict[Labels, float]]:
    """sample name -> {labels: value}."""
    text = generate_latest(build_registry(lambda: snapshot)).decode()
    out: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def L(**labels: str) -> Labels:
    return frozenset(labels.items())


def test_kueue_queue_gauges_use_kueue_names_labels_and_units() -> None:
    snap = MetricsSnapshot(
        cluster_queues=(
            ClusterQueueStatus(
                "team-a-cq",
                "shared",
                pending_active=3,
                pending_inadmissible=1,
                reserving_active=2,
                admitted_active=2,
            ),
        ),
        quotas=(
            QuotaRow(
                "team-a-cq",
                "default-flavor",
                "cpu",
                nominal=8000,
                usage=2500,
                cohort="shared",
                borrowing_limit=4000,
            ),
            QuotaRow(
                "team-a-cq",
                "gpu-flavor",
                "nvidia.com/gpu",
                nominal=1,
                usage=1,
                cohort="shared",
                lending_limit=0,
            ),
            QuotaRow(
                "team-a-cq",
                "default-flavor",
                "memory",
                nominal=32 * 2**30,
                usage=2**30,
                cohort="shared",
            ),
        ),
        local_queues=(LocalQueueStatus("team-a", "lq", pending_active=3, admitted_active=2),),
        local_queue_usage=(LocalQueueUsageRow("team-a", "lq", "gpu-flavor", "nvidia.com/gpu", 1),),
    )
    m = scrape(snap)
    role = {"replica_role": "standalone"}
    assert m["kueue_pending_workloads"][L(cluster_queue="team-a-cq", status="active", **role)] == 3
    assert (
        m["kueue_pending_workloads"][L(cluster_queue="team-a-cq", status="inadmissible", **role)]
        == 1
    )
    assert m["kueue_admitted_active_workloads"][L(cluster_queue="team-a-cq", **role)] == 2
    assert m["kueue_reserving_active_workloads"][L(cluster_queue="team-a-cq", **role)] == 2
    cpu = L(
        cohort="shared", cluster_queue="team-a-cq", flavor="default-flavor", resource="cpu", **role
    )
    gpu = L(
        cohort="shared",
        cluster_queue="team-a-cq",
        flavor="gpu-flavor",
        resource="nvidia.com/gpu",
        **role,
    )
    mem = L(
        cohort="shared",
        cluster_queue="team-a-cq",
        flavor="default-flavor",
        resource="memory",
        **role,
    )
    assert m["kueue_cluster_queue_nominal_quota"][cpu] == 8.0  # cores, as Kueue reports
    assert m["kueue_cluster_queue_resource_usage"][cpu] == 2.5
    assert m["kueue_cluster_queue_borrowing_limit"][cpu] == 4.0
    assert math.isinf(m["kueue_cluster_queue_lending_limit"][cpu])  # unset -> +Inf
    assert m["kueue_cluster_queue_lending_limit"][gpu] == 0.0
    assert math.isinf(m["kueue_cluster_queue_borrowing_limit"][gpu])
    assert m["kueue_cluster_queue_nominal_quota"][mem] == 32 * 2**30
    assert (
        m["kueue_local_queue_pending_workloads"][
            L(name="lq", namespace="team-a", status="active", **role)
        ]
        == 3
    )
    assert (
        m["kueue_local_queue_admitted_active_workloads"][L(name="lq", namespace="team-a", **role)]
        == 2
    )
    lq_gpu = L(
        name="lq", namespace="team-a", flavor="gpu-flavor", resource="nvidia.com/gpu", **role
    )
    assert m["kueue_local_queue_resource_usage"][lq_gpu] == 1


def test_kueue_counters_and_wait_histogram() -> None:
    c = KueueCounters()
    for wait in (0.5, 3.0, 3.0, 100.0, 10**6):
        c.quota_reserved("cq", wait, priority_class="prod")
        c.admitted("cq", wait, priority_class="prod")
    c.evicted("cq", "Preempted", priority_class="prod")
    c.evicted("cq", "IdleGPU")
    c.evicted("cq", "IdleGPU")
    c.preempted("other-cq", "InCohortReclamation")
    c.finished("cq")
    m = scrape(MetricsSnapshot(counters=c.values()))
    role = {"replica_role": "standalone"}
    prod = L(cluster_queue="cq", priority_class="prod", **role)
    assert m["kueue_quota_reserved_workloads_total"][prod] == 5
    assert m["kueue_admitted_workloads_total"][prod] == 5
    assert (
        m["kueue_finished_workloads_total"][L(cluster_queue="cq", priority_class="", **role)] == 1
    )
    ev = m["kueue_evicted_workloads_total"]
    assert (
        ev[
            L(
                cluster_queue="cq",
                reason="Preempted",
                underlying_cause="",
                priority_class="prod",
                **role,
            )
        ]
        == 1
    )
    assert (
        ev[L(cluster_queue="cq", reason="IdleGPU", underlying_cause="", priority_class="", **role)]
        == 2
    )
    assert (
        m["kueue_preempted_workloads_total"][
            L(preempting_cluster_queue="other-cq", reason="InCohortReclamation", **role)
        ]
        == 1
    )
    buckets = m["kueue_admission_wait_time_seconds_bucket"]

    def le(bound: str) -> float:
        return buckets[L(cluster_queue="cq", priority_class="prod", le=bound, **role)]

    assert (
        le("1"),
        le("2.5"),
        le("5"),
        le("80"),
        le("160"),
        le("40960"),
        le("+Inf"),
    ) == (
        1,
        1,
        3,
        3,
        4,
        4,
        5,
    )
    assert m["kueue_admission_wait_time_seconds_count"][prod] == 5
    assert m["kueue_admission_wait_time_seconds_sum"][prod] == pytest.approx(0.5 + 6 + 100 + 10**6)
    assert m["kueue_quota_reserved_wait_time_seconds_count"][prod] == 5


def test_dcgm_gpu_metrics_are_attributed_and_in_dcgm_units() -> None:
    sim = SimulatedCollector(2, hostname="node-1")
    sim.assign(0, "team-a/train", Profile.IDLE)
    samples = sim.sample(600.0)
    held = attribute(samples, {0: GpuHolder("team-a", "train", "train-0", "team-a-cq")})
    m = scrape(MetricsSnapshot(gpus=tuple(held)))
    s0, s1 = samples
    gpu0 = L(
        gpu="0",
        UUID=s0.uuid,
        device="nvidia0",
        modelName=s0.model,
        Hostname="node-1",
        container="",
        namespace="team-a",
        pod="train-0",
        workload="train",
        cluster_queue="team-a-cq",
    )
    gpu1 = L(
        gpu="1",
        UUID=s1.uuid,
        device="nvidia1",
        modelName=s1.model,
        Hostname="node-1",
        container="",
        namespace="",
        pod="",
        workload="",
        cluster_queue="",
    )
    assert m["DCGM_FI_DEV_GPU_UTIL"][gpu0] == s0.utilization_percent
    assert m["DCGM_FI_DEV_GPU_UTIL"][gpu1] == 0.0
    assert m["DCGM_FI_DEV_FB_USED"][gpu0] == s0.memory_used_bytes // 2**20
    assert m["DCGM_FI_DEV_FB_FREE"][gpu0] == (s0.memory_total_bytes - s0.memory_used_bytes) // 2**20
    assert m["DCGM_FI_DEV_FB_USED"][gpu0] + m["DCGM_FI_DEV_FB_FREE"][gpu0] in (
        80 * 1024 - 1,
        80 * 1024,
    )
    assert m["DCGM_FI_DEV_POWER_USAGE"][gpu0] == s0.power_watts
    assert m["DCGM_FI_PROF_SM_OCCUPANCY"][gpu0] == s0.sm_occupancy
    assert m["DCGM_FI_PROF_SM_ACTIVE"][gpu0] == s0.sm_active
    assert m["DCGM_FI_DEV_MEM_COPY_UTIL"][gpu0] == s0.memory_copy_util_percent


def test_hoarding_flag_is_a_metric() -> None:
    row = HoardingRow(
        "team-b", "notebook", "team-b-cq", 2, 0.0, 1800.0, 1.0, HoardingAction.EVICT, "Evicting"
    )
    m = scrape(MetricsSnapshot(hoarding=(row,)))
    labels = L(
        namespace="team-b",
        workload="notebook",
        cluster_queue="team-b-cq",
        action="Evict",
        state="Evicting",
    )
    assert m["gpuaas_hoarding_workload"][labels] == 1
    assert m["gpuaas_hoarding_wasted_gpu_hours"][labels] == 1.0
    assert m["gpuaas_hoarding_idle_gpus"][labels] == 2


def test_values_are_computed_at_scrape_time_on_a_private_registry() -> None:
    state = {"pending": 1}
    registry = build_registry(
        lambda: MetricsSnapshot(
            cluster_queues=(ClusterQueueStatus("cq", pending_active=state["pending"]),)
        )
    )
    first = generate_latest(registry).decode()
    state["pending"] = 7
    second = generate_latest(registry).decode()
    assert (
        'kueue_pending_workloads{cluster_queue="cq",replica_role="standalone",status="active"} 1.0'
        in first
    )
    assert (
        'kueue_pending_workloads{cluster_queue="cq",replica_role="standalone",status="active"} 7.0'
        in second
    )
    assert b"kueue_pending_workloads" not in generate_latest(REGISTRY)
