"""Routes beyond the object kinds: events, the ClusterQueue summary, explain, and tokens.

Events follow Kubernetes' core/v1 Event shape (``/api/v1/events``, ``/api/v1/namespaces/{ns}/
events``), filtered to the caller's namespaces. The gpuaas.dev group holds what Kubernetes has no
path for: a per-ClusterQueue summary for the dashboard, ``explain`` for a workload, and token
creation (admin only).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import Principal, authenticate, require_admin, require_namespace
from gpuaas.api.body import BodyError, parse_body, read_body
from gpuaas.engine.engine import Engine
from gpuaas.engine.tokens import Tokens
from gpuaas.store import EventRecord
from gpuaas.vocab.render import rfc3339

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


async def _who(request: Request) -> tuple[Engine, Tokens, Principal]:
    s = request.app.state
    return s.engine, s.tokens, await authenticate(request, s.tokens)


def event_doc(e: EventRecord) -> dict[str, Any]:
    kind, _, ref = e.object.partition(" ")
    ns, _, name = ref.rpartition("/")
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"gpuaas.{e.id}",
            "namespace": e.namespace,
            "resourceVersion": str(e.id),
        },
        "type": e.type,
        "reason": e.reason,
        "message": e.message,
        "involvedObject": {"kind": kind, "name": name, **({"namespace": ns} if ns else {})},
        "firstTimestamp": rfc3339(e.time),
        "lastTimestamp": rfc3339(e.time),
        "eventTime": e.time,
        "source": {"component": "gpuaas"},
    }
    if e.related:
        doc["related"] = {"kind": "Workload", "name": e.related}
    return doc


def _object_filter(request: Request, namespace: str | None) -> str | None:
    fields: dict[str, str] = {}
    for part in filter(None, request.query_params.get("fieldSelector", "").split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise BodyError(400, f"fieldSelector {part!r}: expected key=value")
        fields[key.strip()] = value.strip()
    kind, name = fields.get("involvedObject.kind"), fields.get("involvedObject.name")
    if name is None:
        return None
    ns = fields.get("involvedObject.namespace", namespace)
    return f"{kind or 'Workload'} {ns}/{name}" if ns else f"{kind or 'Workload'} {name}"


def install(app: FastAPI) -> None:
    router = APIRouter()

    async def events(request: Request, namespace: str | None) -> Response:
        engine, _, p = await _who(request)
        if namespace is not None:
            require_namespace(p, namespace, "list events")
        obj = _object_filter(request, namespace)
        records = await run_in_threadpool(engine.events, namespace, obj)
        if not p.admin:
            records = [r for r in records if r.namespace in p.namespaces or r.namespace == ""]
        return JSONResponse(
            {"apiVersion": "v1", "kind": "EventList", "items": [event_doc(r) for r in records]}
        )

    @router.get("/api/v1/events", tags=["Event"], operation_id="list_events_all")
    async def _events_all(request: Request) -> Response:
        return await events(request, None)

    @router.get("/api/v1/namespaces/{namespace}/events", tags=["Event"], operation_id="list_events")
    async def _events_ns(request: Request, namespace: str) -> Response:
        return await events(request, namespace)

    @router.get(f"{GPUAAS}/clusterqueuestatus", tags=["gpuaas"], operation_id="cq_summary")
    async def _cq_summary(request: Request) -> Response:
        engine, _, _ = await _who(request)
        items = await run_in_threadpool(engine.cluster_queue_summary)
        return JSONResponse(
            {"apiVersion": "gpuaas.dev/v1alpha1", "kind": "ClusterQueueStatusList", "items": items}
        )

    @router.get(
        f"{GPUAAS}/namespaces/{{namespace}}/workloads/{{name}}/explain",
        tags=["gpuaas"],
        operation_id="explain_workload",
    )
    async def _explain(request: Request, namespace: str, name: str) -> Response:
        engine, _, p = await _who(request)
        require_namespace(p, namespace, "explain workloads")
        return JSONResponse(await run_in_threadpool(engine.explain, namespace, name))

    @router.post(f"{GPUAAS}/tokens", tags=["gpuaas"], operation_id="create_token", status_code=201)
    async def _create_token(request: Request) -> Response:
        _, tokens, p = await _who(request)
        require_admin(p, "create tokens")
        body = parse_body(await read_body(request, request.app.state.max_body), "application/json")
        if not isinstance(body, dict):
            raise BodyError(400, "a token request is an object: {namespaces: [...], name: ...}")
        namespaces = body.get("namespaces", [])
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            raise BodyError(422, "token: namespaces: must be a list of namespace names")
        admin = body.get("admin", False) is True
        if not namespaces and not admin:
            raise BodyError(422, "token: namespaces: give at least one namespace")
        name = str(body.get("name") or ",".join(namespaces) or "admin")
        token, rec = await run_in_threadpool(
            lambda: tokens.create(name, tuple(namespaces), admin=admin)
        )
        return JSONResponse(
            {"token": token, "name": rec.name, "namespaces": list(rec.namespaces), "admin": admin},
            status_code=201,
        )

    app.include_router(router)
