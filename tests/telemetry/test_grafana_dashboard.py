"""deploy/grafana-gpuaas.json queries only metrics that /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.telemetry import (
    ClusterQueueStatus,
    GpuHolder,
    HoardingAction,
    HoardingRow,
    KueueCounters,
    MetricsSnapshot,
    QuotaRow,
    SimulatedCollector,
    attribute,
)
from gpuaas.telemetry.metrics import build_registry

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-gpuaas.json"
METRIC = re.compile(r"\b(kueue_[a-z_]+|DCGM_FI_[A-Z_]+|gpuaas_[a-z_]+)\b")


def exposed_sample_names() -> set[str]:
    counters = KueueCounters()
    counters.admitted("cq", 1.0)
    counters.evicted("cq", "Preempted")
    counters.preempted("cq", "InClusterQueue")
    sim = SimulatedCollector(1)
    snap = MetricsSnapshot(
        cluster_queues=(ClusterQueueStatus("cq"),),
        quotas=(QuotaRow("cq", "f", "nvidia.com/gpu", 1),),
        counters=counters.values(),
        gpus=tuple(attribute(sim.sample(0.0), {0: GpuHolder("ns", "w", "p", "cq")})),
        hoarding=(
            HoardingRow("ns", "w", "cq", 1, 0.0, 0.0, 0.0, HoardingAction.NOTIFY, "Flagged"),
        ),
    )
    text = generate_latest(build_registry(lambda: snap)).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_dashboard_query_uses_an_exposed_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used, "the dashboard queries nothing"
    assert used - exposed_sample_names() == set()
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Queues (Kueue metrics)", "GPUs (DCGM metrics)", "Hoarding workloads"} <= titles
