"""OCM's placement scheduler (``core.placement.schedule``), case by case, as OCM's
``pkg/placement/controllers/scheduling`` decides: bindings and cluster sets, predicates ORed,
taints and tolerations, numberOfClusters, Additive and Exact prioritizer policies with BuiltIn and
AddOn scores, ties by name; plus the documents' checks (``core.ocm``) and the GPU score formula."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.core import ocm
from gpuaas.core.manifest_common import ManifestError
from gpuaas.core.placement import PlacementResult, Snapshot, schedule

G = "cluster.open-cluster-management.io"
NOW = 1_800_000_000.0


def cluster(name: str, taints: list[dict[str, Any]] | None = None, claims: dict[str, str] | None = None,
            alloc: dict[str, str] | None = None, **labels: str) -> ocm.ManagedCluster:  # fmt: skip
    doc = {"apiVersion": f"{G}/v1", "kind": "ManagedCluster",
           "metadata": {"name": name, "labels": {k.replace("_", "-"): v for k, v in labels.items()}},
           "spec": {"hubAcceptsClient": True, "taints": taints or []},
           "status": {"clusterClaims": [{"name": k, "value": v} for k, v in (claims or {}).items()],
                      "allocatable": alloc or {}}}  # fmt: skip
    return ocm.parse_managed_cluster(doc)


def placement(spec: dict[str, Any], name: str = "p", ns: str = "kueue-system") -> ocm.Placement:
    return ocm.parse_placement({"apiVersion": f"{G}/v1beta1", "kind": "Placement",
                                "metadata": {"name": name, "namespace": ns}, "spec": spec})  # fmt: skip


GLOBAL = ocm.parse_cluster_set({"apiVersion": f"{G}/v1beta2", "kind": "ManagedClusterSet",
                                "metadata": {"name": "global"},
                                "spec": {"clusterSelector": {"selectorType": "LabelSelector",
                                                             "labelSelector": {}}}})  # fmt: skip
GPUS = ocm.ManagedClusterSet("gpus")  # ExclusiveClusterSetLabel


def score(c: str, value: int, name: str = "gpuClusterAvailable",
          valid_until: float | None = None) -> ocm.AddOnScore:  # fmt: skip
    return ocm.AddOnScore(c, "resource-usage-score", {name: value}, valid_until)


THREE = [cluster("cluster1"), cluster("cluster2", accelerator="nvidia-tesla-t4"),
         cluster("cluster3", accelerator="nvidia-tesla-t4")]  # fmt: skip
SCORE3 = {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
    {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score",
                                                     "scoreName": "gpuClusterAvailable"}},
     "weight": 1}]}}  # fmt: skip
T4 = {"labelSelector": {"matchLabels": {"accelerator": "nvidia-tesla-t4"}}}


@dataclass
class Case:
    name: str
    spec: dict[str, Any]
    want: tuple[str, ...]
    reason: str = "AllDecisionsScheduled"
    clusters: list[ocm.ManagedCluster] = field(default_factory=lambda: THREE)
    bindings: list[str] = field(default_factory=lambda: ["global"])
    scores: list[ocm.AddOnScore] = field(default_factory=list)
    decided: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)  # cluster -> part of its exclusion reason


CASES = [
    Case("scenario 1: all clusters of the global set", {"clusterSets": ["global"]},
         ("cluster1", "cluster2", "cluster3")),
    Case("scenario 2: by label", {"clusterSets": ["global"], "predicates": [
        {"requiredClusterSelector": T4}]}, ("cluster2", "cluster3"),
         why={"cluster1": "matches none"}),
    Case("scenario 3: the most free GPUs", {"predicates": [{"requiredClusterSelector": T4}],
                                            **SCORE3}, ("cluster3",),
         scores=[score("cluster2", -80), score("cluster3", -70)],
         why={"cluster2": "score -80 below"}),
    Case("scenario 3: a tie goes to the first name", {"predicates": [
        {"requiredClusterSelector": T4}], **SCORE3}, ("cluster2",),
         scores=[score("cluster2", -70), score("cluster3", -70)]),
    Case("an expired score counts 0", {"predicates": [{"requiredClusterSelector": T4}], **SCORE3},
         ("cluster3",), scores=[score("cluster2", 50, valid_until=NOW - 1), score("cluster3", 10)]),
    Case("a missing score counts 0", {"predicates": [{"requiredClusterSelector": T4}], **SCORE3},
         ("cluster3",), scores=[score("cluster2", -10), score("cluster3", 0)]),
    Case("a label no cluster has", {"predicates": [{"requiredClusterSelector": {"labelSelector": {
        "matchLabels": {"accelerator": "nvidia-h100"}}}}]}, (), "NoManagedClusterMatched",
         why={"cluster2": "matches none"}),
    Case("predicates are ORed", {"predicates": [
        {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"zone": "a"}}}},
        {"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
            {"key": "platform", "operator": "In", "values": ["AWS"]}]}}}]}, ("c1", "c3"),
         clusters=[cluster("c1", zone="a"), cluster("c2", zone="b"),
                   cluster("c3", claims={"platform": "AWS"})]),
    Case("label and claim selectors of one predicate are ANDed", {"predicates": [
        {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"zone": "a"}},
                                     "claimSelector": {"matchExpressions": [
                                         {"key": "platform", "operator": "Exists"}]}}}]},
         ("c2",), clusters=[cluster("c1", zone="a"), cluster("c2", zone="a", claims={"platform": "x"})]),
    Case("the chart's local-cluster DoesNotExist", {"clusterSets": ["global"], "predicates": [
        {"requiredClusterSelector": {"labelSelector": {"matchExpressions": [
            {"key": "local-cluster", "operator": "DoesNotExist"}]}}}]}, ("spoke",),
         clusters=[cluster("hub", local_cluster="true"), cluster("spoke")]),
    Case("no binding in the namespace", {}, (), "NoManagedClusterSetBindings", bindings=[]),
    Case("a binding to a set that does not exist", {}, (), "NoManagedClusterSetBindings",
         bindings=["nope"]),
    Case("clusterSets not bound", {"clusterSets": ["gpus"]}, (), "NoIntersection"),
    Case("an exclusive set's members carry its label", {"clusterSets": ["gpus"]}, ("g1",),
         clusters=[cluster("g1", **{"cluster.open-cluster-management.io/clusterset": "gpus"}),
                   cluster("g2")], bindings=["gpus", "global"], why={"g2": "not in"}),
    Case("an empty set", {}, (), "AllManagedClusterSetsEmpty", clusters=[cluster("c")],
         bindings=["gpus"]),
    Case("an untolerated NoSelect taint", {}, ("c2",),
         clusters=[cluster("c1", taints=[{"key": "cluster.open-cluster-management.io/unreachable",
                                          "effect": "NoSelect"}]), cluster("c2")],
         why={"c1": "unreachable"}),
    Case("the seed's Exists tolerations", {"tolerations": [
        {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"}]},
         ("c1", "c2"), clusters=[cluster("c1", taints=[
             {"key": "cluster.open-cluster-management.io/unreachable", "effect": "NoSelect"}]),
             cluster("c2")]),
    Case("the chart's Equal tolerations need the value", {"tolerations": [
        {"key": "k", "operator": "Equal"}]}, ("c2",), clusters=[
            cluster("c1", taints=[{"key": "k", "value": "v", "effect": "NoSelect"}]), cluster("c2")]),
    Case("PreferNoSelect never filters", {}, ("c1",),
         clusters=[cluster("c1", taints=[{"key": "k", "effect": "PreferNoSelect"}])]),
    Case("NoSelectIfNew keeps a cluster already decided", {}, ("c1",),
         clusters=[cluster("c1", taints=[{"key": "k", "effect": "NoSelectIfNew"}]),
                   cluster("c2", taints=[{"key": "k", "effect": "NoSelectIfNew"}])],
         decided={("kueue-system", "p"): ("c1",)}),
    Case("tolerationSeconds still running", {"tolerations": [
        {"key": "k", "operator": "Exists", "tolerationSeconds": 60}]}, ("c1",),
         clusters=[cluster("c1", taints=[{"key": "k", "effect": "NoSelect",
                                          "timeAdded": "2027-01-15T08:00:00Z"}])]),
    Case("tolerationSeconds run out", {"tolerations": [
        {"key": "k", "operator": "Exists", "tolerationSeconds": 60}]}, (),
         "NoManagedClusterMatched",
         clusters=[cluster("c1", taints=[{"key": "k", "effect": "NoSelect",
                                          "timeAdded": "2020-01-01T00:00:00Z"}])]),
    Case("numberOfClusters above the feasible", {"numberOfClusters": 3}, ("c1", "c2"),
         "NotAllDecisionsScheduled", clusters=[cluster("c1"), cluster("c2")]),
    Case("Additive: Steady keeps the decided cluster", {"numberOfClusters": 1}, ("c2",),
         clusters=[cluster("c1"), cluster("c2")], decided={("kueue-system", "p"): ("c2",)}),
    Case("Additive: Balance avoids a cluster other placements chose", {"numberOfClusters": 1},
         ("c2",), clusters=[cluster("c1"), cluster("c2")],
         decided={("kueue-system", "other"): ("c1",)}),
    Case("Additive: Steady's 100 outweighs a small AddOn score", {"numberOfClusters": 1,
         "prioritizerPolicy": {"configurations": SCORE3["prioritizerPolicy"]["configurations"]}},
         ("c2",), clusters=[cluster("c1"), cluster("c2")],
         scores=[score("c1", 10), score("c2", -10)], decided={("kueue-system", "p"): ("c2",)}),
    Case("Exact with a weight of 2 beats Steady's 100", {"numberOfClusters": 1, "prioritizerPolicy": {
        "mode": "Additive", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score",
                                                             "scoreName": "gpuClusterAvailable"}},
             "weight": 2}]}}, ("c1",), clusters=[cluster("c1"), cluster("c2")],
         scores=[score("c1", 60), score("c2", -60)], decided={("kueue-system", "p"): ("c2",)}),
    Case("a negative weight prefers the lowest score", {"numberOfClusters": 1, "prioritizerPolicy": {
        "mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score",
                                                             "scoreName": "gpuClusterAvailable"}},
             "weight": -1}]}}, ("c2",), clusters=[cluster("c1"), cluster("c2")],
         scores=[score("c1", 60), score("c2", -60)]),
    Case("ResourceAllocatableCPU", {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact",
         "configurations": [{"scoreCoordinate": {"builtIn": "ResourceAllocatableCPU"},
                             "weight": 1}]}}, ("c2",),
         clusters=[cluster("c1", alloc={"cpu": "4"}), cluster("c2", alloc={"cpu": "16"})]),
    Case("an unknown builtIn is Misconfigured", {"prioritizerPolicy": {"configurations": [
        {"scoreCoordinate": {"builtIn": "Spread"}, "weight": 1}]}}, (),
         "NotAllDecisionsScheduled"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_schedule(case: Case) -> None:
    sets = {"global": GLOBAL, "gpus": GPUS}
    snap = Snapshot(
        case.clusters,
        sets,
        [ocm.SetBinding("kueue-system", b) for b in case.bindings],
        {(s.cluster, s.resource_name): s for s in case.scores},
        case.decided,
    )
    got: PlacementResult = schedule(placement(case.spec), snap, NOW)
    assert got.decisions == case.want
    assert got.reason == case.reason, got.message
    assert got.satisfied == (case.reason == "AllDecisionsScheduled")
    for name, part in case.why.items():
        assert part in got.excluded[name]


def test_an_expired_score_is_a_warning() -> None:
    snap = Snapshot(THREE, {"global": GLOBAL}, [ocm.SetBinding("kueue-system", "global")],
                    {("cluster2", "resource-usage-score"): score("cluster2", 9, valid_until=NOW - 1)})  # fmt: skip
    got = schedule(placement(SCORE3), snap, NOW)
    assert got.warnings == ("AddOnPlacementScores cluster2/resource-usage-score expired",)


@pytest.mark.parametrize(
    ("free", "want"),
    [
        (0, -100),
        (-2, -100),
        (1, -90),
        (2, -80),
        (3, -70),
        (10, 0),
        (20, 100),
        (21, 100),
        (7, -30),
    ],
)
def test_gpu_cluster_available_as_the_addon(free: int, want: int) -> None:
    assert ocm.gpu_available_score(free) == want


BAD = [
    ("ManagedCluster", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
     "spec.taints[0].effect"),
    ("ManagedCluster", {"spec": {"taints": [{"key": "k"}]}}, "spec.taints[0].effect"),
    ("ManagedClusterSet", {"spec": {"clusterSelector": {"selectorType": "Any"}}},
     "spec.clusterSelector.selectorType"),
    ("ManagedClusterSetBinding", {"spec": {}}, "spec.clusterSet"),
    ("Placement", {"spec": {"numberOfClusters": -1}}, "spec.numberOfClusters"),
    ("Placement", {"spec": {"tolerations": [{"key": "k", "operator": "Is"}]}},
     "spec.tolerations[0].operator"),
    ("Placement", {"spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "In"}]}}}]}},
     "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[0].values"),
    ("Placement", {"spec": {"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {
        "type": "AddOn", "addOn": {"resourceName": "r"}}}]}}},
     "spec.prioritizerPolicy.configurations[0].scoreCoordinate.addOn"),
    ("AddOnPlacementScore", {"status": {"scores": [{"name": "s", "value": 101}]}},
     "status.scores[0].value"),
    ("AddOnPlacementScore", {"status": {"validUntil": "soon"}}, "status.validUntil"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "body", "path"), BAD, ids=[f"{k}:{p}" for k, _, p in BAD])
def test_bad_documents_are_refused_naming_the_field(
    kind: str, body: dict[str, Any], path: str
) -> None:
    doc = {
        "apiVersion": f"{G}/v1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "n"},
        **body,
    }
    with pytest.raises(ManifestError) as err:
        ocm.check(doc)
    assert err.value.field == path
    assert str(err.value).startswith(f"{kind} n/x: {path}: ")


@given(st.lists(st.integers(-100, 100), min_size=1, max_size=6), st.integers(0, 6))
def test_the_chosen_are_the_best_scored_and_their_number_is_kept(values: list[int], n: int) -> None:
    names = [f"c{i}" for i in range(len(values))]
    snap = Snapshot([cluster(x) for x in names], {"global": GLOBAL},
                    [ocm.SetBinding("kueue-system", "global")],
                    {(x, "resource-usage-score"): score(x, v) for x, v in zip(names, values, strict=True)})  # fmt: skip
    got = schedule(placement({**SCORE3, "numberOfClusters": n}), snap, NOW)
    assert len(got.decisions) == min(n, len(names))
    worst_chosen = min((got.scores[c] for c in got.decisions), default=101)
    assert all(got.scores[x] <= worst_chosen for x in names if x not in got.decisions)


@given(st.datetimes(min_value=__import__("datetime").datetime(1971, 1, 1),
                    max_value=__import__("datetime").datetime(2200, 1, 1)),
       st.integers(-14 * 60, 14 * 60))  # fmt: skip
def test_rfc3339_seconds_agrees_with_datetime(when: Any, offset_minutes: int) -> None:
    import datetime as dt

    tz = dt.timezone(dt.timedelta(minutes=offset_minutes))
    stamp = when.replace(microsecond=0, tzinfo=tz)
    assert ocm.rfc3339_seconds(stamp.isoformat()) == stamp.timestamp()


@given(
    st.lists(st.tuples(st.sampled_from(["t4", "l4", ""]), st.integers(-100, 100)), min_size=1,
             max_size=8),
    st.one_of(st.none(), st.integers(0, 8)),
    st.sampled_from(["Additive", "Exact"]),
)  # fmt: skip
def test_decisions_are_feasible_and_stable(
    clusters: list[tuple[str, int]], n: int | None, mode: str
) -> None:
    """Every chosen cluster matches the predicate; scheduling again with the decision fed back
    (as the hub does between passes) chooses the same clusters: Steady only reinforces them."""
    names = [f"c{i}" for i in range(len(clusters))]
    mcs = [
        cluster(x, accelerator=a) if a else cluster(x)
        for x, (a, _) in zip(names, clusters, strict=True)
    ]
    scores = {
        (x, "resource-usage-score"): score(x, v) for x, (_, v) in zip(names, clusters, strict=True)
    }
    spec: dict[str, Any] = {"predicates": [{"requiredClusterSelector": {"labelSelector": {
        "matchExpressions": [{"key": "accelerator", "operator": "Exists"}]}}}],
        "prioritizerPolicy": {"mode": mode, "configurations": SCORE3["prioritizerPolicy"]["configurations"]}}  # fmt: skip
    if n is not None:
        spec["numberOfClusters"] = n
    p = placement(spec)
    sets, bindings = {"global": GLOBAL}, [ocm.SetBinding("kueue-system", "global")]
    first = schedule(p, Snapshot(mcs, sets, bindings, scores), NOW)
    labelled = {x for x, (a, _) in zip(names, clusters, strict=True) if a}
    assert set(first.decisions) <= labelled
    again = schedule(p, Snapshot(mcs, sets, bindings, scores,
                                 {("kueue-system", "p"): first.decisions}), NOW)  # fmt: skip
    assert set(again.decisions) == set(first.decisions)
