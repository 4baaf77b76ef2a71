"""``v1 Pod``, read only: the runtime's pods on Kubernetes' paths, and ``pods/log``.

``/api/v1[/namespaces/{ns}]/pods`` lists and watches (``kubectl get pods -o wide -w``),
``.../pods/{name}`` and ``/status`` get one, ``.../pods/{name}/log`` is ``kubectl logs [-f]``
(the runtime's captured output, as ``gpuaas logs`` reads it). Pods come from the runtime bridge
(the local runtime's processes, the Ray runtime's actors) through a ``runtime_book.Book``, made
into documents by ``pod_docs``. Tenancy is the namespaced kinds' (``auth.authorize``): a tenant
lists and watches its namespaces' pods only. Pods are made by their Job, never by a client, so
every write answers 405 MethodNotAllowed. With ``--runtime none`` there are no pods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from gpuaas.api import list_pages, runtime_book, selectors, tables
from gpuaas.api.auth import Principal, authenticate, authorize
from gpuaas.api.body import int_param
from gpuaas.api.json_response import FastJSONResponse
from gpuaas.api.logs_routes import log_response
from gpuaas.api.pod_docs import pending_pods, pods_of_run
from gpuaas.api.runtime_book import Book
from gpuaas.api.status import KubeError, not_found
from gpuaas.engine.engine import Engine
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.vocab.kinds import POD, Kind

JsonDoc = dict[str, Any]
CORE = "/api/v1"


def read_pods(engine: Engine, bridge: RuntimeBridge | None) -> dict[str, JsonDoc]:
    """``namespace/pod`` -> Pod for every pod the runtime has, running or pending."""
    if bridge is None:
        return {}
    runs = bridge.runs()
    pending = bridge.pending_pods()
    here = bridge.node.name if bridge.node is not None else ""
    ips: dict[str, str] = {}
    if any(p.node for run in runs.values() for p in run.pods):
        ips = {str(n.get("name")): str(n.get("address") or "") for n in bridge.nodes()}
    out: dict[str, JsonDoc] = {}
    for key, run in runs.items():
        manifest = engine.source_manifest(key) or {}
        out.update(pods_of_run(run, manifest, here, ips))
    for key, (admitted, specs) in pending.items():
        if key not in runs:
            out.update(pending_pods(key, specs, engine.source_manifest(key) or {}, admitted))
    return out


def book_response(
    request: Request,
    book: Book,
    kind: Kind,
    keep: Callable[[JsonDoc], bool],
) -> Response | StreamingResponse:
    """A list (or ``?watch=true`` stream, or Table) of ``book``'s objects that ``keep``, with
    label and field selectors and ``limit``/``continue`` as any kind's list answers them."""
    q = request.query_params
    fields = selectors.field_selector(q.get("fieldSelector", ""), kind.kind)
    labels = selectors.label_selector(q.get("labelSelector", ""))

    def match(doc: JsonDoc) -> bool:
        return keep(doc) and fields(doc) and labels(doc)

    include = q.get("includeObject", "Metadata")
    as_table = tables.wants_table(request.headers.get("accept", ""))

    def shape(doc: JsonDoc) -> JsonDoc:
        return tables.table(kind, "v1", [doc], include=include) if as_table else doc

    if q.get("watch", "").lower() in ("true", "1"):
        gen = runtime_book.stream(
            book,
            match,
            int_param("resourceVersion", q.get("resourceVersion")) or None,
            int_param("timeoutSeconds", q.get("timeoutSeconds")),
            shape,
            kind=kind.kind,
            api_version="v1",
            bookmarks=q.get("allowWatchBookmarks", "").lower() == "true",
        )
        return StreamingResponse(gen, media_type="application/json")

    def read() -> tuple[list[JsonDoc], int]:
        docs, rv = book.items()
        return [d for d in docs if match(d)], rv

    pages: list_pages.Pages = request.app.state.list_pages
    items, rv, nxt, remaining = pages.page(
        read, int_param("limit", q.get("limit")), q.get("continue")
    )
    meta: JsonDoc = {"resourceVersion": str(rv)}
    if nxt is not None:
        meta["continue"] = nxt
        meta["remainingItemCount"] = remaining
    if as_table:
        table = tables.table(kind, "v1", items, include=include, metadata=meta)
        return FastJSONResponse(table, media_type=tables.TABLE_MEDIA)
    return FastJSONResponse({"apiVersion": "v1", "kind": f"{kind.kind}List", "metadata": meta,
                         "items": items})  # fmt: skip


def method_not_allowed(kind: Kind) -> KubeError:
    return KubeError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {"kind": kind.plural},
    )


def _book(request: Request) -> Book:
    book: Book = request.app.state.pod_book
    return book


async def _who(request: Request) -> Principal:
    return await authenticate(request, request.app.state.tokens)


def install(app: FastAPI) -> None:
    engine: Engine = app.state.engine
    bridge: RuntimeBridge | None = app.state.runtime
    app.state.pod_book = Book(lambda: read_pods(engine, bridge))
    router = APIRouter()
    coll = f"{CORE}/namespaces/{{namespace}}/pods"
    item = f"{coll}/{{name}}"

    async def listing(request: Request, namespace: str | None) -> Response:
        p = await _who(request)
        watching = request.query_params.get("watch", "").lower() in ("true", "1")
        authorize(p, POD, namespace, None, "watch" if watching else "list")
        allowed = {namespace} if namespace is not None else p.namespace_filter()

        def keep(doc: JsonDoc) -> bool:
            return allowed is None or doc["metadata"]["namespace"] in allowed

        return await run_in_threadpool(book_response, request, _book(request), POD, keep)

    async def one(request: Request, namespace: str, name: str) -> JsonDoc:
        p = await _who(request)
        authorize(p, POD, namespace, name, "get")
        doc = await run_in_threadpool(_book(request).get, f"{namespace}/{name}")
        if doc is None:
            raise not_found(POD, name)
        return doc

    @router.get(f"{CORE}/pods", tags=["Pod"], operation_id="list_pods_all")
    async def _all(request: Request) -> Response:
        return await listing(request, None)

    @router.get(coll, tags=["Pod"], operation_id="list_pods")
    async def _list(request: Request, namespace: str) -> Response:
        return await listing(request, namespace)

    @router.get(item, tags=["Pod"], operation_id="get_pod")
    async def _get(request: Request, namespace: str, name: str) -> Response:
        doc = await one(request, namespace, name)
        if tables.wants_table(request.headers.get("accept", "")):
            include = request.query_params.get("includeObject", "Metadata")
            return JSONResponse(
                tables.table(POD, "v1", [doc], include=include), media_type=tables.TABLE_MEDIA
            )
        return JSONResponse(doc)

    @router.get(f"{item}/status", tags=["Pod"], operation_id="get_pod_status")
    async def _status(request: Request, namespace: str, name: str) -> Response:
        return JSONResponse(await one(request, namespace, name))

    @router.get(f"{item}/log", tags=["Pod"], operation_id="get_pod_log")
    async def _log(request: Request, namespace: str, name: str, follow: bool = False) -> Response:
        doc = await one(request, namespace, name)
        if bridge is None:
            raise not_found(POD, name)
        owners = doc["metadata"].get("ownerReferences") or [{}]
        workload = str(owners[0].get("name", ""))
        return await log_response(bridge, f"{namespace}/{workload}", name, follow)

    async def refuse(request: Request) -> Response:
        await _who(request)
        raise method_not_allowed(POD)

    for path in (coll, item, f"{item}/status", f"{CORE}/pods"):
        router.add_api_route(
            path,
            refuse,
            methods=["POST", "PUT", "PATCH", "DELETE"],
            include_in_schema=False,
        )
    app.include_router(router)
