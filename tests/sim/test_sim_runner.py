"""sim.runner on the real core Cluster: timeline, self-finishing workloads, expectations, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sim_builders import (
    base_objects,
    cluster_queue,
    job,
    local_queue,
    namespace,
    scenario,
    workload,
    write,
)

from gpuaas.core.cluster import Cluster
from gpuaas.sim.runner import RunReport, ScenarioOutcome, run_file, run_paths, run_scenario
from gpuaas.sim.scenario import Step, parse_scenario


def run(doc: dict[str, Any], on_step: Any = None) -> ScenarioOutcome:
    return run_scenario(parse_scenario(doc, "t.yaml"), on_step)


def mismatches(o: ScenarioOutcome) -> list[str]:
    assert o.error is None, o.error
    return [m for c in o.checks for m in c.mismatches]


def test_queue_then_admit_after_finish() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a", "3"), workload("b", "3")]},
                {
                    "at": 1,
                    "expect": {
                        "admitted": {
                            "default/a": {
                                "clusterQueue": "cq",
                                "flavors": {"main": {"cpu": "default"}},
                                "count": {"main": 1},
                            }
                        },
                        "pending": ["default/b"],
                        "preempted": [],
                        "clusterQueues": {
                            "cq": {
                                "admittedWorkloads": 1,
                                "pendingWorkloads": 1,
                                "usage": {"default": {"cpu": "3000m"}},
                            }
                        },
                    },
                },
                {
                    "at": 2,
                    "finish": ["default/a"],
                    "expect": {"admitted": ["default/b"], "pending": []},
                },
            ]
        )
    )
    assert o.passed and mismatches(o) == []
    assert [c.at for c in o.checks] == [1, 2]
    assert o.checks[0].observed == {
        "admitted": {
            "default/a": {
                "clusterQueue": "cq",
                "flavors": {"main": {"cpu": "default"}},
                "count": {"main": 1},
            }
        },
        "pending": ["default/b"],
        "preempted": [],
        "awaitingChecks": [],
    }


def test_mismatches_say_at_expected_and_observed() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a", "3"), workload("b", "3")]},
                {
                    "at": 7,
                    "expect": {
                        "admitted": {
                            "default/b": None,
                            "default/a": {
                                "clusterQueue": "other",
                                "flavors": {"main": {"cpu": "gpu"}},
                                "count": {"main": 2},
                            },
                        },
                        "pending": [],
                        "preempted": ["default/a"],
                        "clusterQueues": {
                            "cq": {
                                "admittedWorkloads": 2,
                                "pendingWorkloads": 0,
                                "usage": {"default": {"cpu": "1"}},
                            }
                        },
                    },
                },
            ]
        )
    )
    assert not o.passed and o.error is None
    got = mismatches(o)
    expected_fragments = [
        "at 7: admitted: expected ['default/a', 'default/b'], observed ['default/a'] (missing default/b)",
        "at 7: admitted default/a: clusterQueue expected other, observed cq",
        "at 7: admitted default/a: flavor of main/cpu expected gpu, observed default",
        "at 7: admitted default/a: count of main expected 2, observed 1",
        "at 7: pending: expected [], observed ['default/b'] (unexpected default/b)",
        "at 7: preempted: expected ['default/a'], observed [] (missing default/a)",
        "at 7: clusterQueue cq: admittedWorkloads expected 2, observed 1",
        "at 7: clusterQueue cq: pendingWorkloads expected 0, observed 1",
        "at 7: clusterQueue cq: usage of default/cpu expected 1, observed 3",
    ]
    assert got == expected_fragments


def test_omitted_sets_are_not_compared() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a", "3"), workload("b", "3")]},
                {"at": 1, "expect": {"pending": ["default/b"]}},
            ]
        )
    )
    assert o.passed


def test_preemption_is_reported_and_cumulative() -> None:
    objects = base_objects(within="LowerPriority")
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("low", "4", priority=1)]},
                {
                    "at": 5,
                    "apply": [workload("high", "4", priority=10)],
                    "expect": {
                        "admitted": ["default/high"],
                        "pending": ["default/low"],
                        "preempted": ["default/low"],
                    },
                },
                {
                    "at": 6,
                    "finish": ["default/high"],
                    "expect": {
                        "admitted": ["default/low"],
                        "pending": [],
                        "preempted": ["default/low"],
                    },
                },
            ],
            objects=objects,
        )
    )
    assert mismatches(o) == []


def test_runtime_seconds_finish_between_steps() -> None:
    o = run(
        scenario(
            [
                {
                    "at": 0,
                    "apply": [workload("a", "4", runtime=100), workload("b", "4", runtime=50)],
                },
                {"at": 99, "expect": {"admitted": ["default/a"], "pending": ["default/b"]}},
                # a finishes at 100, b is admitted at 100 and finishes at 150
                {"at": 149.5, "expect": {"admitted": ["default/b"], "pending": []}},
                {"at": 150, "expect": {"admitted": [], "pending": []}},
            ]
        )
    )
    assert mismatches(o) == []


def test_runtime_restarts_after_eviction() -> None:
    """Evicted at 50 after 50 s of its 100: readmitted at 80, it runs until 180, not 100."""
    seen: dict[float, Any] = {}

    def on_step(step: Step, cluster: Cluster) -> None:
        st = cluster.workloads["default/low"]
        seen[step.at] = (st.phase.value, st.admitted_at, st.admission_count)

    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("low", "4", priority=1, runtime=100)]},
                {
                    "at": 50,
                    "apply": [workload("high", "4", priority=10)],
                    "expect": {"pending": ["default/low"], "preempted": ["default/low"]},
                },
                {"at": 80, "finish": ["default/high"], "expect": {"admitted": ["default/low"]}},
                {"at": 179, "expect": {"admitted": ["default/low"]}},
                {"at": 180, "expect": {"admitted": [], "pending": []}},
            ],
            objects=base_objects(within="LowerPriority"),
        ),
        on_step,
    )
    assert mismatches(o) == []
    assert seen[80] == ("Admitted", 80, 2)
    assert seen[180][0] == "Finished"


def test_maximum_execution_time_deactivates_between_steps() -> None:
    """A Job labelled kueue.x-k8s.io/max-exec-time-seconds=30 and a Workload with
    spec.maximumExecutionTimeSeconds=20, admitted at 0 (2 CPUs each of 4): each is deactivated
    at its own instant between the steps, and what waited behind them is admitted then."""
    limited_job = job("train", "2")
    limited_job["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "30"
    limited_wl = workload("eval", "2")
    limited_wl["spec"]["maximumExecutionTimeSeconds"] = 20
    o = run(
        scenario(
            [
                {"at": 0, "apply": [limited_job, limited_wl, workload("next", "2")]},
                {"at": 19, "expect": {"admitted": ["default/train", "default/eval"]}},
                {
                    "at": 25,
                    "expect": {"admitted": ["default/train", "default/next"], "pending": []},
                },
                {
                    "at": 30,
                    "expect": {"admitted": ["default/next"], "pending": [], "preempted": []},
                },
            ]
        )
    )
    assert mismatches(o) == []


def test_finishes_at_one_instant_settle_once_in_time_order() -> None:
    """Two 2-CPU workloads end at 10; the 4-CPU one waiting behind them is admitted at 10."""
    admitted_at: dict[str, float | None] = {}

    def on_step(step: Step, cluster: Cluster) -> None:
        admitted_at.update({k: s.admitted_at for k, s in cluster.workloads.items()})

    o = run(
        scenario(
            [
                {
                    "at": 0,
                    "apply": [
                        workload("a", "2", runtime=10),
                        workload("b", "2", runtime=10),
                        workload("c", "4"),
                    ],
                },
                {"at": 20, "expect": {"admitted": ["default/c"], "pending": []}},
            ]
        ),
        on_step,
    )
    assert mismatches(o) == []
    assert admitted_at["default/c"] == 10


def test_delete_job_maps_to_its_workload() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [job("j1", "3"), job("j2", "3")]},
                {"at": 1, "expect": {"admitted": ["default/j1"], "pending": ["default/j2"]}},
                {
                    "at": 2,
                    "delete": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "namespace": "default",
                            "name": "j1",
                        }
                    ],
                    "expect": {"admitted": ["default/j2"], "pending": []},
                },
            ]
        )
    )
    assert mismatches(o) == []


def test_missing_cluster_queue_is_a_warning_not_an_error() -> None:
    objects = [namespace(), local_queue("lq", "nowhere")]
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a")]},
                {"at": 1, "expect": {"pending": ["default/a"], "admitted": []}},
            ],
            objects=objects,
        )
    )
    assert o.passed
    assert o.warnings, "a LocalQueue naming a missing ClusterQueue should warn"


def test_local_queue_added_later_naming_a_missing_cluster_queue_warns() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [local_queue("orphan", "missing-cq")]},
                {
                    "at": 1,
                    "apply": [workload("a", queue="orphan")],
                    "expect": {"pending": ["default/a"]},
                },
            ]
        )
    )
    assert o.passed
    assert any("missing-cq" in w for w in o.warnings), o.warnings


def test_fair_sharing_configuration_reaches_the_cluster() -> None:
    configs: list[Any] = []
    run(
        scenario(
            [{"at": 0}],
            configuration={
                "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]}
            },
        ),
        lambda step, cluster: configs.append(cluster.config),
    )
    assert configs[0].fair_sharing is True
    assert configs[0].preemption_strategies == ("LessThanInitialShare",)


BAD_RUNS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "finish never applied",
        scenario(
            [{"at": 0, "apply": [workload("a")]}, {"at": 3, "finish": ["default/a", "default/zz"]}]
        ),
        ["t.yaml: scenario 't': step 1 (at 3): finish[1]: workload default/zz was never applied"],
    ),
    (
        "finish before apply",
        scenario([{"at": 0, "finish": ["default/a"]}, {"at": 1, "apply": [workload("a")]}]),
        ["step 0 (at 0): finish[0]"],
    ),
    (
        "delete never applied",
        scenario(
            [
                {
                    "at": 2,
                    "delete": [
                        {"apiVersion": "batch/v1", "kind": "Job", "namespace": "x", "name": "j"}
                    ],
                }
            ]
        ),
        ["step 0 (at 2): delete[0]: Job x/j was never applied"],
    ),
    (
        "delete unknown kind",
        scenario([{"at": 2, "delete": [{"apiVersion": "v1", "kind": "Pod", "name": "j"}]}]),
        ["step 0 (at 2): delete[0]:", "Pod"],
    ),
    (
        "unknown kind",
        scenario(
            [{"at": 0, "apply": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}]
        ),
        ["step 0 (at 0): apply[0]:", "Pod", "kind"],
    ),
    (
        "malformed quantity in an object",
        scenario([{"at": 0, "apply": [workload("a", "lots")]}]),
        ["step 0 (at 0): apply[0]:", "default/a", "lots"],
    ),
    (
        "bad object at time 0",
        scenario([], objects=[*base_objects(), cluster_queue("bad", cpu="1.2.3")]),
        ["spec.objects[4]:", "bad", "1.2.3"],
    ),
    (
        "malformed expected usage",
        scenario(
            [{"at": 0, "expect": {"clusterQueues": {"cq": {"usage": {"default": {"cpu": "x1"}}}}}}]
        ),
        ["step 0 (at 0): expect.clusterQueues.cq.usage.default.cpu:"],
    ),
]


@pytest.mark.parametrize(("case", "doc", "fragments"), BAD_RUNS, ids=[b[0] for b in BAD_RUNS])
def test_unusable_scenarios_give_one_error(
    case: str, doc: dict[str, Any], fragments: list[str]
) -> None:
    o = run(doc)
    assert o.error is not None and not o.passed
    assert "\n" not in o.error and "Traceback" not in o.error
    for f in fragments:
        assert f in o.error, (f, o.error)
    assert o.checks == []


def test_run_paths_other_files_still_run_and_exit_codes(tmp_path: Path) -> None:
    ok = write(tmp_path / "a-ok.yaml", scenario([{"at": 0, "expect": {"admitted": []}}], name="ok"))
    failing = write(
        tmp_path / "b-fail.yaml",
        scenario([{"at": 0, "expect": {"admitted": ["default/x"]}}], name="fail"),
    )
    broken = tmp_path / "c-broken.yaml"
    broken.write_text("apiVersion: gpuaas.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x\n")
    assert run_paths([ok]).exit_code == 0
    assert run_paths([ok, failing]).exit_code == 1
    report = run_paths([broken, ok, failing])
    assert report.exit_code == 2
    assert [(o.name, o.passed) for o in report.outcomes] == [
        (None, False),
        ("ok", True),
        ("fail", False),
    ]
    assert report.outcomes[0].error is not None and f"{broken}:" in report.outcomes[0].error
    assert RunReport([]).exit_code == 0


def test_directory_skips_manifest_files_but_not_broken_ones(tmp_path: Path) -> None:
    write(tmp_path / "setup.yaml", *base_objects())
    write(tmp_path / "scenario.yaml", scenario([{"at": 0}], name="s"))
    report = run_paths([tmp_path])
    assert [o.name for o in report.outcomes] == ["s"] and report.exit_code == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.json").write_text(
        '{"apiVersion": "gpuaas.dev/v1alpha1", "kind": "Scenario"}'
    )
    report = run_paths([tmp_path])
    assert report.exit_code == 2
    assert "metadata" in (report.outcomes[-1].error or "")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_paths([empty]).outcomes[0].error == f"{empty}: no scenario file under it"


def test_run_file_json_scenario(tmp_path: Path) -> None:
    import json

    p = tmp_path / "s.json"
    p.write_text(
        json.dumps(
            scenario(
                [
                    {"at": 0, "apply": [workload("a")]},
                    {"at": 1, "expect": {"admitted": ["default/a"]}},
                ]
            )
        )
    )
    [o] = run_file(p)
    assert o.passed, o


def _checked_objects() -> list[dict[str, Any]]:
    cq = cluster_queue()
    cq["spec"]["admissionChecks"] = ["prov"]
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/prov"},
    }
    return [namespace(), {**base_objects()[1]}, check, cq, local_queue()]


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        pytest.param(
            {"workload": "default/b", "check": "prov", "state": "Ready"},
            "the workload holds no quota (Pending)",
            id="no-quota",
        ),
        pytest.param(
            {"workload": "default/a", "check": "other", "state": "Ready"},
            "admission check other does not apply to it (applies: prov)",
            id="check-does-not-apply",
        ),
        pytest.param(
            {"workload": "default/nobody", "check": "prov", "state": "Ready"},
            "the workload doesn't exist",
            id="no-workload",
        ),
    ],
)
def test_admission_check_step_errors_name_the_step_and_field(
    update: dict[str, Any], reason: str
) -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a", "3"), workload("b", "3")]},
                {"at": 1, "admissionChecks": [update]},
            ],
            objects=_checked_objects(),
        )
    )
    assert o.error is not None
    assert "step 1 (at 1): admissionChecks[0]" in o.error
    assert "status.admissionChecks[" in o.error
    assert reason in o.error


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"workload": "default/a", "check": "prov", "state": "Done"}, "state: expected one of"),
        ({"workload": "default/a", "check": "prov"}, "state: expected one of"),
        ({"workload": "a", "check": "prov", "state": "Ready"}, "expected namespace/name"),
        (
            {"workload": "default/a", "check": "prov", "state": "Ready", "requeueAfterSeconds": 5},
            "only a Retry state carries it",
        ),
        ({"workload": "default/a", "check": "prov", "state": "Ready", "x": 1}, "unknown field"),
    ],
)
def test_admission_check_step_shape_errors(entry: dict[str, Any], reason: str) -> None:
    with pytest.raises(Exception, match="admissionChecks") as info:
        parse_scenario(scenario([{"at": 1, "admissionChecks": [entry]}]), "t.yaml")
    assert reason in str(info.value)


def test_awaiting_checks_is_reported_and_compared_exactly() -> None:
    o = run(
        scenario(
            [
                {"at": 0, "apply": [workload("a", "3")]},
                {"at": 1, "expect": {"awaitingChecks": []}},
            ],
            objects=_checked_objects(),
        )
    )
    assert mismatches(o) == [
        "at 1: awaitingChecks: expected [], observed ['default/a'] (unexpected default/a)"
    ]
    assert o.checks[0].observed["awaitingChecks"] == ["default/a"]
