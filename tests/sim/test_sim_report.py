"""sim.report: the human lines and the JSON document's exact shape."""

from __future__ import annotations

import json

from gpuaas.sim.report import render_human, render_json, to_document, warning_lines
from gpuaas.sim.runner import CheckResult, RunReport, ScenarioOutcome

OBSERVED = {
    "admitted": {
        "ns/a": {"clusterQueue": "cq", "flavors": {"main": {"cpu": "f"}}, "count": {"main": 1}}
    },
    "pending": ["ns/b"],
    "preempted": [],
}


def _report() -> RunReport:
    return RunReport(
        [
            ScenarioOutcome(
                "a.yaml",
                "good",
                [CheckResult(0, 0, True, OBSERVED, [])],
                warnings=["ClusterQueue x is inactive"],
            ),
            ScenarioOutcome(
                "b.yaml",
                "bad",
                [
                    CheckResult(
                        2.5, 1, False, OBSERVED, ["at 2.5: pending: expected [], observed ['ns/b']"]
                    )
                ],
            ),
            ScenarioOutcome("c.yaml", None, error="c.yaml:3: invalid YAML: oops"),
        ]
    )


def test_human_output() -> None:
    assert render_human(_report()).splitlines() == [
        "PASS good (a.yaml)",
        "FAIL bad (b.yaml)",
        "    at 2.5: pending: expected [], observed ['ns/b']",
        "ERROR - (c.yaml)",
        "    c.yaml:3: invalid YAML: oops",
        "1 passed, 1 failed, 1 could not be used",
    ]
    assert warning_lines(_report()) == ["warning: a.yaml: good: ClusterQueue x is inactive"]


def test_json_document_shape() -> None:
    doc = json.loads(render_json(_report()))
    assert doc == to_document(_report())
    assert set(doc) == {"scenarios", "passed", "failed"}
    assert (doc["passed"], doc["failed"]) == (1, 2)
    good, bad, broken = doc["scenarios"]
    assert set(good) == {"file", "name", "passed", "checks"}
    assert good["checks"] == [{"at": 0, "passed": True, "observed": OBSERVED, "mismatches": []}]
    assert bad["passed"] is False and bad["checks"][0]["at"] == 2.5
    assert broken == {
        "file": "c.yaml",
        "name": None,
        "passed": False,
        "checks": [],
        "error": "c.yaml:3: invalid YAML: oops",
    }
