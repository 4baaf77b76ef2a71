"""Routes onto the local runtime: a workload's pod logs (``gpuaas logs``) and its live pods.

``GET .../workloads/{name}/logs`` returns the captured stdout and stderr as plain text, one line
per line; ``?follow=true`` keeps the response open and streams new lines until the pods end, as
``kubectl logs -f``; ``?pod=`` picks one pod. ``GET .../runtime/pods`` lists the pods running on
this node (pid, GPUs, phase), filtered to the caller's namespaces. Both read the runtime bridge
the server handed to ``create_app`` (``app.state.runtime``), never the engine's observers, and
answer 404 with a plain reason when the server runs no runtime (``--runtime none``). A follow
waits on the event loop between reads (``LogFollower.step``), so open follows of quiet pods hold no
worker thread, and a closed connection ends its follow. No decisions here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import authenticate, require_namespace
from gpuaas.engine.errors import NotFound
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.runtimes import RuntimeRequestError
from gpuaas.runtimes.logs import FOLLOW_INTERVAL, LogFollower

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def _bridge(request: Request) -> RuntimeBridge:
    bridge: RuntimeBridge | None = request.app.state.runtime
    if bridge is not None:
        return bridge
    raise NotFound("this server runs no local runtime (started with --runtime none): no pods")


def _lines(lines: Iterator[str]) -> Iterator[bytes]:
    for line in lines:
        yield (line + "\n").encode()


async def _follow(follower: LogFollower) -> AsyncIterator[bytes]:
    """Each step in a worker thread for a moment (file reads); the waits on the event loop."""
    while True:
        lines = await run_in_threadpool(follower.step)
        if lines:
            yield b"".join((line + "\n").encode() for line in lines)
        if follower.done:
            return
        if not lines:
            await asyncio.sleep(FOLLOW_INTERVAL)


async def log_response(bridge: RuntimeBridge, key: str, pod: str | None, follow: bool) -> Response:
    """A workload's (or one pod's) log lines as plain text; streamed while ``follow``. Shared by
    ``gpuaas logs`` and the ``pods/log`` subresource (``kubectl logs``)."""
    try:
        lines = await run_in_threadpool(bridge.logs, key, pod, follow)
    except RuntimeRequestError as exc:
        raise NotFound(str(exc)) from exc
    if not follow:
        body = await run_in_threadpool(lambda: b"".join(_lines(lines)))
        return Response(body, media_type="text/plain; charset=utf-8")
    stream = _follow(lines) if isinstance(lines, LogFollower) else _lines(lines)
    return StreamingResponse(stream, media_type="text/plain; charset=utf-8")


def install(app: FastAPI) -> None:
    router = APIRouter()

    @router.get(
        f"{GPUAAS}/namespaces/{{namespace}}/workloads/{{name}}/logs",
        tags=["gpuaas"],
        operation_id="workload_logs",
    )
    async def _logs(
        request: Request, namespace: str, name: str, follow: bool = False, pod: str | None = None
    ) -> Response:
        principal = await authenticate(request, request.app.state.tokens)
        require_namespace(principal, namespace, "read logs")
        return await log_response(_bridge(request), f"{namespace}/{name}", pod, follow)

    @router.get(f"{GPUAAS}/runtime/pods", tags=["gpuaas"], operation_id="runtime_pods")
    async def _pods(request: Request) -> Response:
        principal = await authenticate(request, request.app.state.tokens)
        runs = await run_in_threadpool(_bridge(request).runs)
        items = []
        for key, run in runs.items():
            namespace, _, name = key.partition("/")
            if not principal.admin and namespace not in principal.namespaces:
                continue
            items.append(
                {
                    "namespace": namespace,
                    "workload": name,
                    "restartCount": run.restart_count,
                    "stopping": run.stopping,
                    "pods": [
                        {
                            "name": p.name,
                            "pid": p.pid,
                            "gpus": list(p.gpus),
                            "restarts": p.restarts,
                            "phase": p.phase,
                            "exitCode": p.exit_code,
                        }
                        for p in run.pods
                    ],
                }
            )
        return JSONResponse(
            {"apiVersion": "gpuaas.dev/v1alpha1", "kind": "PodList", "items": items}
        )

    app.include_router(router)
