"""Routes beyond the object kinds: the ClusterQueue summary, explain, and tokens.

The gpuaas.dev group holds what Kubernetes has no path for: a per-ClusterQueue summary for the
dashboard, ``explain`` for a workload, and token creation (admin only). Events are served by
``api.events``.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import Principal, authenticate, require_admin, require_namespace
from gpuaas.api.body import BodyError, parse_body, read_body
from gpuaas.engine.engine import Engine
from gpuaas.engine.tokens import Tokens

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


async def _who(request: Request) -> tuple[Engine, Tokens, Principal]:
    s = request.app.state
    return s.engine, s.tokens, await authenticate(request, s.tokens)


def install(app: FastAPI) -> None:
    router = APIRouter()

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
