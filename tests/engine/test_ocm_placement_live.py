"""Seed 002's three OCM placement scenarios live: a hub and three worker servers on loopback (one
L4 cluster, two T4 clusters), the public manifests applied unchanged. The placement add-on's
check keeps the MultiKueueConfig in step with the Placement; MultiKueue dispatches; live GPU
scores move the next job; a label no worker has leaves the job pending, and explain says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mkcluster import condition, wait_for
from ocmcluster import MANIFESTS, Clusters, apply, seed_docs, start

pytestmark = pytest.mark.slow
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
OCM = "/apis/cluster.open-cluster-management.io"
JsonDoc = dict[str, Any]


@pytest.fixture(autouse=True)
def _manifests(require_service: Any) -> None:
    require_service("seed 002 manifests", MANIFESTS.is_dir(), f"{MANIFESTS} is missing")


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    c = start(tmp_path_factory.mktemp("ocm"))
    try:
        yield c
    finally:
        c.stop()


def _config(c: Clusters, name: str) -> list[str] | None:
    with c.hub.client() as hub:
        r = hub.get(f"{KUEUE}/multikueueconfigs/{name}")
        return r.json()["spec"]["clusters"] if r.status_code == 200 else None


def _submit(c: Clusters, rel: str) -> str:
    with c.hub.client() as hub:
        job = apply(hub, seed_docs(rel))[0]
    return str(job["metadata"]["name"])


def _lands(c: Clusters, name: str) -> str:
    """The worker the hub's MultiKueue check says the workload runs on."""

    def where() -> str | None:
        with c.hub.client() as hub:
            wl = hub.get(f"{KUEUE}/namespaces/default/workloads/{name}").json()
        return (wl.get("status") or {}).get("clusterName")

    return str(wait_for(f"{name} dispatched to a worker", where))


def test_scenario_1_all_clusters(clusters: Clusters) -> None:
    c = clusters
    with c.hub.client() as hub:
        apply(hub, seed_docs("scenario1-basic/ocm-solution/multikueue-setup-demo1.yaml"))
        wait_for("MultiKueueConfig default lists all three",
                 lambda: _config(c, "default") == ["cluster1", "cluster2", "cluster3"])  # fmt: skip
        ac = wait_for("the placement check Active", lambda: condition(
            hub.get(f"{KUEUE}/admissionchecks/multikueue-config-demo1").json(), "Active").get(
            "status") == "True" and hub.get(f"{KUEUE}/admissionchecks/multikueue-config-demo1").json())  # fmt: skip
        assert (
            condition(ac, "Active")["message"]
            == "MultiKueueConfig default is generated successfully"
        )
        assert (
            "kueue-addon.open-cluster-management.io/admissioncheck-cleanup"
            in ac["metadata"]["finalizers"]
        )
        p = hub.get(f"{OCM}/v1beta1/namespaces/kueue-system/placements/default").json()
        assert p["status"]["numberOfSelectedClusters"] == 3
        assert condition(p, "PlacementSatisfied")["reason"] == "AllDecisionsScheduled"
        d = hub.get(
            f"{OCM}/v1beta1/namespaces/kueue-system/placementdecisions/default-decision-1"
        ).json()
        assert [x["clusterName"] for x in d["status"]["decisions"]] == [
            "cluster1",
            "cluster2",
            "cluster3",
        ]
    name = _submit(c, "scenario1-basic/ocm-solution/job-demo1.yaml")
    assert _lands(c, name) in ("cluster1", "cluster2", "cluster3")
    with c.hub.client() as hub:
        wl = hub.get(f"{KUEUE}/namespaces/default/workloads/{name}").json()
    states = {s["name"]: s["state"] for s in wl["status"]["admissionChecks"]}
    # As Kueue with the add-on: MultiKueue's check Ready, the placement check never set.
    assert states == {"multikueue-demo1": "Ready", "multikueue-config-demo1": "Pending"}
    assert condition(wl, "QuotaReserved")["status"] == "True"
    assert condition(wl, "Admitted").get("status") != "True"


def test_scenario_2_by_label(clusters: Clusters) -> None:
    c = clusters
    with c.hub.client() as hub:
        apply(hub, seed_docs("scenario2-label-based/ocm-solution/placement-demo2-1.yaml"))
        apply(hub, seed_docs("scenario2-label-based/ocm-solution/multikueue-setup-demo2.yaml"))
    wait_for("the T4 clusters only",
             lambda: _config(c, "multikueue-config-demo2") == ["cluster2", "cluster3"])  # fmt: skip
    name = _submit(c, "scenario2-label-based/ocm-solution/job-demo2.yaml")
    assert _lands(c, name) in ("cluster2", "cluster3")


def _free_score(c: Clusters, cluster: str) -> int:
    with c.hub.client() as hub:
        r = hub.get(
            f"{OCM}/v1alpha1/namespaces/{cluster}/addonplacementscores/resource-usage-score"
        )
    scores = {s["name"]: s["value"] for s in (r.json().get("status") or {}).get("scores") or []}
    return int(scores["gpuClusterAvailable"])


def test_scenario_3_by_score_and_a_change_moves_the_next_job(clusters: Clusters) -> None:
    c = clusters
    with c.hub.client() as hub:
        apply(hub, seed_docs("scenario3-dynamic-score/ocm-solution/placement-demo2-2.yaml"))
        apply(hub, seed_docs("scenario3-dynamic-score/ocm-solution/multikueue-setup-demo2.yaml"))
    # Scenario 2's job holds a GPU on one T4 cluster: the other has the most free GPUs.
    busy = wait_for("a T4 cluster with 2 free GPUs", lambda: next(
        (n for n in ("cluster2", "cluster3") if _free_score(c, n) == -80), None))  # fmt: skip
    best = "cluster3" if busy == "cluster2" else "cluster2"
    assert _free_score(c, best) == -70  # 3 free GPUs, as OCM's README shows
    wait_for(f"{best} chosen", lambda: _config(c, "multikueue-config-demo2") == [best])
    # The chosen worker's GPUs fill up outside the hub: the next job goes to the other one.
    with c.workers[best].client() as w:
        local = seed_docs("scenario3-dynamic-score/ocm-solution/job-demo2.yaml")[0]
        local["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "1", "memory": "200Mi", "nvidia.com/gpu": "2"}
        }
        apply(w, [local])
    wait_for(f"{busy} chosen once {best} fills up",
             lambda: _config(c, "multikueue-config-demo2") == [busy])  # fmt: skip
    name = _submit(c, "scenario3-dynamic-score/ocm-solution/job-demo2.yaml")
    assert _lands(c, name) == busy


def test_a_label_no_worker_has_leaves_the_job_pending_with_that_reason(
    clusters: Clusters, tmp_path: Path
) -> None:
    c = clusters
    placement = seed_docs("scenario2-label-based/ocm-solution/placement-demo2-1.yaml")[0]
    placement["metadata"]["name"] = "h100-only"
    placement["spec"]["predicates"][0]["requiredClusterSelector"]["labelSelector"] = {
        "matchLabels": {"accelerator": "nvidia-h100"}
    }
    setup = seed_docs("scenario2-label-based/ocm-solution/multikueue-setup-demo2.yaml")
    for doc in setup:
        if doc["kind"] == "AdmissionCheck":
            doc["spec"]["parameters"]["name"] = "h100-only"
    with c.hub.client() as hub:
        apply(hub, [placement, *setup])
        ac = wait_for("the placement check inactive", lambda: (lambda d: d if condition(
            d, "Active").get("reason") == "NoClustersAvailable" else None)(
            hub.get(f"{KUEUE}/admissionchecks/multikueue-config-demo2").json()))  # fmt: skip
        assert condition(ac, "Active")["message"] == "No clusters available for placement h100-only"
        assert _config(c, "h100-only") is None
        p = hub.get(f"{OCM}/v1beta1/namespaces/kueue-system/placements/h100-only").json()
        assert condition(p, "PlacementSatisfied")["reason"] == "NoManagedClusterMatched"
    name = _submit(c, "scenario2-label-based/ocm-solution/job-demo2.yaml")
    with c.hub.client() as hub:
        info = wait_for("explain with the placement", lambda: (lambda i: i if i.get(
            "placements") else None)(hub.get(
            f"/apis/gpuaas.dev/v1alpha1/namespaces/default/workloads/{name}/explain").json()))  # fmt: skip
    assert "multikueue-config-demo2" in info["reason"]  # its ClusterQueue is inactive
    p = info["placements"][0]
    assert p["reason"] == "NoManagedClusterMatched" and p["decisions"] == []
    assert p["excluded"] == dict.fromkeys(
        ("cluster1", "cluster2", "cluster3"), "matches none of the Placement's predicates"
    )
