"""waitForPodsReady in scenario files: ``spec.configuration.waitForPodsReady`` and steps that say
whose pods run (``podsReady``/``podsNotReady``, the runner playing the job controller)."""

from __future__ import annotations

from typing import Any

import pytest
from sim_builders import scenario, workload

from gpuaas.core.cluster import Cluster
from gpuaas.sim.runner import run_scenario
from gpuaas.sim.scenario import ScenarioError, Step, parse_scenario

CONFIG = {
    "waitForPodsReady": {
        "enable": True,
        "timeout": "10s",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffBaseSeconds": 5, "backoffLimitCount": 1},
    }
}


def _states(steps: list[dict[str, Any]]) -> list[tuple[float, str, int]]:
    """(at, phase of default/a, its requeueState.count) after each step."""
    seen: list[tuple[float, str, int]] = []

    def on_step(step: Step, cluster: Cluster) -> None:
        wl = cluster.workloads["default/a"]
        seen.append((step.at, wl.phase.value, wl.requeue_state_count))

    outcome = run_scenario(parse_scenario(scenario(steps, configuration=CONFIG), "t.yaml"), on_step)
    assert outcome.error is None, outcome.error
    return seen


def test_not_ready_times_out_is_requeued_then_deactivated_past_the_limit() -> None:
    seen = _states(
        [
            {"at": 0, "apply": [workload("a", "3")]},
            {"at": 9},  # admitted, not ready yet
            {"at": 10},  # timed out at 10: evicted, back-off until 15
            {"at": 15},  # admitted again
            {"at": 25},  # timed out again: count + 1 > backoffLimitCount 1
        ]
    )
    assert seen == [
        (0, "Admitted", 0),
        (9, "Admitted", 0),
        (10, "Pending", 1),
        (15, "Admitted", 1),
        (25, "Inactive", 0),
    ]


def test_ready_pods_keep_the_workload() -> None:
    seen = _states(
        [
            {"at": 0, "apply": [workload("a", "3")]},
            {"at": 5, "podsReady": ["default/a"]},
            {"at": 100},
            {"at": 101, "podsNotReady": ["default/a"]},  # recoveryTimeout = timeout: 10 s
            {"at": 111},
        ]
    )
    assert [s[1] for s in seen] == ["Admitted", "Admitted", "Admitted", "Admitted", "Pending"]


def test_a_workload_never_applied_is_named() -> None:
    doc = scenario(
        [{"at": 0, "apply": [workload("a")]}, {"at": 1, "podsReady": ["default/nope"]}],
        configuration=CONFIG,
    )
    outcome = run_scenario(parse_scenario(doc, "t.yaml"))
    assert outcome.error is not None
    assert "podsReady[0]: workload default/nope was never applied" in outcome.error


def test_a_bad_key_is_named() -> None:
    doc = scenario([{"at": 0, "apply": [workload("a")]}, {"at": 1, "podsNotReady": ["bad"]}])
    with pytest.raises(ScenarioError, match=r"podsNotReady\[0\]"):
        parse_scenario(doc, "t.yaml")


def test_configuration_errors_name_the_field() -> None:
    bad = {"waitForPodsReady": {"enable": True, "timeout": "soon"}}
    with pytest.raises(ScenarioError, match=r"spec.configuration.waitForPodsReady.timeout"):
        parse_scenario(scenario([{"at": 0}], configuration=bad), "t.yaml")
