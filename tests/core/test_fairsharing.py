"""Fair Sharing: DRS arithmetic, the fair-sharing order and fair preemption, checked against
Kueue's own test cases (transcribed as scenarios under tests/scenarios/fairsharing) and against
invariants: a preemption search leaves the quota tree exactly as it found it, and the victims it
returns make room for the preemptor."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuaas.core.cluster import Cluster
from gpuaas.core.config import SchedulerConfig
from gpuaas.core.fairsharing import (
    FairPreemption,
    less_than_initial_share,
    less_than_or_equal_to_final_share,
)
from gpuaas.core.fairsharing_drs import DRS, NEGATIVE_DRS, compare_drs, dominant_resource_share
from gpuaas.core.objects import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    PodSet,
    Preemption,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from gpuaas.core.preemption import Preemptor
from gpuaas.core.quota import QuotaNode, quotas_of, recompute_tree
from gpuaas.core.state import Admission, Phase, PodSetAssignment
from gpuaas.sim.runner import run_scenario
from gpuaas.sim.scenario import load_scenarios

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios" / "fairsharing").glob("*.yaml"))
REASONS_ANNOTATION = "test.gpuaas.dev/preemption-reasons"

GPU = "example.com/gpu"


# --- DRS arithmetic (Kueue pkg/cache/scheduler/fair_sharing_test.go: TestDominantResourceShare) --
def _group(flavor: str, quotas: dict[str, tuple[int, int | None]]) -> ResourceGroup:
    return ResourceGroup(
        covered_resources=tuple(quotas),
        flavors=[
            FlavorQuotas(
                flavor,
                {r: ResourceQuota(nominal=n, lending_limit=ll) for r, (n, ll) in quotas.items()},
            )
        ],
    )


def _tree(
    cq: dict[str, tuple[int, int | None]], lender: dict[str, tuple[int, int | None]]
) -> tuple[QuotaNode, QuotaNode, QuotaNode]:
    cohort = QuotaNode("test-cohort", False, {})
    a = QuotaNode("cq", True, quotas_of([_group("default", cq)]))
    b = QuotaNode("lending-cq", True, quotas_of([_group("default", lender)]))
    for child in (a, b):
        child.parent = cohort
        cohort.children.append(child)
    recompute_tree(cohort)
    return a, b, cohort


CPU_GPU = {"cpu": (2000, None), GPU: (5, None)}
LEND_CPU_GPU = {"cpu": (8000, None), GPU: (5, None)}

DRS_CASES = {
    # name: (cq quotas, lender quotas, cq usage, simulated workload, weight, want (value, resource))
    "usage below nominal": (CPU_GPU, LEND_CPU_GPU, {"cpu": 1000, GPU: 2}, {}, 1.0, (0, "")),
    "usage above nominal": (CPU_GPU, LEND_CPU_GPU, {"cpu": 3000, GPU: 7}, {}, 1.0, (200, GPU)),
    "usage slightly above nominal in a cohort with large quotas": (
        {GPU: (500, None)},
        {GPU: (1000, None)},
        {GPU: 501},
        {},
        1.0,
        (1, GPU),
    ),
    "usage way above nominal in a cohort with large quotas and weights": (
        {GPU: (500, None)},
        {GPU: (1000, None)},
        {GPU: 800},
        {},
        300.0,
        (1, GPU),
    ),
    "one resource above nominal": (
        CPU_GPU,
        LEND_CPU_GPU,
        {"cpu": 3000, GPU: 3},
        {},
        1.0,
        (100, "cpu"),
    ),
    "usage with workload above nominal": (
        CPU_GPU,
        LEND_CPU_GPU,
        {"cpu": 1000, GPU: 2},
        {"cpu": 4000, GPU: 4},
        1.0,
        (300, "cpu"),
    ),
    "A resource with zero lendable": (
        {"cpu": (2000, None), GPU: (2, 0)},
        {"cpu": (8000, None), GPU: (64, 0)},
        {"cpu": 1000, GPU: 1},
        {"cpu": 4000, GPU: 4},
        1.0,
        (300, "cpu"),
    ),
    "above nominal with zero weight": (
        CPU_GPU,
        LEND_CPU_GPU,
        {"cpu": 3000, GPU: 7},
        {},
        0.0,
        ((1 << 63) - 1, GPU),
    ),
}


@pytest.mark.parametrize("name", list(DRS_CASES))
def test_dominant_resource_share(name: str) -> None:
    cq_q, lend_q, usage, incoming, weight, (want_value, want_resource) = DRS_CASES[name]
    cq, lender, cohort = _tree(cq_q, lend_q)
    cq.add_usages({("default", r): v for r, v in usage.items()})
    cq.add_usages({("default", r): v for r, v in incoming.items()})
    drs = dominant_resource_share(cq, weight)
    assert (drs.rounded_weighted_share(), drs.dominant_resource) == (want_value, want_resource)
    assert drs.borrowing == (want_value > 0)
    # The lender and the root never borrow.
    assert not dominant_resource_share(lender, 1.0).borrowing
    assert dominant_resource_share(cohort, 1.0) == DRS()


def test_dominant_resource_share_without_cohort_is_zero() -> None:
    node = QuotaNode("cq", True, quotas_of([_group("default", CPU_GPU)]))
    recompute_tree(node)
    node.add_usages({("default", "cpu"): 5000})
    assert dominant_resource_share(node, 1.0).weighted_share() == 0.0


# --- DRS comparison (Kueue fair_sharing_test.go: TestPreciseWeightedShare, TestCompareDRS) -----
@pytest.mark.parametrize(
    ("drs", "want"),
    [
        (DRS(fair_weight=0.0, unweighted_ratio=100.0, borrowing=True), math.inf),  # zero weight
        (DRS(fair_weight=0.0, unweighted_ratio=0.0), 0.0),  # zero unweighted ratio
        (DRS(fair_weight=2.0, unweighted_ratio=100.0, borrowing=True), 50.0),
        (DRS(fair_weight=0.5, unweighted_ratio=100.0, borrowing=True), 200.0),
    ],
)
def test_weighted_share(drs: DRS, want: float) -> None:
    assert drs.weighted_share() == want


def _d(ratio: float, weight: float = 1.0) -> DRS:
    return DRS(fair_weight=weight, unweighted_ratio=ratio, borrowing=ratio > 0)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (_d(100), _d(200), -1),
        (_d(200), _d(100, 2.0), 1),
        (_d(200), _d(100, 0.5), 0),
        (_d(1, 0.0), _d(10_000), 1),  # zero weight borrowing beats any finite share
        (_d(10_000), _d(1, 0.0), -1),
        (_d(500, 0.0), _d(1000, 0.0), -1),  # both infinite: unweighted ratios decide
        (_d(0, 0.0), _d(0), 0),  # weight 0 without borrowing is a zero share
        (NEGATIVE_DRS, _d(0), -1),
    ],
)
def test_compare_drs(a: DRS, b: DRS, want: int) -> None:
    assert compare_drs(a, b) == want
    assert compare_drs(b, a) == -want


def test_strategies() -> None:
    low, mid, high = _d(100), _d(200), _d(300)
    assert less_than_or_equal_to_final_share(mid, high, mid)
    assert not less_than_or_equal_to_final_share(mid, high, low)
    assert less_than_initial_share(mid, high, low)
    assert not less_than_initial_share(mid, mid, low)


def test_is_borrowing_on_requested_flavors_only() -> None:
    drs = DRS(unweighted_ratio=1.0, borrowing=True, borrowed_frs=frozenset({("spot", "cpu")}))
    assert drs.is_borrowing_on({("spot", "cpu"): 1})
    assert not drs.is_borrowing_on({("on-demand", "cpu"): 1})
    assert not drs.is_borrowing_on({("spot", "cpu"): 0})


# --- Kueue's cases as scenarios ----------------------------------------------------------------
def _expected_reasons(path: Path) -> dict[str, str]:
    doc = yaml.safe_load(path.read_text())
    raw = (doc["metadata"].get("annotations") or {}).get(REASONS_ANNOTATION, "")
    return dict(item.split("=", 1) for item in raw.split(",") if item)


def test_scenarios_exist() -> None:
    assert len(SCENARIOS) >= 30


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_kueue_case(path: Path) -> None:
    (scenario,) = load_scenarios(path)
    assert scenario.config.fair_sharing
    assert scenario.source and "kueue" in scenario.source
    clusters: list[Cluster] = []
    outcome = run_scenario(scenario, on_step=lambda _step, c: clusters.append(c))
    assert outcome.error is None, outcome.error
    failed = [m for c in outcome.checks if not c.passed for m in c.mismatches]
    assert not failed, "\n".join(failed)
    cluster = clusters[-1]
    want = _expected_reasons(path)
    got = {k: cluster.workloads[k].preemption_reason for k in sorted(cluster.preempted_keys)}
    assert got == want


# --- the what-if leaves the tree as it found it --------------------------------------------------
BASE = "all"


def _cluster(weights: tuple[float, float, float]) -> Cluster:
    """Kueue's TestFairPreemptions base: a, b, c with 3 CPUs each in one cohort."""
    c = Cluster(SchedulerConfig(fair_sharing=True))
    c.apply(ResourceFlavor(name="default"), 0)
    c.apply(Cohort(name=BASE), 0)
    pre = Preemption(
        within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
        reclaim_within_cohort=PreemptionPolicy.ANY,
    )
    for name, w in zip("abc", weights, strict=True):
        group = ResourceGroup(
            covered_resources=("cpu",),
            flavors=[FlavorQuotas("default", {"cpu": ResourceQuota(nominal=3000)})],
        )
        cq = ClusterQueue(
            name=name,
            cohort=BASE,
            namespace_selector=LabelSelector(),
            resource_groups=[group],
            preemption=pre,
            fair_weight=w,
        )
        c.apply(cq, 0)
        c.apply(LocalQueue(namespace="default", name=f"lq-{name}", cluster_queue=name), 0)
    c.schedule(0)  # builds the quota tree
    return c


def _wl(name: str, cq: str, millis: int, priority: int) -> Workload:
    return Workload(
        namespace="default",
        name=name,
        queue_name=f"lq-{cq}",
        pod_sets=[PodSet(name="main", count=1, requests={"cpu": millis})],
        priority=priority,
    )


def _snapshot(c: Cluster) -> list[dict[tuple[str, str], int]]:
    nodes = [cq.node for cq in c.cqs.values()] + list(c.cohort_nodes.values())
    return [{k: v for k, v in n.usage.items() if v} for n in nodes]


workload_st = st.tuples(
    st.sampled_from("abc"), st.sampled_from([500, 1000, 2000, 3000]), st.integers(-1, 1)
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    admitted=st.lists(workload_st, min_size=1, max_size=12),
    incoming=workload_st,
    weights=st.tuples(*[st.sampled_from([0.0, 0.5, 1.0, 2.0])] * 3),
)
def test_preemption_is_a_pure_what_if(
    admitted: list[tuple[str, int, int]],
    incoming: tuple[str, int, int],
    weights: tuple[float, float, float],
) -> None:
    c = _cluster(weights)
    fr = ("default", "cpu")
    for i, (name, millis, prio) in enumerate(admitted):
        # Admitted directly, as Kueue's tests reserve quota: scheduling them one by one would
        # also run fair preemptions, which for some inputs flap forever at one instant.
        if c.cqs[name].node.fits({fr: millis}):
            admission = Admission(
                name, [PodSetAssignment("main", {"cpu": "default"}, 1, {"cpu": millis})]
            )
            c.restore_admission(_wl(f"w{i}", name, millis, prio), admission, float(i) / 100, 0)
    cq_name, millis, prio = incoming
    c.apply(_wl("incoming", cq_name, millis, prio), 1)
    state = c.workloads["default/incoming"]
    cq = c.cqs[cq_name]
    before = _snapshot(c)
    p = Preemptor(state, cq, {fr}, {fr: millis}, 1.0)
    search = FairPreemption(c.cqs, c.config)
    targets = search.targets(p)
    event(f"{len(targets)} target(s)")
    assert _snapshot(c) == before
    for t in targets:
        assert t.workload.phase in (Phase.ADMITTED, Phase.EVICTING)
        assert t.workload.cluster_queue == t.cq.name
    if targets:  # the victims make room for the preemptor, borrowing allowed
        for t in targets:
            t.cq.node.remove_usages(t.workload.usage)
        assert millis <= cq.node.available(fr)
        for t in targets:
            t.cq.node.add_usages(t.workload.usage)
    assert _snapshot(c) == before
