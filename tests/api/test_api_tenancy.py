"""Tenancy matrix: a team-a token against every endpoint of team-b gets 403/404 and never data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import KINDS

SEED = Path(__file__).parents[1] / "cli_client" / "seed"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Any:
    srv = ServerProcess(tmp_path_factory.mktemp("tenancy")).start()
    try:
        with srv.client() as c:
            for name in ("setup.yaml", "team-b-job.yaml"):
                for d in yaml.safe_load_all((SEED / name).read_text()):
                    if d:
                        ns = d["metadata"].get("namespace")
                        kind = next(k for k in KINDS if k.kind == d["kind"])
                        base = kind.base_path()
                        path = (
                            f"{base}/namespaces/{ns}/{kind.plural}"
                            if ns
                            else f"{base}/{kind.plural}"
                        )
                        assert c.post(path, json=d).status_code == 201
            r = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-a"]})
            assert r.status_code == 201
            token = r.json()["token"]
        yield srv, token
    finally:
        srv.kill()


def _paths() -> list[tuple[str, str]]:
    out = []
    for k in KINDS:
        for v in k.versions:
            base = f"/apis/{k.group}/{v}" if k.group else f"/api/{v}"
            if k.namespaced:
                coll = f"{base}/namespaces/team-b/{k.plural}"
                out += [("GET", coll), ("POST", coll), ("GET", f"{coll}/team-b-job"),
                        ("PUT", f"{coll}/team-b-job"), ("PATCH", f"{coll}/team-b-job"),
                        ("DELETE", f"{coll}/team-b-job"), ("GET", f"{coll}?watch=true")]  # fmt: skip
            elif k.kind == "Namespace":
                out += [("GET", f"{base}/namespaces/team-b"), ("DELETE", f"{base}/namespaces/team-b"),
                        ("PUT", f"{base}/namespaces/team-b"), ("POST", f"{base}/namespaces")]  # fmt: skip
            else:
                coll = f"{base}/{k.plural}"
                out += [("POST", coll), ("PUT", f"{coll}/team-b-cq"), ("PATCH", f"{coll}/team-b-cq"),
                        ("DELETE", f"{coll}/team-b-cq")]  # fmt: skip
    out += [
        ("GET", "/api/v1/namespaces/team-b/events"),
        ("GET", "/apis/gpuaas.dev/v1alpha1/namespaces/team-b/workloads/team-b-job/explain"),
        ("POST", "/apis/gpuaas.dev/v1alpha1/tokens"),
    ]
    return out


@pytest.mark.parametrize(("method", "path"), _paths(), ids=lambda x: str(x))
def test_foreign_namespace_is_refused(live: Any, method: str, path: str) -> None:
    srv, token = live
    body = json.dumps({"metadata": {"name": "team-b-job", "namespace": "team-b"}})
    with srv.client(token) as c:
        r = c.request(method, path, content=body if method in ("POST", "PUT", "PATCH") else None,
                      headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code in (403, 404), (r.status_code, r.text)
    assert "team-b-job" not in r.text or "may not" in r.text
    assert r.json()["kind"] == "Status"


def test_lists_are_filtered_and_own_namespace_works(live: Any) -> None:
    srv, token = live
    with srv.client(token) as c:
        assert c.get(f"{KUEUE}/workloads").json()["items"] == []
        assert c.get("/api/v1/events").json()["items"] == [
            e for e in c.get("/api/v1/events").json()["items"] if e["metadata"]["namespace"] == ""
        ]
        assert [n["metadata"]["name"] for n in c.get("/api/v1/namespaces").json()["items"]] == [
            "team-a"
        ]
        assert c.get(f"{KUEUE}/clusterqueues/team-b-cq").status_code == 200  # cluster-scoped read
        with c.stream(
            "GET", f"{KUEUE}/workloads", params={"watch": "true", "timeoutSeconds": "1"}
        ) as r:
            assert [line for line in r.iter_lines() if line] == []
        job = yaml.safe_load((SEED / "team-a-job.yaml").read_text())
        assert c.post("/apis/batch/v1/namespaces/team-a/jobs", json=job).status_code == 201
        names = [w["metadata"]["name"] for w in c.get(f"{KUEUE}/workloads").json()["items"]]
        assert names == ["team-a-job"]
    with httpx.Client(
        base_url=srv.url, headers={"Authorization": f"Bearer {srv.admin_token}"}
    ) as c:
        assert len(c.get(f"{KUEUE}/workloads").json()["items"]) == 2
