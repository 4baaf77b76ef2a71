"""``GET /apis/gpuaas.dev/v1alpha1/nodes``: the nodes pods run on, for ``gpuaas node list``.

One node for the local runtime (this server's), every node of the Ray cluster for the Ray
runtime: name, labels, taints, capacity (CPUs, memory, GPUs and their model) and the GPUs in use
with the pod holding each. A tenant token sees every node but only its own namespaces' pods in
``gpusInUse``. It reads the runtime bridge only; with ``--runtime none`` it lists this node with
nothing in use. It decides nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import authenticate
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.inventory import NodeInventory

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def install(app: FastAPI) -> None:
    router = APIRouter()

    @router.get(f"{GPUAAS}/nodes", tags=["gpuaas"], operation_id="list_nodes")
    async def _nodes(request: Request) -> Response:
        principal = await authenticate(request, request.app.state.tokens)
        bridge: RuntimeBridge | None = request.app.state.runtime
        node: NodeInventory | None = request.app.state.node
        if bridge is not None:
            items = await run_in_threadpool(bridge.nodes)
        else:
            items = [{**node.to_dict(), "alive": True, "gpusInUse": {}}] if node else []
        if not principal.admin:
            allowed = set(principal.namespaces)
            items = [_only(item, allowed) for item in items]
        return JSONResponse(
            {"apiVersion": "gpuaas.dev/v1alpha1", "kind": "NodeList", "items": items}
        )

    app.include_router(router)


def _only(item: dict[str, Any], namespaces: set[str]) -> dict[str, Any]:
    used = item.get("gpusInUse") or {}
    return {**item, "gpusInUse": {k: v for k, v in used.items() if k.split("/")[0] in namespaces}}
