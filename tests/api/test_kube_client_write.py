"""The official ``kubernetes`` Python client changes gpuaas with a kubeconfig from
``gpuaas kubeconfig`` (SQLite and PostgreSQL): Kueue's custom objects (CustomObjectsApi) and Jobs
(BatchV1Api), created, listed with label selectors, watched, patched and deleted."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_harness import Kube, start_kube

from gpuaas.api.testing import ServerProcess

kubernetes = pytest.importorskip("kubernetes")

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "examples/004-jobs/setup.yaml"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
JSON_PATCH = "application/json-patch+json"  # the client sends a list as a merge patch otherwise


@pytest.fixture
def api(
    tmp_path: Path,
    db_url: str | None,
    servers: Callable[..., ServerProcess],
    require_service: Callable[[str, bool, str], None],
) -> Iterator[tuple[Kube, Any]]:
    kube = start_kube(tmp_path, db_url, servers, require_service)
    kube.out("apply", "-f", str(SETUP))
    client = kubernetes.config.new_client_from_config(str(kube.kubeconfig))
    try:
        yield kube, client
    finally:
        client.close()


def _job(name: str, queue: str = "local-queue", **labels: str) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "examples/004-jobs/team-a-job.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue, **labels}
    # The client's models take quantities as strings only.
    resources = doc["spec"]["template"]["spec"]["containers"][0]["resources"]
    for part in resources.values():
        part.update({k: str(v) for k, v in part.items()})
    return dict(doc)


def test_custom_objects_create_list_watch_patch_delete(api: tuple[Kube, Any]) -> None:
    _, client = api
    custom = kubernetes.client.CustomObjectsApi(client)
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "py-lq", "labels": {"made-by": "python"}},
          "spec": {"clusterQueue": "team-a-cq"}}  # fmt: skip
    created = custom.create_namespaced_custom_object(*KUEUE, "team-a", "localqueues", lq)
    assert created["metadata"]["uid"] and created["metadata"]["managedFields"]
    listed = custom.list_namespaced_custom_object(
        *KUEUE, "team-a", "localqueues", label_selector="made-by=python"
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["py-lq"]
    none = custom.list_namespaced_custom_object(
        *KUEUE, "team-a", "localqueues", label_selector="made-by!=python"
    )
    assert "py-lq" not in [i["metadata"]["name"] for i in none["items"]]

    # A watch sees the patches below as MODIFIED events.
    seen: list[tuple[str, str]] = []
    rv = listed["metadata"]["resourceVersion"]

    def watch() -> None:
        w = kubernetes.watch.Watch()
        for ev in w.stream(custom.list_namespaced_custom_object, *KUEUE, "team-a", "localqueues",
                           resource_version=rv, timeout_seconds=10):  # fmt: skip
            seen.append((ev["type"], ev["object"]["metadata"].get("labels", {}).get("tier", "")))
            if len(seen) >= 2:
                w.stop()

    t = threading.Thread(target=watch)
    t.start()
    merged = custom.patch_namespaced_custom_object(
        *KUEUE, "team-a", "localqueues", "py-lq", {"metadata": {"labels": {"tier": "gold"}}}
    )
    assert merged["metadata"]["labels"]["tier"] == "gold"
    ops = [{"op": "test", "path": "/metadata/labels/tier", "value": "gold"},
           {"op": "replace", "path": "/metadata/labels/tier", "value": "silver"}]  # fmt: skip
    patched = custom.patch_namespaced_custom_object(
        *KUEUE, "team-a", "localqueues", "py-lq", ops, _content_type=JSON_PATCH
    )
    assert patched["metadata"]["labels"]["tier"] == "silver"
    t.join(timeout=15)
    assert seen == [("MODIFIED", "gold"), ("MODIFIED", "silver")]

    with pytest.raises(kubernetes.client.ApiException) as err:  # a failing test op
        custom.patch_namespaced_custom_object(
            *KUEUE, "team-a", "localqueues", "py-lq", ops[:1], _content_type=JSON_PATCH
        )
    assert err.value.status == 422

    custom.delete_namespaced_custom_object(*KUEUE, "team-a", "localqueues", "py-lq")
    with pytest.raises(kubernetes.client.ApiException) as err:
        custom.get_namespaced_custom_object(*KUEUE, "team-a", "localqueues", "py-lq")
    assert err.value.status == 404


def test_batch_jobs_create_list_patch_delete(api: tuple[Kube, Any]) -> None:
    _, client = api
    batch = kubernetes.client.BatchV1Api(client)
    created = batch.create_namespaced_job("team-a", _job("py-job", app="train"))
    assert created.metadata.name == "py-job" and created.metadata.uid
    generated = _job("")
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "py-job-"
    made = batch.create_namespaced_job("team-a", generated)
    assert made.metadata.name.startswith("py-job-") and len(made.metadata.name) == 12
    jobs = batch.list_namespaced_job("team-a", label_selector="app=train")
    assert [j.metadata.name for j in jobs.items] == ["py-job"]

    # A strategic patch merges the container by name.
    env = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "MODE", "value": "fast"}]}]}}}}  # fmt: skip
    patched = batch.patch_namespaced_job(
        "py-job", "team-a", env, _content_type="application/strategic-merge-patch+json"
    )
    [container] = patched.spec.template.spec.containers
    assert container.image == "busybox" and container.env[0].name == "MODE"
    merged = batch.patch_namespaced_job(
        "py-job", "team-a", {"metadata": {"annotations": {"a": "1"}}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    assert merged.metadata.annotations["a"] == "1"
    ops = [{"op": "add", "path": "/metadata/labels/stage", "value": "two"}]
    assert batch.patch_namespaced_job("py-job", "team-a", ops).metadata.labels["stage"] == "two"

    batch.delete_namespaced_job("py-job", "team-a")
    batch.delete_namespaced_job(made.metadata.name, "team-a")
    assert batch.list_namespaced_job("team-a", label_selector="app=train").items == []


def test_tenant_client_is_refused_outside_its_namespaces(api: tuple[Kube, Any]) -> None:
    kube, _ = api
    with kube.srv.client() as c:
        token = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-a"]})
    tenant = kube.config_for(token.json()["token"], "tenant", namespace="team-a")
    client = kubernetes.config.new_client_from_config(str(tenant.kubeconfig))
    try:
        batch = kubernetes.client.BatchV1Api(client)
        custom = kubernetes.client.CustomObjectsApi(client)
        calls: list[Callable[[], Any]] = [
            lambda: batch.create_namespaced_job("team-b", _job("x")),
            lambda: batch.patch_namespaced_job("x", "team-b", {"metadata": {}}),
            lambda: batch.delete_namespaced_job("x", "team-b"),
            lambda: custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "team-a-cq", {}),
            lambda: custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "team-a-cq"),
        ]
        for call in calls:
            with pytest.raises(kubernetes.client.ApiException) as err:
                call()
            assert err.value.status == 403
            assert json.loads(err.value.body)["reason"] == "Forbidden"
        assert batch.create_namespaced_job("team-a", _job("mine")).metadata.name == "mine"
    finally:
        client.close()
