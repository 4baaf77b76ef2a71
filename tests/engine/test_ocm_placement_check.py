"""The placement add-on's admission check controller in one engine, pass by pass (no threads, no
workers): PlacementDecisions and Placement status, the MultiKueueConfig named after the Placement
kept in step with the decisions, the check's Active condition with the add-on's reasons, the
finalizer's cleanup, and what explain says. Scores are written as the collector would."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gpuaas.cli.cluster import kubeconfig_for
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import NotFound
from gpuaas.engine.multikueue import placements
from gpuaas.engine.multikueue.placement_check import FINALIZER, PlacementCheckController
from gpuaas.engine.multikueue.scores import ScoreCollector, put_score
from gpuaas.vocab.kinds import BY_KIND, MULTIKUEUE_CONFIG

G = "cluster.open-cluster-management.io"
AC = BY_KIND["AdmissionCheck"]


def _create(e: Engine, kind: str, doc: dict[str, Any], ns: str | None = None) -> None:
    e.create(BY_KIND[kind], ns, doc)


def _setup(e: Engine) -> PlacementCheckController:
    for ns in ("kueue-system", "default"):
        _create(e, "Namespace", {"metadata": {"name": ns}})
    for name, label in (("c1", "nvidia-l4"), ("c2", "nvidia-tesla-t4"), ("c3", "nvidia-tesla-t4")):
        _create(e, "ManagedCluster", {"apiVersion": f"{G}/v1", "kind": "ManagedCluster",
                                      "metadata": {"name": name, "labels": {"accelerator": label}},
                                      "spec": {"hubAcceptsClient": True}})  # fmt: skip
    _create(e, "ManagedClusterSetBinding", {"apiVersion": f"{G}/v1beta2",
            "kind": "ManagedClusterSetBinding", "metadata": {"name": "global"},
            "spec": {"clusterSet": "global"}}, "kueue-system")  # fmt: skip
    _create(e, "AdmissionCheck", {"metadata": {"name": "ocm"}, "spec": {
        "controllerName": "open-cluster-management.io/placement",
        "parameters": {"apiGroup": G, "kind": "Placement", "name": "gpus"}}})  # fmt: skip
    ctl = PlacementCheckController("kueue-system")
    ctl.engine = e
    e.placement_namespace = "kueue-system"
    placements.ensure_default_sets(e)
    return ctl


def _placement(e: Engine, spec: dict[str, Any], *, replace: bool = False) -> None:
    doc = {"apiVersion": f"{G}/v1beta1", "kind": "Placement",
           "metadata": {"name": "gpus", "namespace": "kueue-system"}, "spec": spec}  # fmt: skip
    if replace:
        e.replace(BY_KIND["Placement"], "kueue-system", "gpus", doc)
    else:
        e.create(BY_KIND["Placement"], "kueue-system", doc)


def _active(e: Engine) -> tuple[str, str, str]:
    conds = e.get(AC, None, "ocm").get("status", {}).get("conditions", [])
    c = next(c for c in conds if c["type"] == "Active")
    return c["status"], c["reason"], c["message"]


def _config(e: Engine) -> list[str] | None:
    try:
        return list(e.get(MULTIKUEUE_CONFIG, None, "gpus")["spec"]["clusters"])
    except NotFound:
        return None


T4 = {"predicates": [{"requiredClusterSelector": {"labelSelector": {
    "matchLabels": {"accelerator": "nvidia-tesla-t4"}}}}]}  # fmt: skip
BEST = {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
    {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score",
                                                     "scoreName": "gpuClusterAvailable"}},
     "weight": 1}]}}  # fmt: skip


def test_placement_not_found_then_config_follows_decisions(engine: Engine) -> None:
    ctl = _setup(engine)
    ctl.sync_once()
    assert _active(engine) == ("False", "PlacementNotFound", "Placement gpus not found")
    assert FINALIZER in engine.get(AC, None, "ocm")["metadata"]["finalizers"]
    _placement(engine, T4)
    ctl.sync_once()
    assert _config(engine) == ["c2", "c3"]
    assert _active(engine) == ("True", "Active", "MultiKueueConfig gpus is generated successfully")
    pd = engine.get(BY_KIND["PlacementDecision"], "kueue-system", "gpus-decision-1")
    assert pd["metadata"]["labels"][f"{G}/placement"] == "gpus"
    assert [d["clusterName"] for d in pd["status"]["decisions"]] == ["c2", "c3"]
    status = engine.get(BY_KIND["Placement"], "kueue-system", "gpus")["status"]
    assert status["numberOfSelectedClusters"] == 2
    # Scores decide between the two T4 clusters; a change moves the choice.
    _placement(engine, {**T4, **BEST}, replace=True)
    put_score(engine, "c2", "resource-usage-score", [{"name": "gpuClusterAvailable", "value": -80}])
    put_score(engine, "c3", "resource-usage-score", [{"name": "gpuClusterAvailable", "value": -70}])
    ctl.sync_once()
    assert _config(engine) == ["c3"]
    put_score(engine, "c3", "resource-usage-score", [{"name": "gpuClusterAvailable", "value": -90}])
    ctl.sync_once()
    assert _config(engine) == ["c2"]


def test_no_cluster_deletes_the_config_and_explain_says_why(engine: Engine) -> None:
    ctl = _setup(engine)
    _placement(engine, T4)
    ctl.sync_once()
    assert _config(engine) == ["c2", "c3"]
    label = {"predicates": [{"requiredClusterSelector": {"labelSelector": {
        "matchLabels": {"accelerator": "nvidia-h100"}}}}]}  # fmt: skip
    _placement(engine, label, replace=True)
    ctl.sync_once()
    assert _config(engine) is None
    assert _active(engine) == ("False", "NoClustersAvailable",
                               "No clusters available for placement gpus")  # fmt: skip
    cond = engine.get(BY_KIND["Placement"], "kueue-system", "gpus")["status"]["conditions"]
    assert {c["type"]: c["reason"] for c in cond} == {
        "PlacementMisconfigured": "Succeedconfigured",
        "PlacementSatisfied": "NoManagedClusterMatched",
    }
    # A workload of a ClusterQueue with the check: explain names the Placement and each cluster.
    _create(engine, "ResourceFlavor", {"metadata": {"name": "rf"}})
    groups = [{"coveredResources": ["cpu"],
               "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]  # fmt: skip
    _create(engine, "ClusterQueue", {"metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": groups, "admissionChecks": ["ocm"]}})  # fmt: skip
    _create(engine, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}},
            "default")  # fmt: skip
    _create(engine, "Workload", {"metadata": {"name": "w"}, "spec": {"queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}, "default")  # fmt: skip
    info = engine.explain("default", "w")
    assert "ocm" in info["reason"]  # the inactive check keeps the ClusterQueue inactive
    [p] = info["placements"]
    assert p["check"] == "ocm" and p["reason"] == "NoManagedClusterMatched"
    assert p["excluded"]["c2"] == "matches none of the Placement's predicates"
    assert "never Admitted here" in p["note"]


def test_deleting_the_check_removes_its_config_and_finalizer(engine: Engine) -> None:
    ctl = _setup(engine)
    _placement(engine, T4)
    ctl.sync_once()
    assert _config(engine) == ["c2", "c3"]
    engine.delete(AC, None, "ocm")
    assert engine.get(AC, None, "ocm")["metadata"].get("deletionTimestamp")  # held by finalizers
    ctl.sync_once()
    assert _config(engine) is None
    with pytest.raises(NotFound):
        engine.get(AC, None, "ocm")


def test_decisions_of_a_deleted_placement_go(engine: Engine) -> None:
    ctl = _setup(engine)
    _placement(engine, T4)
    ctl.sync_once()
    engine.delete(BY_KIND["Placement"], "kueue-system", "gpus")
    ctl.sync_once()
    with pytest.raises(NotFound):
        engine.get(BY_KIND["PlacementDecision"], "kueue-system", "gpus-decision-1")
    assert _active(engine)[1] == "PlacementNotFound"


def test_status_written_once_when_nothing_changes(engine: Engine) -> None:
    ctl = _setup(engine)
    _placement(engine, T4)
    ctl.sync_once()
    rv = engine.get(BY_KIND["Placement"], "kueue-system", "gpus")["metadata"]["resourceVersion"]
    ctl.sync_once()
    ctl.sync_once()
    assert (
        engine.get(BY_KIND["Placement"], "kueue-system", "gpus")["metadata"]["resourceVersion"]
        == rv
    )


def test_a_worker_that_does_not_answer_is_tainted_and_left_out(engine: Engine) -> None:
    """The collector taints a ManagedCluster whose worker does not answer (OCM's unreachable
    taint): a Placement without tolerations leaves it out, the seed's (Exists) keeps it."""
    ctl = _setup(engine)
    dead = kubeconfig_for("c2", "http://127.0.0.1:9", "t", None)  # port 9: nothing listens
    engine.create(BY_KIND["Secret"], "kueue-system", {"metadata": {"name": "placement-score-c2"},
                  "data": {"kubeconfig": base64.b64encode(dead.encode()).decode()}})  # fmt: skip
    collector = ctl.collector = ScoreCollector("kueue-system")
    try:
        _reachability(engine, ctl)
    finally:
        collector.close()


def _reachability(engine: Engine, ctl: PlacementCheckController) -> None:
    _placement(engine, T4)
    ctl.sync_once()
    mc = engine.get(BY_KIND["ManagedCluster"], None, "c2")
    assert [t["key"] for t in mc["spec"]["taints"]] == [f"{G}/unreachable"]
    cond = next(
        c for c in mc["status"]["conditions"] if c["type"] == "ManagedClusterConditionAvailable"
    )
    assert cond["status"] == "Unknown"
    ctl.sync_once()
    assert _config(engine) == ["c3"]
    tolerate = {**T4, "tolerations": [{"key": f"{G}/unreachable", "operator": "Exists"}]}
    _placement(engine, tolerate, replace=True)
    ctl.sync_once()
    assert _config(engine) == ["c2", "c3"]


def test_a_pass_with_no_placement_and_nothing_changed_reads_nothing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = _setup(engine)
    passes: list[float] = []
    real = placements.sync
    monkeypatch.setattr(placements, "sync", lambda e, now: passes.append(now) or real(e, now))
    ctl.sync_once()
    assert _active(engine)[1] == "PlacementNotFound"
    ctl.sync_once()  # reads back its own writes once
    ran = len(passes)
    for _ in range(3):
        ctl.sync_once()
    assert len(passes) == ran <= 2  # nothing it reads changed: skipped
    _placement(engine, T4)  # made by another: the next pass sees it
    ctl.sync_once()
    assert _active(engine) == ("True", "Active", "MultiKueueConfig gpus is generated successfully")
    assert _config(engine) == ["c2", "c3"]
    ran = len(passes)
    ctl.sync_once()  # with a Placement, every pass schedules (the clock may move its result)
    assert len(passes) == ran + 1
    engine.delete(BY_KIND["Placement"], "kueue-system", "gpus")
    ctl.sync_once()
    ctl.sync_once()
    assert _active(engine)[1] == "PlacementNotFound"
