"""The write fast paths find exactly what the routes serve, and answer as the routes do.

``find`` is table-driven against the paths FastAPI's routes match (a path parameter is one
non-empty segment; nothing below or beside a collection or an item). The answers themselves are
the route's own handler and error handlers: a real server's creates and deletes (the API test
modules) all go through the fast paths; here a refused create is checked to be the same Status
as kube-apiserver's, and a table of deletes gets the same bytes from an app whose router has no
delete routes left (only the fast path can answer) as from an app without the fast path.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gpuaas.api import fast_paths
from gpuaas.api.testing import ServerProcess
from gpuaas.server import Server, ServerOptions, build
from gpuaas.vocab.kinds import KINDS


def _handler_for(kind_name: str, version: str):  # type: ignore[no-untyped-def]
    async def handle(request: object, namespace: str | None, name: str | None) -> object:
        return (kind_name, version, namespace, name)

    return handle


PATHS: fast_paths.Paths = {}
for _kind in KINDS:
    for _version in _kind.versions:
        PATHS[fast_paths.collection("POST", _kind, _version)] = _handler_for(_kind.kind, _version)
        PATHS[fast_paths.item("DELETE", _kind, _version)] = _handler_for(_kind.kind, _version)

WL_V1B1 = "/apis/kueue.x-k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", f"{WL_V1B1}/namespaces/team-a/workloads", ("Workload", "team-a", None)),
        ("POST", "/apis/kueue.x-k8s.io/v1beta2/namespaces/t/workloads", ("Workload", "t", None)),
        ("POST", "/apis/batch/v1/namespaces/t/jobs", ("Job", "t", None)),
        ("POST", f"{WL_V1B1}/clusterqueues", ("ClusterQueue", None, None)),
        ("POST", "/api/v1/namespaces", ("Namespace", None, None)),
        ("DELETE", f"{WL_V1B1}/namespaces/t/workloads/w", ("Workload", "t", "w")),
        ("DELETE", "/apis/batch/v1/namespaces/t/jobs/j", ("Job", "t", "j")),
        ("DELETE", f"{WL_V1B1}/clusterqueues/cq", ("ClusterQueue", None, "cq")),
        ("DELETE", "/api/v1/namespaces/team-b", ("Namespace", None, "team-b")),
        # not what the routes of api.resources serve: the router answers (404, 405 or its own)
        ("POST", f"{WL_V1B1}/namespaces//workloads", None),  # empty namespace
        ("POST", f"{WL_V1B1}/namespaces/t/workloads/", None),  # trailing slash
        ("POST", f"{WL_V1B1}/namespaces/t/workloads/w", None),  # create on an item
        ("POST", f"{WL_V1B1}/namespaces/t/workloads/w/status", None),
        ("POST", f"{WL_V1B1}/workloads", None),  # namespaced kind, no namespace
        ("POST", f"{WL_V1B1}/namespaces/t/clusterqueues", None),  # cluster-scoped
        ("POST", "/apis/kueue.x-k8s.io/v9/namespaces/t/workloads", None),  # unknown version
        ("POST", "/apis/batch/v1/namespaces/t/pods", None),
        ("POST", "/api/v1/namespaces/t/pods", None),  # a runtime kind: its own routes
        ("DELETE", f"{WL_V1B1}/namespaces/t/workloads", None),  # a collection
        ("DELETE", f"{WL_V1B1}/namespaces/t/workloads/", None),  # empty name
        ("DELETE", f"{WL_V1B1}/namespaces//workloads/w", None),  # empty namespace
        ("DELETE", f"{WL_V1B1}/namespaces/t/workloads/w/status", None),  # below an item
        ("DELETE", f"{WL_V1B1}/workloads/w", None),  # namespaced kind, no namespace
        ("DELETE", f"{WL_V1B1}/namespaces/t/clusterqueues/cq", None),  # cluster-scoped
        ("DELETE", "/api/v1/namespaces/t/pods/p", None),  # a runtime kind: its own routes
        ("DELETE", "/api/v1/namespaces/", None),
        ("DELETE", "/apis/gpuaas.dev/v1alpha1/tokens/x", None),  # extras' own route
        ("GET", f"{WL_V1B1}/namespaces/t/workloads/w", None),  # reads: the router
        ("PUT", f"{WL_V1B1}/namespaces/t/workloads/w", None),
        ("POST", "/healthz", None),
        ("POST", "", None),
        ("POST", "apis/batch/v1/namespaces/t/jobs", None),
    ],
)
def test_find_matches_exactly_what_the_routes_serve(
    method: str, path: str, expected: tuple[str, str | None, str | None] | None
) -> None:
    found = fast_paths.find(PATHS, method, path)
    if expected is None:
        assert found is None
        return
    assert found is not None
    handler, namespace, name = found
    assert (namespace, name) == expected[1:]
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


# --- deletes: the fast path's answers are the router's, byte for byte -----------------------

CQS = f"{WL_V1B1}/clusterqueues"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


def job(name: str) -> dict[str, object]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}  # fmt: skip


SETUP: list[tuple[str, dict[str, object]]] = [
    (WORKLOADS, workload("w1")),
    (WORKLOADS, workload("w2")),
    (JOBS, job("j1")),
    (
        CQS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"resourceGroups": []},
        },
    ),
    (
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}},
    ),
]
JSON = {"Content-Type": "application/json"}
# (case, who: admin/tenant/nobody, path, query, body) in order: a case sees the ones before it
DELETES: list[tuple[str, str, str, str, bytes | None]] = [
    ("missing", "admin", f"{WORKLOADS}/nope", "", None),
    ("other tenant", "tenant", f"{WORKLOADS}/w1", "", None),
    ("tenant, cluster-scoped", "tenant", f"{CQS}/cq", "", None),
    ("anonymous", "nobody", f"{WORKLOADS}/w1", "", None),
    ("dry run", "admin", f"{WORKLOADS}/w1", "?dryRun=All", None),
    (
        "dry run in the body",
        "admin",
        f"{WORKLOADS}/w1",
        "",
        b'{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}',
    ),
    ("bad dry run", "admin", f"{WORKLOADS}/w1", "?dryRun=Some", None),
    ("bad dry run in the body", "admin", f"{WORKLOADS}/w1", "", b'{"dryRun":["Some"]}'),
    ("bad body", "admin", f"{WORKLOADS}/w1", "", b"{"),
    ("ok", "admin", f"{WORKLOADS}/w1", "", None),
    ("gone", "admin", f"{WORKLOADS}/w1", "", None),
    (
        "propagation and grace",
        "admin",
        f"{WORKLOADS}/w2",
        "?propagationPolicy=Background&gracePeriodSeconds=0",
        b'{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"}',
    ),
    ("job, background", "admin", f"{JOBS}/j1", "?propagationPolicy=Background", None),
    ("cluster-scoped", "admin", f"{CQS}/cq", "", None),
    ("namespace", "admin", "/api/v1/namespaces/team-b", "", None),
    ("other version", "admin", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq", "", None),
]
# what differs between two servers fed the same requests: uids, the clock's readings, and
# resourceVersions (each server's scheduler commits on its own time)
_UID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_RV = re.compile(rb'"resourceVersion":"\d+"')


def _same_everywhere(body: bytes) -> bytes:
    return _RV.sub(b'"resourceVersion":"RV"', _TIME.sub(b"T", _UID.sub(b"U", body)))


Answer = tuple[str, int, dict[str, str], bytes]


class _NoDeleteReachesTheRouter:
    """ASGI middleware: a DELETE that got past the fast path is answered 599."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await PlainTextResponse("reached the router", 599)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _answers(server: Server, *, fast: bool) -> list[Answer]:
    """Each case's status, headers and body from ``server``'s app: with the fast paths in front
    of a guard that fails every DELETE reaching the app (only the fast path can answer), or from
    the app alone (its router)."""
    app: ASGIApp = server.app
    if fast:  # as served: the fast paths outermost
        app = fast_paths.outermost(server.app, _NoDeleteReachesTheRouter(server.app))
    tenant, _ = server.tokens.create("tenant", ("team-a",))
    tokens = {"admin": server.admin_token_path.read_text().strip(), "tenant": tenant}
    out: list[Answer] = []
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        for path, doc in SETUP:
            made = await c.post(
                path, json=doc, headers={"Authorization": f"Bearer {tokens['admin']}"}
            )
            assert made.status_code == 201, made.text
        for case, who, path, query, body in DELETES:
            headers = dict(JSON) if body is not None else {}
            if who in tokens:
                headers["Authorization"] = f"Bearer {tokens[who]}"
            r = await c.request("DELETE", path + query, content=body, headers=headers)
            kept = {k: v for k, v in r.headers.items() if k not in ("date", "content-length")}
            out.append((case, r.status_code, kept, _same_everywhere(r.content)))
    return out


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    made: list[Server] = []
    try:
        for name in ("fast", "router"):
            options = ServerOptions(data_dir=tmp_path / name, runtime="none")
            made.append(build(options, say=lambda _: None))
        yield made[0], made[1]
    finally:
        for server in made:
            server.close()


def test_deletes_through_the_fast_path_answer_as_through_the_router(
    servers: tuple[Server, Server],
) -> None:
    fast, router = servers
    got = asyncio.run(_answers(fast, fast=True))
    want = asyncio.run(_answers(router, fast=False))
    assert [a[0] for a in got] == [case for case, *_ in DELETES]
    codes: dict[str, Any] = {}
    for (case, code, headers, body), (_, code2, headers2, body2) in zip(got, want, strict=True):
        assert (code, headers, body) == (code2, headers2, body2), case
        codes[case] = code
    # and the router's answers are the ones kube-apiserver gives
    assert codes == {
        "missing": 404, "other tenant": 403, "tenant, cluster-scoped": 403, "anonymous": 401,
        "dry run": 200, "dry run in the body": 200, "bad dry run": 400,
        "bad dry run in the body": 400, "bad body": 400, "ok": 200, "gone": 404,
        "propagation and grace": 200, "job, background": 200, "cluster-scoped": 200,
        "namespace": 200, "other version": 404,
    }  # fmt: skip


def test_an_unexpected_error_is_the_apps_500_through_either_path(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine failure nobody maps: the app's 500 Status, then the exception goes on to the
    server (which logs it), whether the fast path or the router answered."""

    def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    async def answer(server: Server, fast: bool) -> tuple[int, bytes]:
        monkeypatch.setattr(server.engine, "create_many", broken)  # what a create calls
        app: ASGIApp = fast_paths.outermost(server.app) if fast else server.app
        token = server.admin_token_path.read_text().strip()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            r = await c.post(
                WORKLOADS, json=workload("w"), headers={"Authorization": f"Bearer {token}"}
            )
        return r.status_code, r.content

    fast, router = servers
    got = asyncio.run(answer(fast, True))
    assert got == asyncio.run(answer(router, False))
    assert got[0] == 500 and b"internal error: RuntimeError: disk on fire" in got[1]

    async def raised(server: Server) -> None:
        transport = httpx.ASGITransport(app=fast_paths.outermost(server.app))
        token = server.admin_token_path.read_text().strip()
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            await c.post(
                WORKLOADS, json=workload("v"), headers={"Authorization": f"Bearer {token}"}
            )

    with pytest.raises(RuntimeError, match="disk on fire"):
        asyncio.run(raised(fast))


def test_deletes_of_one_loop_step_are_one_engine_call_with_an_answer_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent DELETEs (a MultiKueue hub removing the copies its workers did not win) reach
    the engine together, as ``delete_many``, and each still gets its own answer: the deleted
    object, or 404 for one that is missing or was deleted by an earlier item of the same call."""
    server = build(ServerOptions(data_dir=tmp_path / "d", runtime="none"), say=lambda _: None)
    calls: list[list[tuple[str | None, str]]] = []
    delete_many = server.engine.delete_many

    def recording(kind: Any, items: Any) -> Any:
        calls.append(list(items))
        return delete_many(kind, items)

    monkeypatch.setattr(server.engine, "delete_many", recording)
    names = ["w1", "w2", "nope", "w3", "w1"]

    async def run() -> list[tuple[int, str]]:
        app = fast_paths.outermost(server.app, _NoDeleteReachesTheRouter(server.app))
        auth = {"Authorization": f"Bearer {server.admin_token_path.read_text().strip()}"}
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            for n in ("w1", "w2", "w3"):
                made = await c.post(WORKLOADS, json=workload(n), headers=auth)
                assert made.status_code == 201, made.text
            answers = await asyncio.gather(
                *(c.delete(f"{WORKLOADS}/{n}", headers=auth) for n in names)
            )
            left = (await c.get(WORKLOADS, headers=auth)).json()["items"]
            assert left == []
        return [(r.status_code, r.json().get("metadata", {}).get("name", "")) for r in answers]

    try:
        got = asyncio.run(run())
    finally:
        server.close()
    assert got == [(200, "w1"), (200, "w2"), (404, ""), (200, "w3"), (404, "")]
    assert [n for _, n in calls[0]] == names and len(calls) == 1
