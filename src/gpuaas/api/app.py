"""The HTTP application: FastAPI with the kind routes, the extras, health and error mapping.

``create_app`` takes a ready engine (already rebuilt from the store), so ``/healthz`` answering
means the server is ready. Every error leaves as a Kubernetes ``Status`` object with the code and
a message naming the object, field and reason; an unexpected exception is a 500 that still says
what failed, never a traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from gpuaas import __version__
from gpuaas.api import dashboard_routes, extras, logs_routes, metrics_routes, resources
from gpuaas.api.auth import AuthError
from gpuaas.api.body import DEFAULT_MAX_BODY, BodyError
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import EngineError
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.tokens import Tokens
from gpuaas.inventory import NodeInventory

log = logging.getLogger(__name__)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_response(code: int, message: str, reason: str | None = None) -> JSONResponse:
    return JSONResponse(
        {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Failure",
            "message": message,
            "reason": reason or _REASONS.get(code, "Unknown"),
            "code": code,
        },
        status_code=code,
    )


def create_app(
    engine: Engine,
    tokens: Tokens,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    node: NodeInventory | None = None,
    runtime: RuntimeBridge | None = None,
    telemetry: TelemetryBridge | None = None,
) -> FastAPI:
    """The app over a ready ``engine``. The server hands in by name what routes read besides the
    engine: its ``runtime`` bridge (pods, logs) and its ``telemetry`` bridge (``/metrics``, usage,
    hoarding, the dashboard's GPU panel); either may be None (that feature is off)."""
    app = FastAPI(
        title="gpuaas",
        version=__version__,
        description="GPU-as-a-Service control plane with Kueue's admission and preemption.",
    )
    app.state.engine = engine
    app.state.tokens = tokens
    app.state.max_body = max_body
    app.state.node = node  # this server's node inventory (the dashboard matches flavors to it)
    app.state.runtime = runtime
    app.state.telemetry = telemetry

    @app.exception_handler(EngineError)
    async def _engine_error(_: Request, exc: EngineError) -> Response:
        return status_response(exc.status, str(exc), exc.reason)

    @app.exception_handler(AuthError)
    async def _auth_error(_: Request, exc: AuthError) -> Response:
        return status_response(exc.status, exc.message)

    @app.exception_handler(BodyError)
    async def _body_error(_: Request, exc: BodyError) -> Response:
        return status_response(exc.status, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> Response:
        return status_response(422, f"invalid request: {exc.errors()}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return status_response(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get("/healthz", tags=["health"], operation_id="healthz")
    async def _healthz() -> Response:
        return Response("ok", media_type="text/plain")

    resources.install(app)
    extras.install(app)
    dashboard_routes.install(app)
    metrics_routes.install(app)
    logs_routes.install(app)
    return app
