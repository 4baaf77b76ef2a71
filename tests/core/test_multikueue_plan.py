"""MultiKueue's pure decisions: nomination by dispatcher, one reconcile pass of a workload group,
and the AdmissionCheck's Active condition, as tables of named cases."""

from __future__ import annotations

import pytest

from gpuaas.core.checks import inactive_reasons
from gpuaas.core.multikueue import (
    ALL_AT_ONCE,
    EXTERNAL,
    INCREMENTAL,
    Local,
    RemoteCopy,
    admission_check_active,
    config_ref_error,
    nominate,
    reconcile,
)
from gpuaas.core.objects import AdmissionCheck, CheckRule, ClusterQueue

CLUSTERS = ["w5", "w1", "w4", "w2", "w3"]


@pytest.mark.parametrize(
    ("case", "dispatcher", "available", "nominated", "round_started", "now", "want"),
    [
        ("all at once: connected ones, by name", ALL_AT_ONCE, ["w4", "w1", "w5"], [], None,
         0.0, (("w1", "w4", "w5"), None)),
        ("all at once: none connected", ALL_AT_ONCE, [], [], None, 0.0, ((), None)),
        ("incremental: first batch of 3 in config order", INCREMENTAL, CLUSTERS, [], None,
         10.0, (("w5", "w1", "w4"), 10.0)),
        ("incremental: round not over", INCREMENTAL, CLUSTERS, ["w5", "w1", "w4"], 10.0,
         310.0, (("w5", "w1", "w4"), 10.0)),
        ("incremental: next batch after 5 minutes", INCREMENTAL, CLUSTERS,
         ["w5", "w1", "w4"], 10.0, 310.5, (("w5", "w1", "w4", "w2", "w3"), 310.5)),
        ("incremental: nothing left", INCREMENTAL, CLUSTERS, CLUSTERS, 0.0, 1000.0,
         (tuple(CLUSTERS), 0.0)),
        ("external: kept as written", EXTERNAL, CLUSTERS, ["w2"], None, 0.0, (("w2",), None)),
    ],
)  # fmt: skip
def test_nominate(
    case: str,
    dispatcher: str,
    available: list[str],
    nominated: list[str],
    round_started: float | None,
    now: float,
    want: tuple[tuple[str, ...], float | None],
) -> None:
    assert nominate(dispatcher, CLUSTERS, available, nominated, round_started, now) == want, case


PENDING = Local(True, False, "Pending", None, ("a", "b", "c"))
READY_ON_A = Local(True, False, "Ready", "a", ())
ADMITTED = RemoteCopy(admitted_at=5.0)
WAITING = RemoteCopy(pending_message="insufficient quota for cpu")


@pytest.mark.parametrize(
    ("case", "local", "remotes", "unavailable", "lost_for", "want"),
    [
        ("finished on the manager: every copy goes",
         Local(True, True, "Ready", "a", ()), {"a": ADMITTED, "b": None}, [], None,
         {"delete_on": ["a"]}),
        ("no quota on the manager: every copy goes",
         Local(False, False, "Pending", None, ()), {"a": WAITING, "b": WAITING}, [], None,
         {"delete_on": ["a", "b"]}),
        ("first nomination creates every copy",
         Local(True, False, "Pending", None, ()), {"a": None, "b": None, "c": None}, [],
         None, {"create_on": ["a", "b", "c"], "nominated": ("a", "b", "c"),
                "check": ("Pending", "not admitted by any nominated worker cluster yet")}),
        ("the earliest admitted copy wins, the others go, its Job is created",
         PENDING, {"a": WAITING, "b": RemoteCopy(admitted_at=7.0), "c": ADMITTED}, [], None,
         {"delete_on": ["a", "b"], "create_job_on": "c",
          "check": ("Ready", 'The workload was admitted on "c"'), "cluster_name": "c",
          "nominated": ()}),
        ("chosen and its Job there: nothing to do",
         READY_ON_A, {"a": RemoteCopy(admitted_at=1.0, has_job=True)}, [], None, {}),
        ("chosen worker lost, within workerLostTimeout: wait",
         READY_ON_A, {}, ["a"], 5.0, {"wait_lost": 10.0}),
        ("chosen worker lost past workerLostTimeout: Retry",
         READY_ON_A, {}, ["a"], 16.0,
         {"check": ("Retry", 'Admitting remote lost, Previously: "Ready"')}),
        ("chosen worker answers but the copy is gone: Retry",
         READY_ON_A, {"a": None}, [], None,
         {"check": ("Retry", 'Admitting remote no longer exists, Previously: "Ready"')}),
        ("evicted on the chosen worker: Retry",
         READY_ON_A, {"a": RemoteCopy(admitted_at=1.0, evicted=True)}, [], None,
         {"check": ("Retry", 'Workload evicted on worker cluster: "a", resetting for '
                             're-admission. Previously: "Ready"')}),
        ("finished on the chosen worker: the manager finishes",
         READY_ON_A, {"a": RemoteCopy(finished=(True, "Succeeded", "Job finished"))}, [],
         None, {"finish": (True, "Succeeded", "Job finished")}),
        ("nobody admits: Pending, saying why each waits",
         PENDING, {"a": WAITING, "b": WAITING}, ["c"], None,
         {"check": ("Pending", "not admitted by any nominated worker cluster yet; "
                    "a: insufficient quota for cpu; b: insufficient quota for cpu; "
                    "c: not connected")}),
        ("a copy on a worker no longer nominated goes",
         Local(True, False, "Pending", None, ("a",)), {"a": None, "z": WAITING}, [], None,
         {"create_on": ["a"], "delete_on": ["z"],
          "check": ("Pending", "not admitted by any nominated worker cluster yet")}),
    ],
)  # fmt: skip
def test_reconcile(
    case: str,
    local: Local,
    remotes: dict[str, RemoteCopy | None],
    unavailable: list[str],
    lost_for: float | None,
    want: dict[str, object],
) -> None:
    nomination = local.nominated or tuple(sorted(n for n in remotes if n not in unavailable))
    plan = reconcile(local, remotes, unavailable, nomination, lost_for, 15.0)
    got = {
        "delete_on": plan.delete_on, "create_on": plan.create_on,
        "create_job_on": plan.create_job_on, "check": plan.check,
        "nominated": plan.nominated, "cluster_name": plan.cluster_name,
        "finish": plan.finish, "wait_lost": plan.wait_lost,
    }  # fmt: skip
    empty: dict[str, object] = {"delete_on": [], "create_on": [], "create_job_on": None, "check": None,
             "nominated": None, "cluster_name": None, "finish": None, "wait_lost": None}  # fmt: skip
    expected = {**empty, **want}
    if case.startswith("nobody admits"):
        got = {"check": got["check"]}
        expected = {"check": want["check"]}
    assert got == expected, case


def test_a_workload_never_runs_on_two_workers_once_chosen() -> None:
    """Once clusterName is set, another admitted copy is not taken: it is deleted."""
    plan = reconcile(
        READY_ON_A,
        {"a": RemoteCopy(admitted_at=9.0, has_job=True), "b": RemoteCopy(admitted_at=1.0)},
        [],
        (),
        None,
        15.0,
    )
    assert plan.delete_on == ["b"] and plan.create_job_on is None and plan.check is None


@pytest.mark.parametrize("tie", [True, False])
def test_the_worker_sent_the_job_stays_chosen_before_clusterName(tie: bool) -> None:
    """The Job went to "b" (its copy was seen admitted first); "a"'s copy is seen admitted
    since, by the same second (second-resolution times, ties by name) or even earlier. With
    no clusterName recorded yet (the hub was killed, or its pass lost the choice), "b" still
    wins: the Job is never created on "a" too, and "a"'s copy goes."""
    remotes = {
        "a": RemoteCopy(admitted_at=5.0 if tie else 4.0),
        "b": RemoteCopy(admitted_at=5.0, has_job=True),
        "c": WAITING,
    }
    plan = reconcile(PENDING, remotes, [], ("a", "b", "c"), None, 15.0)
    assert plan.create_job_on is None and plan.delete_on == ["a", "c"]
    assert plan.cluster_name == "b" and plan.check == ("Ready", 'The workload was admitted on "b"')


@pytest.mark.parametrize(
    ("case", "error", "active", "want"),
    [
        ("all active", None, {"a": True, "b": True},
         ("True", "Active", "The admission check is active")),
        ("some inactive", None, {"a": True, "b": False},
         ("True", "SomeActiveClusters", "Inactive clusters: [b]")),
        ("missing and inactive", None, {"a": False},
         ("False", "NoUsableClusters", "Missing clusters: [b], Inactive clusters: [a]")),
        ("bad parameters", "missing parameters reference", {},
         ("False", "BadConfig",
          "Cannot load the AdmissionChecks parameters: missing parameters reference")),
    ],
)  # fmt: skip
def test_admission_check_active(
    case: str, error: str | None, active: dict[str, bool], want: tuple[str, str, str]
) -> None:
    assert admission_check_active(error, ["a", "b"], active) == want, case


@pytest.mark.parametrize(
    ("params", "want"),
    [
        (None, "missing parameters reference"),
        ({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig"},
         "empty name: bad parameters reference"),
        ({"apiGroup": "x", "kind": "MultiKueueConfig", "name": "n"},
         'wrong group "x", expecting "kueue.x-k8s.io": bad parameters reference'),
        ({"apiGroup": "kueue.x-k8s.io", "kind": "Placement", "name": "n"},
         'wrong kind "Placement", expecting "MultiKueueConfig": bad parameters reference'),
        ({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "n"}, None),
    ],
)  # fmt: skip
def test_config_ref_error(params: dict[str, str] | None, want: str | None) -> None:
    assert config_ref_error(params) == want


@pytest.mark.parametrize(
    ("case", "rules", "want"),
    [
        ("one MultiKueue check", [CheckRule("mk1")], []),
        ("two MultiKueue checks", [CheckRule("mk2"), CheckRule("mk1")],
         [("MultipleMultiKueueAdmissionChecks", "Cannot use multiple MultiKueue AdmissionChecks "
           "on the same ClusterQueue, found: mk1,mk2")]),
        ("per flavor", [CheckRule("mk1", ("rf",))],
         [("MultiKueueAdmissionCheckAppliedPerFlavor",
           "Cannot specify MultiKueue AdmissionCheck per flavor, found: mk1")]),
        ("another check per flavor is fine", [CheckRule("mk1"), CheckRule("other", ("rf",))],
         []),
    ],
)  # fmt: skip
def test_multikueue_rules_of_a_cluster_queue(
    case: str, rules: list[CheckRule], want: list[tuple[str, str]]
) -> None:
    """Kueue's pkg/cache: at most one MultiKueue check per ClusterQueue, never per flavor."""
    checks = {n: AdmissionCheck(n, "kueue.x-k8s.io/multikueue") for n in ("mk1", "mk2")}
    checks["other"] = AdmissionCheck("other", "example.com/other")
    spec = ClusterQueue("cq", admission_checks=tuple(rules))
    assert inactive_reasons(spec, checks, dict.fromkeys(checks, True)) == want, case
