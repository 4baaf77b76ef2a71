"""The OCM cluster API through the real kubectl: every seed 002 manifest applies as written (and
again, unchanged),
the kinds are discovered with their short names and printer columns, and a bad Placement is
refused naming the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubectl_harness import Kube, start_kube

from gpuaas.api.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO.parent / "shared/reference/multicluster/manifests"
DEMO = REPO / "src/gpuaas/demos/002"


@pytest.fixture
def kube(
    tmp_path: Path,
    servers: Callable[..., ServerProcess],
    require_service: Callable[[str, bool, str], None],
) -> Kube:
    require_service("seed 002 manifests", MANIFESTS.is_dir(), f"{MANIFESTS} is missing")
    return start_kube(tmp_path, None, servers, require_service)


def _seed_files() -> list[Path]:
    files = sorted(MANIFESTS.glob("scenario*/*/*.yaml"))
    return [f for f in files if "job" not in f.name]  # Jobs use generateName: kubectl create


def test_seed_manifests_apply_unchanged_twice(kube: Kube) -> None:
    with kube.srv.client() as c:
        for ns in ("openshift-kueue-operator", "spoke-cluster1", "spoke-cluster2"):
            assert c.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    for f in [DEMO / "addon-hub.yaml", *_seed_files()]:
        first = kube.run("apply", "-f", str(f), check=False)
        assert first.returncode == 0, f"{f}: {first.stderr}"
        again = kube.run("apply", "-f", str(f), check=False)  # the same file at once: unchanged
        assert again.returncode == 0, f"{f}: {again.stderr}"
        if "sample-scores" not in f.name:  # status is not applied (a status subresource)
            lines = again.stdout.strip().splitlines()
            assert all(ln.endswith("unchanged") for ln in lines), again.stdout
    got = kube.out("get", "placements", "-n", "kueue-system")
    assert got.split("\n")[0].split() == ["NAME", "SUCCEEDED", "REASON", "SELECTEDCLUSTERS", "AGE"]
    assert "multikueue-config-demo2" in got and "default" in got
    sets = kube.out("get", "mclsets")
    assert "global" in sets and "default" in sets  # an OCM hub's own sets
    assert "global" in kube.out("get", "managedclustersetbindings", "-n", "kueue-system")
    resources = kube.out("api-resources", "--api-group", "cluster.open-cluster-management.io")
    for plural in ("managedclusters", "managedclustersets", "managedclustersetbindings",
                   "placements", "placementdecisions", "addonplacementscores"):  # fmt: skip
        assert plural in resources


def test_managed_cluster_and_a_bad_placement(kube: Kube, tmp_path: Path) -> None:
    mc = tmp_path / "mc.yaml"
    mc.write_text(
        "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n"
        "metadata: {name: cluster2, labels: {accelerator: nvidia-tesla-t4}}\n"
        "spec: {hubAcceptsClient: true}\n"
    )
    kube.out("apply", "-f", str(mc))
    got = kube.out("get", "mcl", "-l", "accelerator=nvidia-tesla-t4")
    assert got.split("\n")[0].split()[:3] == ["NAME", "HUB", "ACCEPTED"] and "cluster2" in got
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n"
        "metadata: {name: p, namespace: default}\n"
        "spec: {prioritizerPolicy: {mode: Exact, configurations: [{scoreCoordinate: "
        "{type: AddOn, addOn: {resourceName: r, scoreName: s}}, weight: 20}]}}\n"
    )
    out = kube.run("apply", "-f", str(bad), check=False)
    assert out.returncode != 0
    assert (
        "spec.prioritizerPolicy.configurations[0].weight: Invalid value: must be less than or equal to 10"
        in out.stderr
    )


def test_score_status_is_written_through_its_subresource(kube: Kube) -> None:
    """An outside producer (OCM's resource-usage agent, or GPUaaS-RHACM's sample scores) writes an
    AddOnPlacementScore's status with the admin token; checked as the object is."""
    base = "/apis/cluster.open-cluster-management.io/v1alpha1/namespaces"
    sample = MANIFESTS / "scenario3-dynamic-score/gpuaas-rhacm/sample-scores.yaml"
    first = next(d for d in yaml.safe_load_all(sample.read_text()) if d)
    with kube.srv.client() as c:
        assert (
            c.post("/api/v1/namespaces", json={"metadata": {"name": "spoke-cluster1"}}).status_code
            == 201
        )
        url = f"{base}/spoke-cluster1/addonplacementscores"
        assert c.post(url, json=first).status_code == 201
        assert "status" not in c.get(f"{url}/resource-usage-score").json()  # not from a create
        r = c.put(f"{url}/resource-usage-score/status", json=first)
        assert r.status_code == 200, r.text
        assert r.json()["status"]["scores"][0] == {"name": "gpuClusterAvailable", "value": 80}
        bad = {"status": {"scores": [{"name": "gpuClusterAvailable", "value": 180}]}}
        r = c.patch(f"{url}/resource-usage-score/status", json=bad,
                    headers={"content-type": "application/merge-patch+json"})  # fmt: skip
        assert r.status_code == 422, r.text
        assert "status.scores[0].value: must be less than or equal to 100" in r.json()["message"]
        token = c.post("/apis/gpuaas.dev/v1alpha1/tokens",
                       json={"namespaces": ["spoke-cluster1"]}).json()["token"]  # fmt: skip
    with kube.srv.client(token) as tenant:
        r = tenant.put(f"{url}/resource-usage-score/status", json=first)
        assert r.status_code == 403
