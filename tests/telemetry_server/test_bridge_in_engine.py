"""The telemetry bridge inside a real Engine (SQLite store) on a controlled clock.

Hoarding goes from flag to eviction in virtual time with the simulated collector, accounting is
checked against hand-computed totals across a preemption and a restart, and ``/metrics`` is
rendered from the engine's state and parsed with prometheus-client's parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from telemetry_docs import (
    TIERED,
    cluster_queue,
    configuration,
    flavor,
    local_queue,
    namespace,
    priority_class,
    workload,
)

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.views import WorkloadView
from gpuaas.inventory.gpus import parse_fake_gpus
from gpuaas.store import open_store
from gpuaas.telemetry import GroupBy, SqliteUsageStore
from gpuaas.telemetry.metrics import build_registry, render
from gpuaas.vocab.kinds import BY_KIND, CONFIGURATION
from gpuaas.vocab.render import rfc3339

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def apply(e: Engine, *docs: dict[str, Any]) -> None:
    for d in docs:
        kind = BY_KIND[d["kind"]]
        e.create(kind, d["metadata"].get("namespace"), d)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(tmp_path: Path, clock: Clock) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store, clock=clock)
    try:
        yield e
    finally:
        e.close()
        store.close()


def bridge_for(e: Engine, usage_db: Path) -> TelemetryBridge:
    return TelemetryBridge(
        gpus=parse_fake_gpus("4"), usage_store=SqliteUsageStore(usage_db), hostname="node-1"
    ).attach(e)


def run_until(e: Engine, clock: Clock, end: float, step: float = 15.0) -> None:
    while clock.t + step <= end:
        clock.t += step
        e.tick()


def wl(e: Engine, key: str) -> WorkloadView:
    w = e.workload(key)
    assert w is not None, key
    return w


def conditions(e: Engine, key: str) -> dict[str, tuple[str, str]]:
    st = wl(e, key)
    return {c.type: (c.status, c.reason) for c in st.conditions.values()}


# -- hoarding ---------------------------------------------------------------------------------
def test_idle_best_effort_is_evicted_with_reason_idle_gpu_and_reserved_is_only_flagged(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    e = engine
    bridge = bridge_for(e, tmp_path / "usage.db")
    apply(e, TIERED, namespace("team-a"), namespace("team-b"), flavor())
    apply(e, cluster_queue("team-a-cq", 2), cluster_queue("team-b-cq", 2))
    apply(e, local_queue("team-a", "lq", "team-a-cq"), local_queue("team-b", "lq", "team-b-cq"))
    apply(
        e,
        workload("team-a", "serve", queue="lq", gpus=1, profile="idle"),
        workload("team-a", "train", queue="lq", gpus=1, profile="busy"),
        workload("team-b", "notebook", queue="lq", gpus=2, profile="idle"),
    )
    assert all(w.phase == Phase.ADMITTED for w in e.workloads())
    e.tick()  # first sample at T0: the idle stretch starts
    run_until(e, clock, T0 + 585)
    assert "GPUIdle" not in conditions(e, "team-a/serve")
    assert bridge.offenders(clock.t) == []

    clock.t = T0 + 600  # the whole 10-minute window below 5 %
    e.tick()
    # reserved tier: flagged (condition, event, metric), never evicted
    assert conditions(e, "team-a/serve")["GPUIdle"] == ("True", "IdleGPU")
    assert wl(e, "team-a/serve").admission_count == 1
    # the flagged holder first, then the one evicted for it (below)
    row, evicted_row = bridge.offenders(clock.t)
    assert evicted_row.workload == "notebook"
    assert (row.namespace, row.workload, row.action.value, row.state) == (
        "team-a",
        "serve",
        "Notify",
        "Flagged",
    )
    assert row.wasted_gpu_hours == pytest.approx(600 / 3600)
    # best-effort tier: evicted with reason IdleGPU and requeued with Kueue's back-off (60 s
    # after its first idle eviction), ordered by its eviction time
    nb = conditions(e, "team-b/notebook")
    assert nb["Requeued"] == ("True", "IdleGPU")
    assert nb["Evicted"] == ("True", "IdleGPU")
    assert (
        wl(e, "team-b/notebook")
        .conditions["Evicted"]
        .message.startswith("evicted: 2 idle GPU(s) held for 600s")
    )
    assert "idle eviction 1, requeued after 60s back-off" in (
        wl(e, "team-b/notebook").conditions["Evicted"].message
    )
    assert nb["GPUIdle"] == ("False", "GPUsReleased")
    st = wl(e, "team-b/notebook")
    assert st.phase == Phase.PENDING and st.requeue_at == T0 + 660
    assert st.requeue_count == 1 and st.admission_count == 1 and st.requeue_state_count == 1
    assert not st.ever_preempted and st.preempted_by is None  # not a preemption
    assert "GPUIdle" not in conditions(e, "team-a/train")  # busy: never flagged
    rows = {r.workload: r for r in bridge.offenders(clock.t)}
    backing_off = rows["notebook"]
    assert (backing_off.state, backing_off.idle_evictions, backing_off.requeue_at) == (
        "BackingOff",
        1,
        T0 + 660,
    )
    assert (rows["serve"].state, rows["serve"].idle_evictions) == ("Flagged", 0)
    e.committer.submit([]).result(timeout=30)  # tick commits in the background: let it land
    reasons = [(ev.reason, ev.object) for ev in e.events(namespace="team-b")]
    assert ("EvictedDueToIdleGPU", "Workload team-b/notebook") in reasons
    assert ("Requeued", "Workload team-b/notebook") in reasons
    assert ("IdleGPU", "Workload team-a/serve") in [
        (ev.reason, ev.object) for ev in e.events(namespace="team-a")
    ]
    counters = bridge.counters.values()
    assert counters.evicted == {("team-b-cq", "IdleGPU", "", ""): 1}
    assert counters.quota_reserved[("team-b-cq", "")] == 1
    # the persisted Workload status carries the conditions and Kueue's requeueState
    doc = e.get(BY_KIND["Workload"], "team-b", "notebook")
    by_type = {c["type"]: c for c in doc["status"]["conditions"]}
    assert by_type["Requeued"]["reason"] == "IdleGPU"
    assert by_type["GPUIdle"]["reason"] == "GPUsReleased"
    assert doc["status"]["requeueState"]["count"] == 1
    assert doc["status"]["requeueState"]["requeueAt"] == rfc3339(T0 + 660)
    serve = e.get(BY_KIND["Workload"], "team-a", "serve")["status"]["conditions"]
    assert {c["type"]: c["reason"] for c in serve}["GPUIdle"] == "IdleGPU"

    # its quota is free, yet it stays out until the back-off ends
    run_until(e, clock, T0 + 645)
    assert wl(e, "team-b/notebook").phase == Phase.PENDING
    clock.t = T0 + 660
    e.tick()
    assert wl(e, "team-b/notebook").admission_count == 2
    # the back-off is over: requeueState keeps the count, no longer a requeueAt
    state = e.get(BY_KIND["Workload"], "team-b", "notebook")["status"]["requeueState"]
    assert state == {"count": 1}
    # readmitted and still idle: a fresh window from the first sample after readmission
    # (T0 + 675), so evicted again at T0 + 1275, now for 120 s
    run_until(e, clock, T0 + 1260)
    assert wl(e, "team-b/notebook").phase == Phase.ADMITTED
    clock.t = T0 + 1275
    e.tick()
    st = wl(e, "team-b/notebook")
    assert st.phase == Phase.PENDING and st.requeue_at == T0 + 1275 + 120
    assert st.requeue_state_count == 2
    assert bridge.counters.values().evicted[("team-b-cq", "IdleGPU", "", "")] == 2


def test_metrics_rendered_from_engine_state_parse_with_kueue_and_dcgm_labels(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    e = engine
    bridge = bridge_for(e, tmp_path / "usage.db")
    apply(e, TIERED, namespace("team-a"), flavor(), cluster_queue("team-a-cq", 2, cohort="org"))
    apply(e, local_queue("team-a", "lq", "team-a-cq"))
    apply(
        e,
        workload("team-a", "serve", queue="lq", gpus=2, profile="idle"),
        workload("team-a", "wait", queue="lq", gpus=2),
    )
    e.tick()
    registry = build_registry(lambda: bridge.snapshot(clock.t))
    families = {f.name: f for f in text_string_to_metric_families(render(registry).decode())}

    def samples(name: str) -> list[tuple[str, dict[str, str], float]]:
        return [(s.name, s.labels, s.value) for s in families[name].samples]

    pending = {s[1]["status"]: s[2] for s in samples("kueue_pending_workloads")}
    assert pending == {"active": 0.0, "inadmissible": 1.0}
    assert samples("kueue_admitted_active_workloads")[0][1]["cluster_queue"] == "team-a-cq"
    assert samples("kueue_admitted_active_workloads")[0][2] == 1.0
    quota = {
        s[1]["resource"]: (s[1]["cohort"], s[1]["flavor"], s[2])
        for s in samples("kueue_cluster_queue_nominal_quota")
    }
    assert quota["nvidia.com/gpu"] == ("org", "h100", 2.0)
    assert quota["cpu"] == ("org", "h100", 16.0)
    usage = {s[1]["resource"]: s[2] for s in samples("kueue_cluster_queue_resource_usage")}
    assert usage["nvidia.com/gpu"] == 2.0
    lq = samples("kueue_local_queue_pending_workloads")
    assert {(s[1]["namespace"], s[1]["name"], s[1]["status"], s[2]) for s in lq} == {
        ("team-a", "lq", "active", 0.0),
        ("team-a", "lq", "inadmissible", 1.0),
    }
    # kueue_quota_reserved_workloads_total: counter family name drops the suffix
    reserved = samples("kueue_quota_reserved_workloads")
    assert [(s[0], s[2]) for s in reserved] == [("kueue_quota_reserved_workloads_total", 1.0)]
    util = samples("DCGM_FI_DEV_GPU_UTIL")
    assert len(util) == 4
    held = sorted((s[1]["gpu"], s[1]["pod"], s[1]["workload"]) for s in util if s[1]["pod"])
    assert held == [("0", "serve-0", "serve"), ("1", "serve-0", "serve")]
    for _, labels, value in util:
        assert labels["UUID"].startswith("GPU-fake-")
        assert labels["Hostname"] == "node-1"
        if labels["workload"] == "serve":
            assert labels["namespace"] == "team-a" and labels["cluster_queue"] == "team-a-cq"
            assert value < 5.0
    for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE"):
        assert len(samples(name)) == 4
    assert len(samples("DCGM_FI_PROF_SM_OCCUPANCY")) == 4


# -- accounting -------------------------------------------------------------------------------
def _preemption_story(e: Engine, clock: Clock) -> None:
    """dev (team-b, 4 GPUs, low) from T0; prod (team-a, 4 GPUs, high) preempts it at +1h and
    finishes at +1.5h; dev is readmitted after Kueue's 1 s requeue batch, at +1.5h + 1 s, and
    still runs."""
    prices = {"h100": {"gpuHour": 2.5, "cpuCoreHour": 0.04, "memoryGBHour": 0.005}}
    apply(e, configuration({"prices": prices, "currency": "EUR"}))
    apply(e, namespace("team-a"), namespace("team-b"), flavor())
    apply(e, priority_class("low", 1), priority_class("high", 100))
    apply(e, cluster_queue("shared-cq", 4, preempt=True))
    apply(e, local_queue("team-a", "lq", "shared-cq"), local_queue("team-b", "lq", "shared-cq"))
    dev = workload("team-b", "dev", queue="lq", gpus=4, cpu=4, memory="16Gi", priority=("low", 1))
    apply(e, dev)
    clock.t = T0 + 3600
    prod = workload(
        "team-a", "prod", queue="lq", gpus=4, cpu=2, memory="8Gi", priority=("high", 100)
    )
    apply(e, prod)
    assert wl(e, "team-b/dev").phase == Phase.PENDING
    assert wl(e, "team-a/prod").phase == Phase.ADMITTED
    clock.t = T0 + 5400
    assert e.finish("team-a", "prod")
    assert wl(e, "team-b/dev").phase == Phase.PENDING  # waits for the requeue batch
    clock.t = T0 + READMIT
    e.tick()
    assert wl(e, "team-b/dev").phase == Phase.ADMITTED


READMIT = 5401  # seconds after T0: prod finished at +1.5h, dev returns 1 s later


def _usage(gpu: float, cpu: float, mem: float, hours: float) -> tuple[float, ...]:
    """(GPU, CPU core, memory GB) hours and their cost at the story's prices."""
    g, c, m = gpu * hours, cpu * hours, mem * hours
    return tuple(round(v, 6) for v in (g, c, m, g * 2.5 + c * 0.04 + m * 0.005))


def _totals(bridge: TelemetryBridge, by: GroupBy, **kw: float) -> dict[str, tuple[float, ...]]:
    rows = bridge.usage(by=by, since=kw.get("since"), until=kw["until"])
    return {
        r.group: tuple(
            round(v, 6) for v in (r.gpu_hours, r.cpu_core_hours, r.memory_gb_hours, r.cost)
        )
        for r in rows
    }


def test_usage_across_a_preemption_matches_hand_computed_totals_and_survives_restart(
    tmp_path: Path, clock: Clock
) -> None:
    url = f"sqlite:///{tmp_path / 'gpuaas.db'}"
    store = open_store(url)
    e = Engine(store, clock=clock)
    bridge = bridge_for(e, tmp_path / "usage.db")
    _preemption_story(e, clock)
    until = T0 + 7200
    # dev: [T0, +1h] and [+1.5h + 1 s, +2h] x (4 GPUs, 4 cores, 16 GiB)
    # prod: [+1h, +1.5h] = 0.5 h x (4 GPUs, 2 cores, 8 GiB)
    dev_hours = 1.0 + (7200 - READMIT) / 3600
    expected_ns = {"team-a": _usage(4, 2, 8, 0.5), "team-b": _usage(4, 4, 16, dev_hours)}
    assert _totals(bridge, GroupBy.NAMESPACE, until=until) == expected_ns
    [flavor_total] = _totals(bridge, GroupBy.FLAVOR, until=until).values()
    both = zip(expected_ns["team-a"], expected_ns["team-b"], strict=True)
    assert flavor_total == pytest.approx([a + b for a, b in both], abs=1e-5)
    # a window that cuts both of dev's intervals: [+0.5h, +1.75h]
    window = _totals(bridge, GroupBy.CLUSTER_QUEUE, since=T0 + 1800, until=T0 + 6300)
    # dev 0.5 h + (6300 - 5401) s x 4 GPUs; prod 0.5 h x 4 GPUs
    assert window["shared-cq"][0] == pytest.approx(4 * (0.5 + (6300 - READMIT) / 3600) + 2.0)
    counters = bridge.counters.values()
    assert counters.preempted == {("shared-cq", "InClusterQueue"): 1}
    assert counters.evicted == {("shared-cq", "Preempted", "", "low"): 1}
    assert counters.quota_reserved == {("shared-cq", "low"): 2, ("shared-cq", "high"): 1}
    assert counters.finished == {("shared-cq", "high"): 1}
    # dev waited from its requeue (+1h) to +1.5h + 1 s: the histogram's sum has 0 + 1801
    assert counters.admission_wait[("shared-cq", "low")].sum == pytest.approx(READMIT - 3600.0)
    bridge.close()
    e.close()
    store.close()

    # restart: a new engine and bridge over the same files; dev's open interval reloads
    clock.t = T0 + 6000
    store = open_store(url)
    e = Engine(store, clock=clock)
    try:
        bridge = bridge_for(e, tmp_path / "usage.db")
        assert _totals(bridge, GroupBy.NAMESPACE, until=until) == expected_ns
        clock.t = T0 + 6600
        assert e.finish("team-b", "dev")  # closes the reloaded interval at +1h50m
        after = _totals(bridge, GroupBy.NAMESPACE, until=until)
        # dev: [T0, +1h] and [+1.5h + 1 s, +1h50m], x 4 GPUs
        assert after["team-b"][0] == pytest.approx(4.0 * (1.0 + (6600 - READMIT) / 3600))
        bridge.close()
    finally:
        e.close()
        store.close()


# -- the configuration object -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "name", "message"),
    [
        (
            {"hoarding": [{"action": "Kill"}]},
            "default",
            "GpuaasConfiguration default: spec.hoarding[0].action: must be Notify or Evict",
        ),
        (
            {"telemetry": {"intervalSeconds": 0}},
            "default",
            "spec.telemetry.intervalSeconds: must be greater than 0",
        ),
        ({"bogus": 1}, "default", "spec.bogus: unknown field"),
        ({}, "other", "GpuaasConfiguration other: metadata.name: must be 'default'"),
    ],
)
def test_invalid_configuration_is_refused_naming_the_field(
    engine: Engine, spec: dict[str, Any], name: str, message: str
) -> None:
    doc = configuration(spec)
    doc["metadata"]["name"] = name
    with pytest.raises(Invalid, match=message.replace("[", r"\[").replace("]", r"\]")):
        engine.create(CONFIGURATION, None, doc)


def test_configuration_applies_updates_and_deletes_live(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    bridge = bridge_for(engine, tmp_path / "usage.db")
    assert bridge.config.currency == "USD" and bridge.sampler.interval_seconds == 15.0
    engine.create(CONFIGURATION, None, TIERED)
    engine.tick()
    assert bridge.config.currency == "EUR" and bridge.config.rule_for("team-b-cq") is not None
    doc = configuration({"telemetry": {"intervalSeconds": 5}})
    engine.replace(CONFIGURATION, None, "default", doc)
    engine.tick()
    assert bridge.sampler.interval_seconds == 5.0 and bridge.config.currency == "USD"
    engine.delete(CONFIGURATION, None, "default")
    engine.tick()
    assert bridge.sampler.interval_seconds == 15.0


def test_runtime_pinning_wins_over_derived_placement(engine: Engine, clock: Clock) -> None:
    """With a runtime, its ``gpu_owners()`` says which GPU each pod holds (here GPUs 2 and 3,
    as ``LocalRuntime.gpu_owners`` returns them); unknown workloads are left unattributed."""
    owners = {2: ("team-a/serve", "serve-0"), 3: ("team-a/serve", "serve-0"), 0: ("x/gone", "p")}
    bridge = TelemetryBridge(
        gpus=parse_fake_gpus("4"), owners=lambda: owners, hostname="node-1"
    ).attach(engine)
    apply(engine, TIERED, namespace("team-a"), flavor(), cluster_queue("team-a-cq", 2))
    apply(engine, local_queue("team-a", "lq", "team-a-cq"))
    apply(engine, workload("team-a", "serve", queue="lq", gpus=2, profile="busy"))
    engine.tick()
    held = {
        a.sample.index: (a.holder.workload_key, a.holder.pod, a.holder.cluster_queue)
        for a in bridge.latest
        if a.holder is not None
    }
    assert held == {
        2: ("team-a/serve", "serve-0", "team-a-cq"),
        3: ("team-a/serve", "serve-0", "team-a-cq"),
    }
    busy = [a.sample.utilization_percent for a in bridge.latest if a.holder is not None]
    assert min(busy) >= 85.0  # the simulated profile follows the runtime's pinning
