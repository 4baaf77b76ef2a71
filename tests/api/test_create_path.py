"""The create fast path finds exactly the collections the routes serve, and answers as they do.

``find`` is table-driven against the paths FastAPI's routes match (a path parameter is one
non-empty segment; nothing below or beside a collection). The answers themselves are the route's
own handler and error handlers: a real server's creates (the API test modules) all go through
the fast path, and here a refused create is checked to be the same Status as kube-apiserver's.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gpuaas.api import create_path
from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND, KINDS

WL, JOB, CQ, NS = BY_KIND["Workload"], BY_KIND["Job"], BY_KIND["ClusterQueue"], BY_KIND["Namespace"]


def _handler_for(kind_name: str, version: str):  # type: ignore[no-untyped-def]
    async def create(request: object, namespace: str | None) -> object:
        return (kind_name, version, namespace)

    return create


CREATES: create_path.Creates = {}
for _kind in KINDS:
    for _version in _kind.versions:
        CREATES[create_path.collection(_kind, _version)] = _handler_for(_kind.kind, _version)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads", ("Workload", "team-a")),
        ("/apis/kueue.x-k8s.io/v1beta2/namespaces/t/workloads", ("Workload", "t")),
        ("/apis/batch/v1/namespaces/t/jobs", ("Job", "t")),
        ("/apis/kueue.x-k8s.io/v1beta1/clusterqueues", ("ClusterQueue", None)),
        ("/api/v1/namespaces", ("Namespace", None)),
        # not a collection the routes serve: the router answers (404, 405 or its own route)
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces//workloads", None),  # empty namespace
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces/t/workloads/", None),  # trailing slash
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces/t/workloads/w", None),  # an item
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces/t/workloads/w/status", None),
        ("/apis/kueue.x-k8s.io/v1beta1/workloads", None),  # namespaced kind, no namespace
        ("/apis/kueue.x-k8s.io/v1beta1/namespaces/t/clusterqueues", None),  # cluster-scoped
        ("/apis/kueue.x-k8s.io/v9/namespaces/t/workloads", None),  # unknown version
        ("/apis/batch/v1/namespaces/t/pods", None),
        ("/api/v1/namespaces/t/pods", None),  # a runtime kind: its own routes
        ("/healthz", None),
        ("", None),
        ("apis/batch/v1/namespaces/t/jobs", None),
    ],
)
def test_find_matches_exactly_the_collections_of_the_routes(
    path: str, expected: tuple[str, str | None] | None
) -> None:
    found = create_path.find(CREATES, path)
    if expected is None:
        assert found is None
        return
    assert found is not None
    handler, namespace = found
    assert namespace == expected[1]
    assert handler.__closure__ is not None  # type: ignore[attr-defined]
    assert handler.__closure__[0].cell_contents == expected[0]  # type: ignore[attr-defined]


WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/default/workloads"


def workload(name: str) -> dict[str, object]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}  # fmt: skip


@pytest.mark.slow
def test_creates_through_the_fast_path_answer_as_kube_apiserver(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", None).start()
    try:
        auth = {"Authorization": f"Bearer {srv.admin_token}"}
        with httpx.Client(base_url=srv.url, headers=auth, timeout=30) as c:
            made = c.post(WORKLOADS, json=workload("w"))
            assert made.status_code == 201, made.text
            assert made.json()["metadata"]["managedFields"][0]["operation"] == "Update"
            again = c.post(WORKLOADS, json=workload("w"))
            assert again.status_code == 409
            assert again.json()["reason"] == "AlreadyExists"
            assert again.json()["details"] == {"name": "w", "group": "kueue.x-k8s.io",
                                               "kind": "workloads"}  # fmt: skip
            bad = c.post(WORKLOADS, content=b"{", headers={"Content-Type": "application/json"})
            assert bad.status_code == 400 and bad.json()["kind"] == "Status"
            dry = c.post(WORKLOADS + "?dryRun=All", json=workload("dry"))
            assert dry.status_code == 201
            assert c.get(WORKLOADS + "/dry").status_code == 404
            strict = c.post(
                WORKLOADS + "?fieldValidation=Strict", json={**workload("s"), "bogus": 1}
            )
            assert strict.status_code == 400
            assert strict.json()["message"] == 'strict decoding error: unknown field "bogus"'
            warned = c.post(WORKLOADS, json={**workload("x"), "bogus": 1})
            assert warned.status_code == 201
            assert 'unknown field \\"bogus\\"' in warned.headers["warning"]
        anonymous = httpx.post(srv.url + WORKLOADS, json=workload("a"), timeout=30)
        assert anonymous.status_code == 401 and anonymous.json()["kind"] == "Status"
    finally:
        srv.stop()
