"""examples/: every scenario passes, its embedded objects equal the manifest files beside it, and
``python -m gpuaas scenario run examples/`` exits 0 with the documented JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.core.cluster import Cluster
from gpuaas.sim.runner import run_file, run_scenario
from gpuaas.sim.scenario import Step, load_scenarios

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SCENARIOS = sorted(EXAMPLES.glob("**/scenario*.yaml"))
MAIN_SCENARIOS = sorted(EXAMPLES.glob("*/scenario.yaml"))
VARIANTS = sorted(EXAMPLES.glob("*/variants/scenario*.yaml"))

# Variant file -> the objects it deliberately changes from the example's manifests.
VARIANT_CHANGES: dict[str, set[tuple[str, str | None, str]]] = {
    "004-jobs/variants/scenario-threshold-blocks-preemption.yaml": {
        ("ClusterQueue", None, "team-a-cq")
    },
    "004-jobs/variants/scenario-no-borrow-within-cohort.yaml": {
        ("ClusterQueue", None, "team-a-cq")
    },
}


def _id(p: Path) -> str:
    return p.relative_to(EXAMPLES).as_posix()


def _manifests(folder: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted(folder.glob("*.yaml")):
        if not f.name.startswith("scenario"):
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d is not None)
    return docs


def _scenario_objects(path: Path) -> list[dict[str, Any]]:
    [sc] = load_scenarios(path)
    return list(sc.objects) + [doc for step in sc.steps for doc in step.apply]


def _ref(doc: dict[str, Any]) -> tuple[str, str | None, str]:
    meta = doc["metadata"]
    namespaced = doc["kind"] not in {
        "Namespace",
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "WorkloadPriorityClass",
    }
    return doc["kind"], (meta.get("namespace", "default") if namespaced else None), meta["name"]


def _canon(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True)


def test_examples_are_there() -> None:
    folders = {p.name for p in EXAMPLES.iterdir() if p.is_dir()}
    assert {
        "000-sla-tiers",
        "001-gpu-pool",
        "002-multi-cluster",
        "003-rayclusters",
        "004-jobs",
    } <= folders
    for folder in folders:
        assert (EXAMPLES / folder / "README.md").is_file(), folder
    assert len(VARIANTS) == len(VARIANT_CHANGES)


@pytest.mark.parametrize("path", SCENARIOS, ids=_id)
def test_example_scenario_passes(path: Path) -> None:
    outcomes = run_file(path)
    assert outcomes, path
    for o in outcomes:
        assert o.error is None, o.error
        assert o.checks, "an example without expectations proves nothing"
        assert o.passed, [m for c in o.checks for m in c.mismatches]
        assert o.warnings == [], o.warnings


@pytest.mark.parametrize("path", MAIN_SCENARIOS, ids=_id)
def test_scenario_objects_equal_the_manifest_files(path: Path) -> None:
    manifests = _manifests(path.parent)
    assert manifests, "the example's manifests are missing"
    assert Counter(map(_canon, _scenario_objects(path))) == Counter(map(_canon, manifests))


@pytest.mark.parametrize("path", VARIANTS, ids=_id)
def test_variant_changes_only_what_it_says(path: Path) -> None:
    manifests = {_ref(d): d for d in _manifests(path.parent.parent)}
    objects = {_ref(d): d for d in _scenario_objects(path)}
    assert set(objects) == set(manifests)
    changed = {ref for ref, doc in objects.items() if _canon(doc) != _canon(manifests[ref])}
    assert changed == VARIANT_CHANGES[_id(path)]


@pytest.mark.parametrize(
    ("example", "victim", "preemptor", "at"),
    [
        ("004-jobs/scenario.yaml", "team-b/team-b-job", "team-a/team-a-job", 60),
        ("000-sla-tiers/scenario.yaml", "team-b/raycluster-dev", "team-a/raycluster-prod", 120),
        ("003-rayclusters/scenario.yaml", "team-b/raycluster-dev", "team-a/raycluster-prod", 75),
    ],
)
def test_preemption_reason_is_reclaim_while_borrowing(
    example: str, victim: str, preemptor: str, at: float
) -> None:
    """What expectations cannot state: the victim's Preempted reason and its preemptor."""
    seen: dict[float, tuple[str | None, str | None, str | None]] = {}

    def on_step(step: Step, cluster: Cluster) -> None:
        st = cluster.workloads.get(victim)
        cond = st.conditions.get("Preempted") if st else None
        if st is not None:
            seen[step.at] = (st.preemption_reason, st.preempted_by, cond.reason if cond else None)

    [sc] = load_scenarios(EXAMPLES / example)
    assert run_scenario(sc, on_step).passed
    reason, by, condition_reason = seen[at]
    assert (reason, by) == ("InCohortReclaimWhileBorrowing", preemptor)
    assert condition_reason == "InCohortReclaimWhileBorrowing"


def test_cli_runs_all_examples_as_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuaas", "scenario", "run", "examples/", "--output", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    doc = json.loads(proc.stdout)
    assert set(doc) == {"scenarios", "passed", "failed"}
    assert (doc["passed"], doc["failed"]) == (len(SCENARIOS), 0)
    assert sorted(s["file"] for s in doc["scenarios"]) == sorted(
        p.relative_to(REPO).as_posix() for p in SCENARIOS
    )
    for s in doc["scenarios"]:
        assert set(s) == {"file", "name", "passed", "checks"}
        assert s["passed"] is True and s["checks"]
        for c in s["checks"]:
            assert set(c) == {"at", "passed", "observed", "mismatches"}
            # gpuaas's extension (docs/placement.md): "placements" where expect.placements is given
            base = {"admitted", "pending", "preempted", "awaitingChecks"}
            assert set(c["observed"]) in (base, base | {"placements"})
            for adm in c["observed"]["admitted"].values():
                assert set(adm) == {"clusterQueue", "flavors", "count"}
