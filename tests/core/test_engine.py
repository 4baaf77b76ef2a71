"""Table-driven semantics of the engine, built with the fluent builders (Kueue's test style)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpuaas.core.cluster import ApplyError, Cluster
from gpuaas.core.objects import (
    ClusterQueue,
    KueueObject,
    LabelSelector,
    LocalQueue,
    Namespace,
    StopPolicy,
)
from gpuaas.core.state import Phase
from gpuaas.testing.builders import (
    ClusterQueueBuilder as CQ,
)
from gpuaas.testing.builders import (
    WorkloadBuilder as WL,
)
from gpuaas.testing.builders import (
    flavor,
    local_queue,
    priority_class,
)


@dataclass
class Case:
    name: str
    setup: list[KueueObject]
    # (time, objects to apply, keys to finish)
    steps: list[tuple[float, list[KueueObject], list[str]]]
    admitted: dict[str, str]  # key -> cluster queue
    pending: set[str] = field(default_factory=set)
    preempted: set[str] = field(default_factory=set)
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)  # key -> resource -> flavor
    reasons: dict[str, str] = field(default_factory=dict)  # victim key -> Preempted reason


def _two_teams(team_a_pre: dict[str, object], team_a_gpu: str = "2") -> list[KueueObject]:
    return [
        flavor("default-flavor"),
        flavor("gpu-flavor"),
        priority_class("prod", 1000),
        priority_class("dev", 100),
        CQ("team-a-cq")
        .cohort("team-ab")
        .group(("default-flavor", {"cpu": "0", "memory": "0"}))
        .group(("gpu-flavor", {"nvidia.com/gpu": team_a_gpu}))
        .preemption(**team_a_pre)  # type: ignore[arg-type]
        .obj(),
        CQ("team-b-cq")
        .cohort("team-ab")
        .group(("gpu-flavor", {"nvidia.com/gpu": ("0", "0")}))
        .group(("default-flavor", {"cpu": "0", "memory": "0"}))
        .obj(),
        CQ("shared-cq")
        .cohort("team-ab")
        .group(("default-flavor", {"cpu": "10", "memory": "64Gi"}))
        .obj(),
        local_queue("lq", "team-a-cq", "team-a"),
        local_queue("lq", "team-b-cq", "team-b"),
    ]


CASES = [
    Case(
        "queue-when-full-then-auto-admit",
        [flavor("f"), CQ("cq").group(("f", {"cpu": "4"})).obj(), local_queue("lq", "cq")],
        [
            (0, [WL("a").request(cpu="3").obj()], []),
            (1, [WL("b").request(cpu="3").obj()], []),
            (2, [], ["default/a"]),
        ],
        admitted={"default/b": "cq"},
    ),
    Case(
        "flavors-tried-in-order-second-when-first-full",
        [
            flavor("l4-1gpu"),
            flavor("l4-4gpu"),
            CQ("cq")
            .group(("l4-1gpu", {"nvidia.com/gpu": "1"}), ("l4-4gpu", {"nvidia.com/gpu": "4"}))
            .obj(),
            local_queue("lq", "cq"),
        ],
        [
            (0, [WL("a").request(nvidia_com_gpu="1").obj()], []),
            (1, [WL("b").request(nvidia_com_gpu="1").obj()], []),
        ],
        admitted={"default/a": "cq", "default/b": "cq"},
        flavors={
            "default/a": {"nvidia.com/gpu": "l4-1gpu"},
            "default/b": {"nvidia.com/gpu": "l4-4gpu"},
        },
    ),
    Case(
        "strict-fifo-head-blocks-smaller-workload",
        [
            flavor("f"),
            CQ("cq").strict_fifo().group(("f", {"cpu": "4"})).obj(),
            local_queue("lq", "cq"),
        ],
        [
            (0, [WL("a").request(cpu="3").obj()], []),
            (1, [WL("big").request(cpu="3").obj()], []),
            (2, [WL("small").request(cpu="1").obj()], []),
        ],
        admitted={"default/a": "cq"},
        pending={"default/big", "default/small"},
    ),
    Case(
        "best-effort-fifo-smaller-workload-passes",
        [flavor("f"), CQ("cq").group(("f", {"cpu": "4"})).obj(), local_queue("lq", "cq")],
        [
            (0, [WL("a").request(cpu="3").obj()], []),
            (1, [WL("big").request(cpu="3").obj()], []),
            (2, [WL("small").request(cpu="1").obj()], []),
        ],
        admitted={"default/a": "cq", "default/small": "cq"},
        pending={"default/big"},
    ),
    Case(
        "within-cq-lower-priority-preempted",
        [
            flavor("f"),
            CQ("cq").group(("f", {"cpu": "4"})).preemption(within="LowerPriority").obj(),
            local_queue("lq", "cq"),
        ],
        [
            (0, [WL("low").priority(1).request(cpu="4").obj()], []),
            (1, [WL("high").priority(5).request(cpu="4").obj()], []),
        ],
        admitted={"default/high": "cq"},
        pending={"default/low"},
        preempted={"default/low"},
        reasons={"default/low": "InClusterQueue"},
    ),
    Case(
        "equal-priority-never-preempted-by-lower-priority-policy",
        [
            flavor("f"),
            CQ("cq").group(("f", {"cpu": "4"})).preemption(within="LowerPriority").obj(),
            local_queue("lq", "cq"),
        ],
        [
            (0, [WL("a").priority(5).request(cpu="4").obj()], []),
            (1, [WL("b").priority(5).request(cpu="4").obj()], []),
        ],
        admitted={"default/a": "cq"},
        pending={"default/b"},
    ),
    Case(
        "lower-or-newer-equal-priority-evicts-newer-equal",
        [
            flavor("f"),
            CQ("cq")
            .group(("f", {"cpu": "4"}))
            .preemption(within="LowerOrNewerEqualPriority")
            .obj(),
            local_queue("lq", "cq"),
        ],
        [
            (0, [WL("old").priority(5).request(cpu="2").obj()], []),
            (1, [WL("new").priority(5).request(cpu="2").obj()], []),
            # Pending 'waiting' is older than nothing admitted: it cannot evict 'old', only 'new' if newer.
            (2, [WL("late").priority(5).request(cpu="2").obj()], []),
        ],
        admitted={"default/old": "cq", "default/new": "cq"},
        pending={"default/late"},
    ),
    Case(
        "seed004-prod-reclaims-while-borrowing",
        _two_teams(
            {"within": "Never", "reclaim": "Any", "borrow": "LowerPriority", "threshold": 100}
        ),
        [
            (0, [WL("team-b-job", "team-b").priority_class("dev").request(cpu="5").obj()], []),
            (
                1,
                [
                    WL("team-a-job", "team-a")
                    .priority_class("prod")
                    .request(cpu="7", nvidia_com_gpu="2")
                    .obj()
                ],
                [],
            ),
        ],
        admitted={"team-a/team-a-job": "team-a-cq"},
        pending={"team-b/team-b-job"},
        preempted={"team-b/team-b-job"},
        reasons={"team-b/team-b-job": "InCohortReclaimWhileBorrowing"},
    ),
    Case(
        "seed004-threshold-below-victim-blocks",
        _two_teams(
            {"within": "Never", "reclaim": "Any", "borrow": "LowerPriority", "threshold": 50}
        ),
        [
            (0, [WL("team-b-job", "team-b").priority_class("dev").request(cpu="5").obj()], []),
            (
                1,
                [
                    WL("team-a-job", "team-a")
                    .priority_class("prod")
                    .request(cpu="7", nvidia_com_gpu="2")
                    .obj()
                ],
                [],
            ),
        ],
        admitted={"team-b/team-b-job": "team-b-cq"},
        pending={"team-a/team-a-job"},
    ),
    Case(
        "seed004-no-borrow-within-cohort-cannot-evict",
        _two_teams({"within": "Never", "reclaim": "Any"}),
        [
            (0, [WL("team-b-job", "team-b").priority_class("dev").request(cpu="5").obj()], []),
            (
                1,
                [
                    WL("team-a-job", "team-a")
                    .priority_class("prod")
                    .request(cpu="7", nvidia_com_gpu="2")
                    .obj()
                ],
                [],
            ),
        ],
        admitted={"team-b/team-b-job": "team-b-cq"},
        pending={"team-a/team-a-job"},
    ),
    Case(
        "evicted-workload-comes-back-when-preemptor-finishes",
        _two_teams(
            {"within": "Never", "reclaim": "Any", "borrow": "LowerPriority", "threshold": 100}
        ),
        [
            (0, [WL("team-b-job", "team-b").priority_class("dev").request(cpu="5").obj()], []),
            (
                1,
                [
                    WL("team-a-job", "team-a")
                    .priority_class("prod")
                    .request(cpu="7", nvidia_com_gpu="2")
                    .obj()
                ],
                [],
            ),
            (2, [], ["team-a/team-a-job"]),
        ],
        admitted={"team-b/team-b-job": "team-b-cq"},
        preempted={"team-b/team-b-job"},
    ),
    Case(
        "partial-admission-min-count",
        [flavor("f"), CQ("cq").group(("f", {"cpu": "4"})).obj(), local_queue("lq", "cq")],
        [
            (0, [WL("a").request(cpu="1").obj()], []),
            (1, [WL("p").pod_set("main", 5, 2, cpu="1").obj()], []),
        ],
        admitted={"default/a": "cq", "default/p": "cq"},
    ),
    Case(
        "empty-namespace-selector-admits-every-namespace",
        [
            flavor("f"),
            CQ("cq").group(("f", {"cpu": "4"})).obj(),
            local_queue("lq", "cq"),
        ],
        [(0, [WL("a").request(cpu="1").obj()], [])],
        admitted={"default/a": "cq"},
    ),
]


def _run(case: Case) -> Cluster:
    c = Cluster()
    for obj in case.setup:
        c.apply(obj, 0)
    for at, objs, finishes in case.steps:
        for obj in objs:
            c.apply(obj, at)
        for key in finishes:
            c.finish(key, at)
        c.schedule(at)
    return c


def _one_queue(cq: ClusterQueue | None = None) -> Cluster:
    """A cluster with flavor f, a 4-CPU ClusterQueue cq (or the one given) and LocalQueue lq."""
    c = Cluster()
    c.apply(flavor("f"), 0)
    c.apply(cq or CQ("cq").group(("f", {"cpu": "4"})).obj(), 0)
    c.apply(local_queue("lq", "cq"), 0)
    return c


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_semantics(case: Case) -> None:
    c = _run(case)
    admitted = {k: w.cluster_queue for k, w in c.workloads.items() if w.phase == Phase.ADMITTED}
    pending = {k for k, w in c.workloads.items() if w.phase == Phase.PENDING}
    assert admitted == case.admitted
    assert pending == case.pending
    assert c.preempted_keys == case.preempted
    for key, expected in case.flavors.items():
        adm = c.workloads[key].admission
        assert adm is not None
        got = {r: f for ps in adm.pod_sets for r, f in ps.flavors.items()}
        assert {r: got[r] for r in expected} == expected
    for key, reason in case.reasons.items():
        assert c.workloads[key].conditions["Preempted"].reason == reason


def test_partial_admission_takes_largest_count_that_fits() -> None:
    case = next(c for c in CASES if c.name == "partial-admission-min-count")
    adm = _run(case).workloads["default/p"].admission
    assert adm is not None and adm.pod_sets[0].count == 3


def test_preemption_audit_trail_names_preemptor() -> None:
    case = next(c for c in CASES if c.name == "seed004-prod-reclaims-while-borrowing")
    c = _run(case)
    victim = c.workloads["team-b/team-b-job"]
    evicted = victim.conditions["Evicted"]
    assert evicted.reason == "Preempted"
    # Kueue names the preemptor by UIDs; without them (a scenario), nothing that names a tenant.
    assert "(UID: UNKNOWN, JobUID: UNKNOWN)" in evicted.message
    assert "team-a-job" not in evicted.message
    assert "preemptor path: /team-ab/team-a-cq" in evicted.message
    assert victim.conditions["Requeued"].status == "True"
    reasons = [(e.reason, e.workload, e.related) for e in c.events]
    assert ("Preempted", "team-b/team-b-job", "team-a/team-a-job") in reasons
    assert ("PreemptedWorkload", "team-a/team-a-job", "team-b/team-b-job") in reasons


def test_why_pending_is_plain_words() -> None:
    case = next(c for c in CASES if c.name == "strict-fifo-head-blocks-smaller-workload")
    c = _run(case)
    why = c.why_pending("default/big")
    assert "insufficient unused quota for cpu in flavor f" in why
    assert "position 1 of 2 in ClusterQueue cq" in why
    assert "position 2 of 2" in c.why_pending("default/small")


def test_namespace_mismatch_keeps_workload_pending() -> None:
    c = Cluster()
    c.apply(flavor("f"), 0)
    cq = CQ("cq").group(("f", {"cpu": "4"})).obj()
    cq.namespace_selector = None  # absent selector: Kueue admits no namespace
    c.apply(cq, 0)
    c.apply(local_queue("lq", "cq"), 0)
    c.apply(Namespace("default"), 0)
    c.apply(WL("a").request(cpu="1").obj(), 0)
    c.schedule(0)
    assert c.workloads["default/a"].phase == Phase.PENDING
    assert "namespace" in c.why_pending("default/a")


def test_invalid_resources_keep_workload_pending_misconfigured() -> None:
    """Kueue accepts a Workload whose requests exceed their limits and its scheduler marks it
    Misconfigured (``ValidateAdmissibility``): it waits with that message, holds no quota, and
    a valid workload behind it is admitted."""
    c = _one_queue()
    bad = WL("bad").request(cpu="1").obj()
    bad.invalid_resources = "resources validation failed: requests must not exceed its limits"
    c.apply(bad, 0)
    c.apply(WL("good").request(cpu="4").obj(), 0)
    c.schedule(0)
    assert c.workloads["default/bad"].phase == Phase.PENDING
    assert c.workloads["default/good"].phase == Phase.ADMITTED
    reserved = c.workloads["default/bad"].conditions["QuotaReserved"]
    assert (reserved.status, reserved.reason) == ("False", "Misconfigured")
    assert "requests must not exceed its limits" in reserved.message


def test_maximum_execution_time_deactivates_counting_past_admissions() -> None:
    """Kueue's maximumExecutionTimeSeconds: admitted at 0 with a 10 s limit, preempted at 4,
    admitted again at 7 (4 s already run), so deactivated at 13, not 17; the time it ran is
    kept as accumulatedPastExecutionTimeSeconds until then, and cleared with the deactivation."""
    c = _one_queue(CQ("cq").group(("f", {"cpu": "4"})).preemption(within="LowerPriority").obj())
    limited = WL("limited").request(cpu="4").obj()
    limited.max_exec_seconds = 10
    c.apply(limited, 0)
    c.schedule(0)
    assert c.next_wakeup() == 10
    c.apply(WL("urgent").request(cpu="4").priority(100).obj(), 4)
    c.schedule(4)
    st = c.workloads["default/limited"]
    assert st.phase == Phase.PENDING and st.past_exec_seconds == 4
    c.finish("default/urgent", 7)  # limited is admitted again at 7
    c.schedule(7)
    c.schedule(12.5)
    assert st.phase == Phase.ADMITTED
    assert c.next_wakeup() == 13
    c.schedule(13)
    assert st.phase == Phase.INACTIVE
    assert not st.workload.active and st.past_exec_seconds == 6  # this admission's, as Kueue
    assert st.conditions["Evicted"].reason == "Deactivated"
    assert st.conditions["Evicted"].message == (
        "The workload is deactivated due to exceeding the maximum execution time"
    )


def test_cached_namespace_matches_and_routes_follow_changes() -> None:
    """The engine caches selector matches and LocalQueue routes; each change must reach them."""
    c = Cluster()
    c.apply(flavor("f"), 0)
    cq = CQ("cq").group(("f", {"cpu": "4"})).obj()
    cq.namespace_selector = LabelSelector(match_labels=(("team", "x"),))
    c.apply(cq, 0)
    c.apply(Namespace("default"), 0)
    c.apply(LocalQueue("default", "lq", "cq", StopPolicy.HOLD), 0)
    c.apply(WL("a").request(cpu="1").obj(), 0)
    c.schedule(0)
    assert "LocalQueue lq is stopped" in c.why_pending("default/a")
    c.apply(local_queue("lq", "cq"), 1)  # the queue resumes: the cached route must go
    c.schedule(1)
    assert "namespace" in c.why_pending("default/a")
    c.apply(Namespace("default", {"team": "x"}), 2)  # now the selector matches
    c.schedule(2)
    assert c.workloads["default/a"].phase == Phase.ADMITTED
    c.delete("ClusterQueue", None, "cq", 3)  # terminating: kept while a workload holds quota
    c.apply(WL("b").request(cpu="1").obj(), 3)
    c.finish("default/a", 4)  # the last one leaves: the CQ is dropped
    c.schedule(4)
    assert c.why_pending("default/b") == "ClusterQueue cq doesn't exist"
    c.apply(WL("c").request(cpu="1").obj(), 5)  # routed after the drop: no stale route
    c.schedule(5)
    assert c.why_pending("default/c") == "ClusterQueue cq doesn't exist"


def test_missing_flavor_makes_cq_inactive_with_warning() -> None:
    c = Cluster()
    c.apply(CQ("cq").group(("nope", {"cpu": "4"})).obj(), 0)
    c.apply(local_queue("lq", "cq"), 0)
    c.apply(WL("a").request(cpu="1").obj(), 0)
    c.schedule(0)
    assert c.workloads["default/a"].phase == Phase.PENDING
    assert any("missing ResourceFlavor" in w for w in c.warnings())
    c.apply(flavor("nope"), 1)
    c.schedule(1)
    assert c.workloads["default/a"].phase == Phase.ADMITTED


def test_hold_and_drain_evicts_without_counting_preemption() -> None:
    c = _one_queue()
    c.apply(WL("a").request(cpu="1").obj(), 0)
    c.schedule(0)
    held = CQ("cq").group(("f", {"cpu": "4"})).obj()
    held.stop_policy = StopPolicy.HOLD_AND_DRAIN
    c.apply(held, 1)
    c.schedule(1)
    wl = c.workloads["default/a"]
    assert wl.phase == Phase.PENDING
    assert wl.conditions["Evicted"].reason == "ClusterQueueStopped"
    assert c.preempted_keys == set()


def test_deactivation_releases_quota() -> None:
    c = _one_queue()
    c.apply(WL("a").request(cpu="4").obj(), 0)
    c.apply(WL("b").request(cpu="4").obj(), 0)
    c.schedule(0)
    c.apply(WL("a").request(cpu="4").inactive().obj(), 1)
    c.schedule(1)
    assert c.workloads["default/a"].phase == Phase.INACTIVE
    assert c.workloads["default/b"].phase == Phase.ADMITTED


def test_admitted_pod_sets_are_immutable() -> None:
    c = _one_queue()
    c.apply(WL("a").request(cpu="1").obj(), 0)
    c.schedule(0)
    with pytest.raises(ApplyError, match=r"spec\.podSets"):
        c.apply(WL("a").request(cpu="2").obj(), 1)
    assert c.workloads["default/a"].workload.pod_sets[0].requests["cpu"] == 1000


def test_live_mode_holds_quota_until_pods_are_gone() -> None:
    c = Cluster(instant_evictions=False)
    for obj in _two_teams(
        {"within": "Never", "reclaim": "Any", "borrow": "LowerPriority", "threshold": 100}
    ):
        c.apply(obj, 0)
    c.apply(WL("team-b-job", "team-b").priority_class("dev").request(cpu="5").obj(), 0)
    c.schedule(0)
    c.apply(
        WL("team-a-job", "team-a")
        .priority_class("prod")
        .request(cpu="7", nvidia_com_gpu="2")
        .obj(),
        1,
    )
    c.schedule(1)
    assert c.workloads["team-b/team-b-job"].phase == Phase.EVICTING
    assert c.workloads["team-a/team-a-job"].phase == Phase.PENDING
    c.confirm_stopped("team-b/team-b-job", 2)
    c.schedule(2)
    assert c.workloads["team-a/team-a-job"].phase == Phase.ADMITTED
    assert c.workloads["team-b/team-b-job"].phase == Phase.PENDING


def test_min_runtime_protects_then_preemption_happens_when_it_runs_out() -> None:
    c = Cluster()
    c.apply(flavor("f"), 0)
    cq = CQ("cq").group(("f", {"cpu": "4"})).preemption(within="LowerPriority").obj()
    cq.min_runtime_seconds = 30
    c.apply(cq, 0)
    c.apply(local_queue("lq", "cq"), 0)
    c.apply(WL("young").priority(1).request(cpu="4").obj(), 0)
    c.schedule(0)
    c.apply(WL("prod").priority(9).request(cpu="4").obj(), 10)
    c.schedule(10)
    assert c.workloads["default/young"].phase == Phase.ADMITTED  # protected until t=30
    assert c.next_wakeup() == 30
    c.schedule(30)
    assert c.workloads["default/prod"].phase == Phase.ADMITTED
    assert c.preempted_keys == {"default/young"}


def test_preemptor_is_admitted_in_the_flavor_it_preempted_for() -> None:
    """After preempting in flavor f1 (whenCanPreempt MayStopSearch), the preemptor's scan starts
    over (Kueue clears the scan progress on a preemption), so it lands in f1, not in free f2."""
    c = Cluster()
    c.apply(flavor("f1"), 0)
    c.apply(flavor("f2"), 0)
    c.apply(
        CQ("a")
        .cohort("co")
        .group(("f1", {"cpu": "4"}), ("f2", {"cpu": "4"}))
        .preemption(reclaim="Any")
        .fungibility(when_can_preempt="MayStopSearch")
        .obj(),
        0,
    )
    c.apply(CQ("b").cohort("co").group(("f1", {"cpu": "0"})).obj(), 0)
    c.apply(local_queue("lq-a", "a"), 0)
    c.apply(local_queue("lq-b", "b"), 0)
    c.apply(WL("b-job").queue("lq-b").request(cpu="4").obj(), 0)
    c.schedule(0)
    assert c.workloads["default/b-job"].phase == Phase.ADMITTED
    c.apply(WL("a-job").queue("lq-a").request(cpu="4").obj(), 1)
    c.schedule(1)
    adm = c.workloads["default/a-job"].admission
    assert adm is not None and adm.pod_sets[0].flavors == {"cpu": "f1"}
    assert c.preempted_keys == {"default/b-job"}
    assert c.workloads["default/b-job"].phase == Phase.PENDING


def test_turning_events_off_changes_no_decision() -> None:
    """The scenario runner builds its cluster with record_events=False: only events may differ."""

    def play(record: bool) -> Cluster:
        c = Cluster(record_events=record)
        c.apply(flavor("f"), 0)
        c.apply(
            CQ("cq").group(("f", {"cpu": "4"})).preemption("LowerPriority").obj(),
            0,
        )
        c.apply(local_queue("lq", "cq"), 0)
        for i, (cpu, prio) in enumerate([(2, 1), (2, 1), (3, 5), (1, 0)]):
            c.apply(WL(f"w{i}").request(cpu=str(cpu)).priority(prio).obj(), i)
            c.schedule(i)
        c.finish("default/w2", 10)
        c.schedule(10)
        return c

    on, off = play(True), play(False)
    assert on.events and not off.events
    for key, w in on.workloads.items():
        o = off.workloads[key]
        assert (w.phase, w.cluster_queue, w.admission_count, w.requeue_count) == (
            o.phase,
            o.cluster_queue,
            o.admission_count,
            o.requeue_count,
        )
        assert {t: c.to_dict() for t, c in w.conditions.items()} == {
            t: c.to_dict() for t, c in o.conditions.items()
        }
    assert any(w.requeue_count for w in on.workloads.values())  # a preemption happened
