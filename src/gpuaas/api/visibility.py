"""Kueue's visibility API (``visibility.kueue.x-k8s.io/v1beta1``): the pending workloads of a
ClusterQueue or a LocalQueue, in queue order, with their positions.

``GET .../clusterqueues/{name}/pendingworkloads`` and ``GET .../namespaces/{ns}/localqueues/
{name}/pendingworkloads`` answer a ``PendingWorkloadsSummary`` as Kueue's visibility server does
(``limit``, default 1000, and ``offset``). A tenant sees only its namespaces' workloads. Reads
the engine's view only.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import authenticate, require_namespace
from gpuaas.core.state import Phase
from gpuaas.engine.views import WorkloadView
from gpuaas.vocab.render import rfc3339

BASE = "/apis/visibility.kueue.x-k8s.io/v1beta1"


def _item(w: WorkloadView, in_lq: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": w.name,
            "namespace": w.namespace,
            "creationTimestamp": rfc3339(w.created_at),
        },
        "priority": w.priority,
        "localQueueName": w.workload.queue_name,
        "positionInClusterQueue": (w.position or 1) - 1,
        "positionInLocalQueue": in_lq,
    }


def summary(pending: list[WorkloadView], request: Request, lq: bool) -> Response:
    pending.sort(key=lambda w: w.position or 0)
    items, per_lq = [], dict[tuple[str, str], int]()
    for w in pending:
        key = (w.namespace, w.workload.queue_name)
        items.append(_item(w, per_lq.get(key, 0)))
        per_lq[key] = per_lq.get(key, 0) + 1
    offset = int(request.query_params.get("offset") or 0)
    limit = int(request.query_params.get("limit") or 1000)
    return JSONResponse(
        {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
            "metadata": {"creationTimestamp": None},
            "items": items[offset : offset + limit],
        }
    )


def install(app: FastAPI) -> None:
    router = APIRouter()

    async def pending(request: Request, namespaces: set[str] | None) -> list[WorkloadView]:
        view = await run_in_threadpool(
            lambda: request.app.state.engine.view(workloads=True, namespaces=namespaces)
        )
        return [w for w in view.workloads if w.phase == Phase.PENDING and w.position is not None]

    @router.get(
        f"{BASE}/clusterqueues/{{name}}/pendingworkloads",
        tags=["visibility"],
        operation_id="visibility_cq_pending",
    )
    async def _cq(request: Request, name: str) -> Response:
        p = await authenticate(request, request.app.state.tokens)
        found = await pending(request, p.namespace_filter())
        return summary([w for w in found if w.cluster_queue == name], request, lq=False)

    @router.get(
        f"{BASE}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
        tags=["visibility"],
        operation_id="visibility_lq_pending",
    )
    async def _lq(request: Request, namespace: str, name: str) -> Response:
        p = await authenticate(request, request.app.state.tokens)
        require_namespace(p, namespace, "get localqueues/pendingworkloads")
        found = await pending(request, {namespace})
        return summary([w for w in found if w.workload.queue_name == name], request, lq=True)

    app.include_router(router)
