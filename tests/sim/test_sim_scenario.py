"""sim.scenario: the Scenario envelope is parsed exactly as scenario-format.md says, and every
malformed file is rejected with one message naming the file, the step and the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from sim_builders import scenario, workload, write

from gpuaas.core.config import SchedulerConfig
from gpuaas.sim.scenario import ScenarioError, load_scenarios, parse_scenario


def _doc(**spec: Any) -> dict[str, Any]:
    doc = scenario([{"at": 0, "apply": [workload("a")]}])
    doc["spec"].update(spec)
    return doc


def test_full_expectation_shapes() -> None:
    doc = _doc(
        steps=[
            {"at": 0, "apply": [workload("a")]},
            {
                "at": 1.5,
                "delete": [
                    {"apiVersion": "batch/v1", "kind": "Job", "namespace": "ns", "name": "j"}
                ],
                "finish": ["default/a"],
                "expect": {
                    "admitted": {
                        "default/a": {
                            "clusterQueue": "cq",
                            "flavors": {"main": {"cpu": "default"}},
                            "count": {"main": 2},
                        },
                        "default/b": None,
                    },
                    "pending": [],
                    "preempted": ["default/c"],
                    "clusterQueues": {
                        "cq": {"admittedWorkloads": 1, "usage": {"default": {"cpu": "1500m"}}}
                    },
                },
            },
            {"at": 1.5, "expect": {"admitted": ["default/a"]}},
        ]
    )
    sc = parse_scenario(doc, "f.yaml")
    assert sc.name == "t" and sc.config == SchedulerConfig()
    assert [s.at for s in sc.steps] == [0, 1.5, 1.5]
    s1 = sc.steps[1]
    assert s1.delete[0].kind == "Job" and s1.delete[0].namespace == "ns"
    assert s1.finish == ["default/a"]
    assert s1.expect is not None and s1.expect.admitted is not None
    a = s1.expect.admitted["default/a"]
    assert (a.cluster_queue, a.flavors, a.count) == (
        "cq",
        {"main": {"cpu": "default"}},
        {"main": 2},
    )
    assert s1.expect.admitted["default/b"].cluster_queue is None
    assert s1.expect.pending == [] and s1.expect.preempted == ["default/c"]
    assert s1.expect.cluster_queues["cq"].admitted_workloads == 1
    assert s1.expect.cluster_queues["cq"].usage == {"default": {"cpu": "1500m"}}
    s2 = sc.steps[2]
    assert s2.expect is not None and s2.expect.admitted is not None
    assert list(s2.expect.admitted) == ["default/a"]
    assert s2.expect.pending is None and s2.expect.preempted is None


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        (None, SchedulerConfig()),
        ({}, SchedulerConfig()),
        ({"fairSharing": {"enable": True}}, SchedulerConfig(fair_sharing=True)),
        (
            {"fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]}},
            SchedulerConfig(fair_sharing=True, preemption_strategies=("LessThanInitialShare",)),
        ),
    ],
)
def test_configuration(configuration: dict[str, Any] | None, expected: SchedulerConfig) -> None:
    doc = _doc()
    if configuration is not None:
        doc["spec"]["configuration"] = configuration
    assert parse_scenario(doc, "f.yaml").config == expected


def _set(path: str, value: Any) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _two_steps(doc: dict[str, Any]) -> None:
    doc["spec"]["steps"] = [{"at": 5}, {"at": 3}]


BAD: list[tuple[str, Any, str]] = [
    ("wrong kind", _set("kind", "Job"), "kind: expected 'Scenario'"),
    ("wrong apiVersion", _set("apiVersion", "gpuaas.dev/v9"), "apiVersion: expected"),
    ("no name", _set("metadata", {}), "metadata.name: required"),
    ("spec typo", _set("spec.step", []), "spec.step: unknown field"),
    ("steps not list", _set("spec.steps", {"at": 0}), "spec.steps: expected a list"),
    ("out of order", _two_steps, "step 1: at: 3 is earlier than the previous step's 5"),
    ("missing at", _set("spec.steps.0", {"apply": []}), "step 0: at: required"),
    ("string at", _set("spec.steps.0.at", "10s"), "step 0: at: expected a non-negative number"),
    ("bool at", _set("spec.steps.0.at", True), "at: expected a non-negative number"),
    ("negative at", _set("spec.steps.0.at", -1), "at: expected a non-negative number"),
    ("step typo", _set("spec.steps.0.expected", {}), "step 0: expected: unknown field"),
    ("apply not list", _set("spec.steps.0.apply", {"a": 1}), "apply: expected a list"),
    ("apply scalar", _set("spec.steps.0.apply", ["x"]), "apply[0]: expected an object"),
    ("finish no slash", _set("spec.steps.0.finish", ["a"]), "finish[0]: expected namespace/name"),
    ("delete no name", _set("spec.steps.0.delete", [{"kind": "Job"}]), "delete[0].name: required"),
    ("delete typo", _set("spec.steps.0.delete", [{"kind": "Job", "nam": "x"}]), "delete[0].nam"),
    ("expect typo", _set("spec.steps.0.expect", {"admited": []}), "expect.admited: unknown field"),
    (
        "pending not list",
        _set("spec.steps.0.expect", {"pending": "a/b"}),
        "expect.pending: expected",
    ),
    (
        "admitted bad field",
        _set("spec.steps.0.expect", {"admitted": {"a/b": {"queue": "x"}}}),
        "expect.admitted.a/b.queue: unknown field",
    ),
    (
        "count not int",
        _set("spec.steps.0.expect", {"admitted": {"a/b": {"count": {"main": "2"}}}}),
        "expect.admitted.a/b.count.main: expected a non-negative integer",
    ),
    (
        "cq bad field",
        _set("spec.steps.0.expect", {"clusterQueues": {"cq": {"usage": {"f": {"cpu": [1]}}}}}),
        "expect.clusterQueues.cq.usage.f.cpu: expected a quantity",
    ),
    (
        "unknown strategy",
        _set("spec.configuration", {"fairSharing": {"preemptionStrategies": ["Fair"]}}),
        "preemptionStrategies: unknown strategy 'Fair'",
    ),
    (
        "unsupported configuration",
        _set("spec.configuration", {"manageJobsWithoutQueueName": True}),
        "spec.configuration.manageJobsWithoutQueueName: not supported",
    ),
    (
        "enable not bool",
        _set("spec.configuration", {"fairSharing": {"enable": "yes"}}),
        "fairSharing.enable: expected true or false",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_scenarios_are_named(case: str, mutate: Any, message: str) -> None:
    doc = copy.deepcopy(_doc())
    mutate(doc)
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(doc, "dir/f.yaml")
    text = str(exc.value)
    assert text.startswith("dir/f.yaml: ")
    assert message in text
    assert "\n" not in text


def test_load_multi_document_file_and_manifest_skipping(tmp_path: Path) -> None:
    two = write(tmp_path / "two.yaml", scenario([], name="one"), scenario([], name="two"))
    assert [s.name for s in load_scenarios(two)] == ["one", "two"]
    manifests = write(tmp_path / "setup.yaml", workload("a"), workload("b"))
    assert load_scenarios(manifests, skip_manifests=True) == []
    with pytest.raises(ScenarioError, match="kind: expected 'Scenario'"):
        load_scenarios(manifests)
    mixed = write(tmp_path / "mixed.yaml", scenario([], name="one"), workload("a"))
    with pytest.raises(ScenarioError, match="document 2: kind"):
        load_scenarios(mixed, skip_manifests=True)
    typo = write(tmp_path / "typo.yaml", {**scenario([]), "kind": "Scenaro"})
    with pytest.raises(ScenarioError, match="kind: expected 'Scenario'"):
        load_scenarios(typo, skip_manifests=True)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(ScenarioError, match="no document"):
        load_scenarios(empty)
