"""``gpuaas scenario run`` with OCM objects: ``expect.placements`` compared exactly, a wrong
expectation reported with the scheduler's reasons, a bad OCM object refused naming the field,
and deleting a ManagedCluster or changing scores moving the decision between steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuaas.sim.runner import run_file

G = "cluster.open-cluster-management.io"


def _mc(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/v1", "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": labels}, "spec": {"hubAcceptsClient": True}}  # fmt: skip


def _score(cluster: str, value: int) -> dict[str, Any]:
    return {"apiVersion": f"{G}/v1alpha1", "kind": "AddOnPlacementScore",
            "metadata": {"name": "resource-usage-score", "namespace": cluster},
            "status": {"scores": [{"name": "gpuClusterAvailable", "value": value}]}}  # fmt: skip


PLACEMENT = {
    "apiVersion": f"{G}/v1beta1", "kind": "Placement",
    "metadata": {"name": "best", "namespace": "kueue-system"},
    "spec": {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
        {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score",
                                                         "scoreName": "gpuClusterAvailable"}},
         "weight": 1}]}},
}  # fmt: skip
BINDING = {"apiVersion": f"{G}/v1beta2", "kind": "ManagedClusterSetBinding",
           "metadata": {"name": "global", "namespace": "kueue-system"},
           "spec": {"clusterSet": "global"}}  # fmt: skip


def _run(
    tmp: Path, steps: list[dict[str, Any]], objects: list[dict[str, Any]] | None = None
) -> Any:
    doc = {"apiVersion": "gpuaas.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "p"},
           "spec": {"objects": objects if objects is not None else
                    [BINDING, _mc("a"), _mc("b"), PLACEMENT, _score("a", 10), _score("b", 20)],
                    "steps": steps}}  # fmt: skip
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    [outcome] = run_file(path)
    return outcome


def test_decisions_follow_scores_and_deletions(tmp_path: Path) -> None:
    out = _run(tmp_path, [
        {"at": 0, "expect": {"placements": {"kueue-system/best": ["b"]}}},
        {"at": 5, "apply": [_score("a", 90)], "expect": {"placements": {"kueue-system/best": ["a"]}}},
        {"at": 9, "delete": [{"apiVersion": f"{G}/v1", "kind": "ManagedCluster", "name": "a"}],
         "expect": {"placements": {"kueue-system/best": ["b"]}}},
    ])  # fmt: skip
    assert out.error is None, out.error
    assert out.passed, [m for c in out.checks for m in c.mismatches]
    assert out.checks[0].observed["placements"] == {"kueue-system/best": ["b"]}


def test_a_wrong_expectation_says_why(tmp_path: Path) -> None:
    out = _run(tmp_path, [{"at": 0, "expect": {"placements": {"kueue-system/best": ["a"]}}}])
    assert not out.passed
    [m] = out.checks[0].mismatches
    assert "kueue-system/best: expected ['a'], observed ['b']" in m
    assert "a: score 10 below the 1 chosen (numberOfClusters: 1)" in m


def test_no_binding_no_clusters(tmp_path: Path) -> None:
    out = _run(tmp_path, [{"at": 0, "expect": {"placements": {"kueue-system/best": []}}}],
               objects=[_mc("a"), PLACEMENT])  # fmt: skip
    assert out.passed, [m for c in out.checks for m in c.mismatches]


def test_a_bad_ocm_object_is_a_file_error(tmp_path: Path) -> None:
    bad = {**PLACEMENT, "spec": {"numberOfClusters": "one"}}
    out = _run(tmp_path, [{"at": 0, "expect": {"pending": []}}], objects=[bad])
    assert out.error is not None
    assert (
        "spec.objects[0]: Placement kueue-system/best: spec.numberOfClusters: must be an integer"
        in out.error
    )
