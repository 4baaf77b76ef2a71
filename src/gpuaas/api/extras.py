"""Routes beyond the object kinds: events, the ClusterQueue summary, explain, and tokens.

Events follow Kubernetes' core/v1 Event shape (``/api/v1/events``, ``/api/v1/namespaces/{ns}/
events``), filtered to the caller's namespaces. The gpuaas.dev group holds what Kubernetes has no
path for: a per-ClusterQueue summary for the dashboard, ``explain`` for a workload, and tokens
(admin only: create, list by id, revoke).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import Principal, authenticate, require_admin, require_namespace
from gpuaas.api.body import BodyError, parse_body, read_body
from gpuaas.engine.engine import Engine
from gpuaas.engine.tokens import TokenError, Tokens, token_id
from gpuaas.store import TokenRecord
from gpuaas.vocab.render import rfc3339

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def token_doc(rec: TokenRecord) -> dict[str, Any]:
    """A token as listed: its id (a hash prefix), never the token."""
    return {
        "id": token_id(rec),
        "name": rec.name,
        "namespaces": list(rec.namespaces),
        "admin": rec.admin,
        "created": rfc3339(rec.created),
    }


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
        raw_name = body.get("name")
        if raw_name is not None and not isinstance(raw_name, str):
            raise BodyError(422, "token: name: must be a string")
        name = raw_name or ",".join(namespaces) or "admin"
        try:
            token, rec = await run_in_threadpool(
                lambda: tokens.create(name, tuple(namespaces), admin=admin)
            )
        except TokenError as exc:
            raise BodyError(422, f"token: namespaces: {exc}") from exc
        return JSONResponse({"token": token, **token_doc(rec)}, status_code=201)

    @router.get(f"{GPUAAS}/tokens", tags=["gpuaas"], operation_id="list_tokens")
    async def _list_tokens(request: Request) -> Response:
        _, tokens, p = await _who(request)
        require_admin(p, "list tokens")
        records = await run_in_threadpool(tokens.records)
        return JSONResponse(
            {
                "apiVersion": "gpuaas.dev/v1alpha1",
                "kind": "TokenList",
                "items": [token_doc(r) for r in records],
            }
        )

    @router.delete(f"{GPUAAS}/tokens/{{ref}}", tags=["gpuaas"], operation_id="revoke_token")
    async def _revoke_token(request: Request, ref: str) -> Response:
        _, tokens, p = await _who(request)
        require_admin(p, "revoke tokens")
        try:
            rec = await run_in_threadpool(tokens.revoke, ref)
        except TokenError as exc:
            raise BodyError(404, str(exc)) from exc
        return JSONResponse(token_doc(rec))

    app.include_router(router)
