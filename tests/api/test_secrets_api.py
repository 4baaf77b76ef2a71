"""v1 Secret and ConfigMap over the API: a tenant's own namespace only, kube-apiserver's Table
columns (a count of keys, never a value), 422 naming the key on bad base64."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from gpuaas.api.testing import ServerProcess

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    srv = ServerProcess(tmp_path_factory.mktemp("secrets")).start()
    try:
        with srv.client() as c:
            for ns in ("team-a", "team-b"):
                doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                assert c.post("/api/v1/namespaces", json=doc).status_code == 201
            r = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-a"]})
            yield srv, r.json()["token"]
    finally:
        srv.kill()


def _secret(ns: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": ns}, **fields}  # fmt: skip


def test_tenant_secrets(live: tuple[ServerProcess, str]) -> None:
    srv, token = live
    with srv.client(token) as tenant:
        body = _secret("team-a", type="Opaque", stringData={"password": "hunter2"},
                       data={"user": base64.b64encode(b"alice").decode()})  # fmt: skip
        # kubectl sends fieldValidation=Strict: a Secret's top-level fields are known ones.
        r = tenant.post("/api/v1/namespaces/team-a/secrets?fieldValidation=Strict", json=body)
        assert r.status_code == 201, r.text
        strict = tenant.post(
            "/api/v1/namespaces/team-a/secrets?fieldValidation=Strict",
            json={**_secret("team-a"), "metadata": {"name": "other"}, "spce": {}},
        )
        assert strict.status_code in (400, 422) and "spce" in strict.text
        assert r.json()["data"]["password"] == base64.b64encode(b"hunter2").decode()
        r = tenant.get("/api/v1/namespaces/team-a/secrets", headers={"Accept": TABLE})
        table = r.json()
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Type", "Data", "Age"]
        assert table["rows"][0]["cells"][:3] == ["creds", "Opaque", 2]
        assert "hunter2" not in r.text and "aHVudGVyMg" not in r.text
        forbidden = tenant.post("/api/v1/namespaces/team-b/secrets", json=_secret("team-b"))
        assert forbidden.status_code == 403
        bad = tenant.post(
            "/api/v1/namespaces/team-a/secrets",
            json={**_secret("team-a", data={"key": "***"}), "metadata": {"name": "bad"}},
        )
        assert bad.status_code == 422 and "data[key]: illegal base64 data" in bad.json()["message"]
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "settings", "namespace": "team-a"}, "data": {"a": "1"}}  # fmt: skip
        assert tenant.post("/api/v1/namespaces/team-a/configmaps", json=cm).status_code == 201
        r = tenant.get("/api/v1/namespaces/team-a/configmaps", headers={"Accept": TABLE})
        assert [c["name"] for c in r.json()["columnDefinitions"]] == ["Name", "Data", "Age"]
