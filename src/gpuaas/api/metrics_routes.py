"""Telemetry routes: ``/metrics`` for Prometheus, hoarding offenders, and the usage report.

``GET /metrics`` needs the admin token (Prometheus sends it with ``authorization:
credentials_file``): its series name every tenant's namespaces and workloads, which a namespace
token must not see. ``GET /apis/gpuaas.dev/v1alpha1/hoarding`` and ``.../usage`` take any token
and show only the caller's namespaces. Handlers are thin: they read the telemetry bridge the
server handed to ``create_app`` (``app.state.telemetry``) through its public read side, which
takes the engine's views and its own lock, in a worker thread; with telemetry off they answer 503.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import Principal, authenticate, require_admin
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid, Unavailable
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.telemetry import TelemetryInputError, parse_group_by, parse_time
from gpuaas.telemetry.metrics import CONTENT_TYPE, build_registry, render

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


async def _who(request: Request) -> tuple[Engine, TelemetryBridge, Principal]:
    s = request.app.state
    principal = await authenticate(request, s.tokens)
    engine: Engine = s.engine
    bridge: TelemetryBridge | None = s.telemetry
    if bridge is None:
        raise Unavailable("telemetry is off on this server")
    return engine, bridge, principal


def _metrics(engine: Engine, bridge: TelemetryBridge) -> bytes:
    return render(build_registry(lambda: bridge.snapshot(engine.clock())))


def _hoarding(engine: Engine, bridge: TelemetryBridge, p: Principal) -> dict[str, Any]:
    now = engine.clock()
    rows = bridge.offenders(now, p.namespace_filter())
    return {"kind": "HoardingList", "time": now, "items": [r.to_dict() for r in rows]}


def _usage(
    engine: Engine, bridge: TelemetryBridge, p: Principal, params: dict[str, str]
) -> dict[str, Any]:
    try:
        by = parse_group_by(params.get("by") or "namespace")
        now = engine.clock()
        until = parse_time(params["until"], now, "--until") if params.get("until") else now
        since = parse_time(params["since"], now, "--since") if params.get("since") else None
        rows = bridge.usage(since=since, until=until, by=by, namespaces=p.namespace_filter())
        currency = bridge.currency
    except TelemetryInputError as exc:
        raise Invalid(str(exc)) from exc
    return {
        "kind": "UsageReport",
        "by": by.value,
        "since": since,
        "until": until,
        "currency": currency,
        "rows": [
            {
                "group": r.group,
                "gpuHours": r.gpu_hours,
                "cpuCoreHours": r.cpu_core_hours,
                "memoryGBHours": r.memory_gb_hours,
                "cost": r.cost,
                "wastedGPUHours": r.wasted_gpu_hours,
            }
            for r in rows
        ],
    }


def install(app: FastAPI) -> None:
    router = APIRouter(tags=["telemetry"])

    @router.get("/metrics", operation_id="metrics")
    async def metrics(request: Request) -> Response:
        engine, bridge, p = await _who(request)
        require_admin(p, "read /metrics")
        body = await run_in_threadpool(_metrics, engine, bridge)
        return Response(body, media_type=CONTENT_TYPE)

    @router.get(f"{GPUAAS}/hoarding", operation_id="hoarding")
    async def hoarding(request: Request) -> Response:
        engine, bridge, p = await _who(request)
        return JSONResponse(await run_in_threadpool(_hoarding, engine, bridge, p))

    @router.get(f"{GPUAAS}/usage", operation_id="usage")
    async def usage(request: Request) -> Response:
        engine, bridge, p = await _who(request)
        q = request.query_params
        params = {k: q[k] for k in ("since", "until", "by") if k in q}
        return JSONResponse(await run_in_threadpool(_usage, engine, bridge, p, params))

    app.include_router(router)
