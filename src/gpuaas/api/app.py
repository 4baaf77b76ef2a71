"""The HTTP application: FastAPI with the kind routes, the extras, health and error mapping.

``create_app`` takes a ready engine (already rebuilt from the store), so ``/healthz`` answering
means the server is ready. Every error leaves as a Kubernetes ``Status`` object with the code and
a message naming the object, field and reason; an unexpected exception is a 500 that still says
what failed, never a traceback.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from gpuaas import __version__
from gpuaas.api import (
    access,
    dashboard_routes,
    discovery,
    events,
    extras,
    kube_openapi,
    logs_routes,
    metrics_routes,
    nodes,
    nodes_routes,
    pods,
    resources,
    visibility,
    workbench_proxy,
    write_workers,
)
from gpuaas.api.auth import AuthError
from gpuaas.api.body import DEFAULT_MAX_BODY, BodyError
from gpuaas.api.status import KubeError, status_response
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import EngineError
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.tokens import Tokens
from gpuaas.inventory import NodeInventory

log = logging.getLogger(__name__)


# FastAPI's native OpenTelemetry (0.165 and later), unused here (no provider is configured), looks
# the global providers up on every request otherwise: a measurable part of a create's CPU.
_NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(
    engine: Engine,
    tokens: Tokens,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    node: NodeInventory | None = None,
    runtime: RuntimeBridge | None = None,
    telemetry: TelemetryBridge | None = None,
    watch_history: int | None = None,
) -> FastAPI:
    """The app over a ready ``engine``. The server hands in by name what routes read besides the
    engine: its ``runtime`` bridge (pods, logs) and its ``telemetry`` bridge (``/metrics``, usage,
    hoarding, the dashboard's GPU panel); either may be None (that feature is off).
    ``watch_history``: how many changes back a watch may start (older: 410 Expired)."""
    app = FastAPI(
        title="gpuaas",
        version=__version__,
        description="GPU-as-a-Service control plane with Kueue's admission and preemption.",
        **_NO_TELEMETRY,
    )
    app.state.engine = engine
    # Commits linger for writes still being prepared on the write workers (store.groupcommit).
    engine.committer.siblings = write_workers.in_flight
    app.state.tokens = tokens
    app.state.max_body = max_body
    app.state.node = node  # this server's node inventory (the dashboard matches flavors to it)
    app.state.runtime = runtime
    app.state.telemetry = telemetry
    app.state.watch_history = watch_history

    @app.exception_handler(EngineError)
    async def _engine_error(_: Request, exc: EngineError) -> Response:
        return status_response(exc.status, str(exc), exc.reason)

    @app.exception_handler(KubeError)
    async def _kube_error(_: Request, exc: KubeError) -> Response:
        return status_response(exc.code, exc.message, exc.reason, exc.details)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return status_response(404, "the server could not find the requested resource")
        return status_response(exc.status_code, str(exc.detail))

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

    discovery.install(app)
    kube_openapi.install(app)
    resources.install(app)
    visibility.install(app)
    events.install(app)
    extras.install(app)
    dashboard_routes.install(app)
    metrics_routes.install(app)
    logs_routes.install(app)
    nodes_routes.install(app)
    pods.install(app)
    nodes.install(app)
    access.install(app)
    workbench_proxy.install(app)
    return app
