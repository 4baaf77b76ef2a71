"""Workbenches through the API of a real server: hardware profiles, Notebooks, RHOAI's managed
namespaces, a full pool that queues a workbench and admits it when another stops."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

NB = "/apis/kubeflow.org/v1/namespaces/{ns}/notebooks"
HWP = "/apis/infrastructure.opendatahub.io/v1/namespaces/{ns}/hardwareprofiles"
WL = "/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads"
MERGE = {"content-type": "application/merge-patch+json"}
GPU = "nvidia.com/gpu"

SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace",
     "metadata": {"name": "ds", "labels": {"kueue.openshift.io/managed": "true"}}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [
         {"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "l4", "resources": [
             {"name": "cpu", "nominalQuota": 16}, {"name": "memory", "nominalQuota": "64Gi"},
             {"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "gpu-queue", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "gpu-queue", "namespace": "plain"}, "spec": {"clusterQueue": "cq"}},
    {"apiVersion": "infrastructure.opendatahub.io/v1", "kind": "HardwareProfile",
     "metadata": {"name": "l4-1gpu", "namespace": "apps",
                  "annotations": {"opendatahub.io/display-name": "NVIDIA L4 1GPU"}},
     "spec": {"identifiers": [
         {"identifier": "cpu", "displayName": "CPU", "minCount": 1, "defaultCount": 2,
          "maxCount": 4, "resourceType": "CPU"},
         {"identifier": GPU, "displayName": "L4", "minCount": 1, "defaultCount": 1,
          "maxCount": 1, "resourceType": "Accelerator"}],
      "scheduling": {"type": "Queue", "kueue": {"localQueueName": "gpu-queue"}}}},
]  # fmt: skip


def _path(doc: dict[str, Any]) -> str:
    k = BY_KIND[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return f"{k.base_path()}/namespaces/{ns}/{k.plural}" if ns else f"{k.base_path()}/{k.plural}"


def notebook(name: str, ns: str = "ds", profile: str | None = "l4-1gpu", **extra: Any) -> Any:
    ann = {}
    if profile is not None:
        ann = {"opendatahub.io/hardware-profile-name": profile,
               "opendatahub.io/hardware-profile-namespace": "apps"}  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": ann, **extra}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": meta,
        "spec": {"template": {"spec": {"containers": [{"name": name, "image": "jupyter"}]}}},
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, str]]:
    srv = ServerProcess(tmp_path_factory.mktemp("workbenches")).start()
    try:
        with srv.client() as c:
            for doc in SETUP:
                r = c.post(_path(doc), json=doc)
                assert r.status_code == 201, r.text
            tokens = [
                c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": [ns]}).json()[
                    "token"
                ]
                for ns in ("ds", "plain")
            ]
        yield srv, tokens[0], tokens[1]
    finally:
        srv.kill()


def _wait(c: httpx.Client, path: str, ok: Any, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        r = c.get(path)
        doc = r.json() if r.status_code == 200 else None
        if doc is not None and ok(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: not reached; last {r.status_code} {r.text[:400]}")
        time.sleep(0.1)


def _admitted(doc: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Admitted" and c["status"] == "True"
        for c in (doc.get("status") or {}).get("conditions", [])
    )


def test_profile_is_injected_and_a_full_pool_queues_then_admits(
    live: tuple[ServerProcess, str, str],
) -> None:
    srv, token, _ = live
    with srv.client(token) as c:
        r = c.post(NB.format(ns="ds"), json=notebook("first"))
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
        res = made["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert res == {"requests": {"cpu": "2", GPU: "1"}, "limits": {"cpu": "4", GPU: "1"}}
        _wait(c, WL.format(ns="ds") + "/first", _admitted)
        assert c.post(NB.format(ns="ds"), json=notebook("second")).status_code == 201
        second = _wait(
            c,
            NB.format(ns="ds") + "/second",
            lambda d: d["status"]["containerState"].get("waiting"),
        )
        waiting = second["status"]["containerState"]["waiting"]
        assert waiting["reason"] == "SchedulingGated"
        assert second["status"]["readyReplicas"] == 0
        assert "insufficient" in waiting["message"].lower() or "quota" in waiting["message"]
        assert not _admitted(c.get(WL.format(ns="ds") + "/second").json())
        # Stop the first: its Workload goes with its pod; the second is admitted.
        stop = {"metadata": {"annotations": {"kubeflow-resource-stopped": "now"}}}
        r = c.patch(NB.format(ns="ds") + "/first", json=stop, headers=MERGE)
        assert r.status_code == 200, r.text
        assert c.get(WL.format(ns="ds") + "/first").status_code == 404
        _wait(c, WL.format(ns="ds") + "/second", _admitted)
        stopped = c.get(NB.format(ns="ds") + "/first").json()["status"]
        assert stopped == {"readyReplicas": 0, "containerState": {}, "conditions": []}
        # Start it again: a new Workload, queued behind the pool that is full again.
        start = {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}}
        assert c.patch(NB.format(ns="ds") + "/first", json=start, headers=MERGE).status_code == 200
        again = c.get(WL.format(ns="ds") + "/first").json()
        assert not _admitted(again)
        # Deleting the running one frees the GPU too.
        assert c.delete(NB.format(ns="ds") + "/second").status_code == 200
        assert c.get(WL.format(ns="ds") + "/second").status_code == 404
        _wait(c, WL.format(ns="ds") + "/first", _admitted)
        assert c.delete(NB.format(ns="ds") + "/first").status_code == 200


REFUSALS = {
    "missing profile: the webhook's 400": (
        notebook("nope", profile="absent"),
        400,
        "hardware profile 'absent' not found in namespace 'apps'",
    ),
    "above the profile's maximum: gpuaas's rule": (
        {**notebook("big"), "spec": {"template": {"spec": {"containers": [
            {"name": "big", "image": "x", "resources": {"requests": {GPU: 2}}}]}}}},
        422,
        "above hardware profile apps/l4-1gpu's maxCount 1",
    ),
    "managed namespace, no queue, no default LocalQueue: RHOAI denies": (
        notebook("bare", profile=None),
        403,
        'Kueue label validation failed: missing required label "kueue.x-k8s.io/queue-name"',
    ),
}  # fmt: skip


@pytest.mark.parametrize(("doc", "code", "message"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_refusals_name_the_object_and_reason(
    live: tuple[ServerProcess, str, str], doc: dict[str, Any], code: int, message: str
) -> None:
    srv, token, _ = live
    with srv.client(token) as c:
        r = c.post(NB.format(ns="ds"), json=doc)
        assert r.status_code == code, r.text
        body = r.json()
        assert body["kind"] == "Status" and message in body["message"]
        name = doc["metadata"]["name"]  # the object, in the wording of its status code
        assert (
            f"Notebook ds/{name}" in body["message"]
            or f'Notebook.kubeflow.org "{name}"' in body["message"]
        )
        assert c.get(NB.format(ns="ds") + f"/{doc['metadata']['name']}").status_code == 404


def test_default_local_queue_is_used_when_it_exists(live: tuple[ServerProcess, str, str]) -> None:
    srv, _, _ = live
    with srv.client() as c:
        lq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
              "metadata": {"name": "default", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}}  # fmt: skip
        assert c.post(_path(lq), json=lq).status_code == 201
        try:
            r = c.post(NB.format(ns="ds"), json=notebook("dflt", profile=None))
            assert r.status_code == 201, r.text
            assert r.json()["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
            assert c.get(WL.format(ns="ds") + "/dflt").json()["spec"]["queueName"] == "default"
            assert c.delete(NB.format(ns="ds") + "/dflt").status_code == 200
        finally:
            c.delete(f"{_path(lq)}/default")


def test_dashboard_shape_profile_is_migrated(live: tuple[ServerProcess, str, str]) -> None:
    srv, _, _ = live
    old = {
        "apiVersion": "dashboard.opendatahub.io/v1alpha1",
        "kind": "HardwareProfile",
        "metadata": {"name": "legacy", "namespace": "apps"},
        "spec": {"displayName": "Legacy", "enabled": True, "nodeSelector": {"gpu": "l4"},
                 "identifiers": [{"identifier": "cpu", "displayName": "CPU", "minCount": 1,
                                  "defaultCount": 1}]},
    }  # fmt: skip
    with srv.client() as c:
        r = c.post(HWP.format(ns="apps"), json=old)
        assert r.status_code == 201, r.text
        got = c.get(HWP.format(ns="apps") + "/legacy").json()
        assert got["apiVersion"] == "infrastructure.opendatahub.io/v1"
        assert got["spec"]["scheduling"] == {
            "type": "Node",
            "node": {"nodeSelector": {"gpu": "l4"}},
        }
        assert got["metadata"]["annotations"]["opendatahub.io/display-name"] == "Legacy"
        nb = notebook("legacy-nb", ns="plain", profile="legacy", labels={
            "kueue.x-k8s.io/queue-name": "gpu-queue"})  # fmt: skip
        r = c.post(NB.format(ns="plain"), json=nb)
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "l4"}
        assert c.delete(NB.format(ns="plain") + "/legacy-nb").status_code == 200
        bad = {**old, "metadata": {"name": "bad", "namespace": "apps"},
               "spec": {"identifiers": [{"identifier": "cpu"}]}}  # fmt: skip
        r = c.post(HWP.format(ns="apps"), json=bad)
        assert r.status_code == 422 and "spec.identifiers[0]" in r.json()["message"]


def test_other_tenant_cannot_see_or_create(live: tuple[ServerProcess, str, str]) -> None:
    srv, _, other = live
    with srv.client(other) as c:
        assert c.post(NB.format(ns="ds"), json=notebook("x")).status_code == 403
        assert c.get(NB.format(ns="ds")).status_code == 403
        assert c.get("/apis/kubeflow.org/v1/notebooks").json()["items"] == []
        # The workbench door refuses another tenant's token as well.
        r = c.get("/workbenches/ds/first/lab")
        assert r.status_code == 403


def test_notebook_paths_are_served_to_kubectl_discovery(
    live: tuple[ServerProcess, str, str], tmp_path: Path
) -> None:
    srv, _, _ = live
    with srv.client() as c:
        groups = {g["name"] for g in c.get("/apis").json()["groups"]}
        assert {"kubeflow.org", "infrastructure.opendatahub.io"} <= groups
        res = c.get("/apis/kubeflow.org/v1").json()["resources"]
        assert any(r["name"] == "notebooks" and r["namespaced"] for r in res)
