"""Kubernetes-style routes for every kind in ``vocab.kinds``: create, get, list, replace, patch,
delete and watch, on the same paths Kubernetes uses (namespaced and all-namespaces forms).

Handlers are thin: authenticate, authorize, read the body, call the engine in a worker thread,
shape the answer. Errors are answered as Kubernetes ``Status`` objects by ``api.app``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api import (
    fast_paths,
    list_pages,
    patching,
    selectors,
    tables,
    validation,
    watch,
    write_workers,
)
from gpuaas.api.auth import Principal, authenticate, authorize, require_admin
from gpuaas.api.body import int_param, parse_body, read_body
from gpuaas.api.json_response import FastJSONResponse
from gpuaas.api.status import KubeError, already_exists, conflict, invalid, not_found
from gpuaas.api.stream_writes import StreamResponse
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import AlreadyExists, Conflict, Invalid, NotFound
from gpuaas.engine.listed import collector_paused
from gpuaas.engine.multikueue import placements
from gpuaas.engine.tokens import Tokens
from gpuaas.store import Change
from gpuaas.vocab import render
from gpuaas.vocab.crds import resource
from gpuaas.vocab.kinds import KINDS, NAMESPACE, OCM_KINDS, WORKLOAD, Kind

JsonDoc = dict[str, Any]


def _state(request: Request) -> tuple[Engine, Tokens, int]:
    s = request.app.state
    return s.engine, s.tokens, s.max_body


def _shaper(kind: Kind, version: str) -> Any:
    api_version = f"{kind.group}/{version}" if kind.group else version

    def shape(doc: JsonDoc) -> JsonDoc:
        if doc.get("apiVersion") == api_version:
            return doc
        return {**doc, "apiVersion": api_version}

    return shape


def _int_param(request: Request, name: str) -> int | None:
    return int_param(name, request.query_params.get(name))


def _answer(doc: JsonDoc, warnings: list[str], code: int = 200) -> Response:
    response = FastJSONResponse(doc, status_code=code)
    for key, value in validation.warning_headers(warnings):
        response.headers.append(key, value)
    return response


def _is_watch(request: Request) -> bool:
    return request.query_params.get("watch", "").lower() in ("true", "1")


async def _read(request: Request) -> Any:
    _, _, limit = _state(request)
    raw = await read_body(request, limit)
    return parse_body(raw, request.headers.get("content-type"))


async def _delete_options_dry_run(request: Request) -> bool:
    """kubectl sends ``dryRun`` of a DELETE in its ``DeleteOptions`` body, not the query."""
    if not request.headers.get("content-length", "").strip("0"):
        return False
    options = await _read(request)
    values = options.get("dryRun") if isinstance(options, dict) else None
    if values in (None, []):
        return False
    if values != ["All"]:
        raise KubeError(400, "BadRequest", f"Invalid dry run value: {values}: must be [All]")
    return True


def _register(router: APIRouter, kind: Kind, version: str, fast: fast_paths.Paths) -> None:
    base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
    shape = _shaper(kind, version)
    tag = kind.kind
    op = f"{kind.plural}_{version}"
    api_version = f"{kind.group}/{version}" if kind.group else version

    def _validate(request: Request, doc: Any) -> list[str]:
        return validation.check(kind, version, doc, request.query_params.get("fieldValidation"))

    def dry_run(request: Request) -> bool:
        values = request.query_params.getlist("dryRun")
        for value in values:
            if value != "All":
                raise KubeError(400, "BadRequest", f'Invalid dry run value: "{value}": must be All')
        return bool(values)

    def writer(request: Request, engine: Engine, ptype: str | None = None) -> patching.Writer:
        q = dict(request.query_params)
        manager = patching.field_manager(q, request.headers.get("user-agent", ""), ptype)
        return patching.Writer(kind, version, manager, lambda: render.rfc3339(engine.clock()))

    async def who(request: Request) -> tuple[Engine, Principal]:
        engine, tokens, _ = _state(request)
        return engine, await authenticate(request, tokens)

    async def list_objects(request: Request, namespace: str | None) -> Response:
        engine, p = await who(request)
        verb = "watch" if _is_watch(request) else "list"
        authorize(p, kind, namespace, None, verb)
        allowed = p.namespace_filter()
        if kind.namespaced and namespace is not None:
            allowed = {namespace}
        elif kind is NAMESPACE:
            allowed = None  # cluster-scoped: filtered by name below
        q = request.query_params
        fields = selectors.field_selector(q.get("fieldSelector", ""), kind.kind)
        labels = selectors.label_selector(q.get("labelSelector", ""))
        ns_only = selectors.wanted("metadata.namespace", q.get("fieldSelector", ""))
        if ns_only and kind.namespaced:
            allowed = {ns_only} if allowed is None else allowed & {ns_only}
        visible_ns = set(p.namespaces) if (kind is NAMESPACE and not p.admin) else None

        def keep(doc: JsonDoc) -> bool:
            if visible_ns is not None and doc["metadata"]["name"] not in visible_ns:
                return False
            return fields(doc) and labels(doc)

        def match(c: Change) -> bool:
            if c.key.gk != kind.gk:
                return False
            if allowed is not None and c.key.namespace not in allowed:
                return False
            return keep(c.doc)

        as_table = tables.wants_table(request.headers.get("accept", ""))
        include = q.get("includeObject", "Metadata")
        render = shape
        if as_table:

            def render(doc: JsonDoc) -> JsonDoc:
                return tables.table(kind, version, [shape(doc)], include=include)

        if verb == "watch":
            gen = watch.stream(
                engine,
                kind,
                match,
                _int_param(request, "resourceVersion") or None,
                _int_param(request, "timeoutSeconds"),
                render,
                bookmarks=q.get("allowWatchBookmarks", "").lower() == "true",
                api_version=api_version,
                history=request.app.state.watch_history,
                encoding_key=(api_version, kind.kind, as_table, include),
                filter_key=(
                    kind.gk,
                    None if allowed is None else frozenset(allowed),
                    None if visible_ns is None else frozenset(visible_ns),
                    q.get("fieldSelector", ""),
                    q.get("labelSelector", ""),
                ),
            )
            return StreamResponse(gen, media_type="application/json")

        narrowed = bool(q.get("fieldSelector") or q.get("labelSelector") or visible_ns)

        def read() -> tuple[Sequence[JsonDoc], int]:
            docs, rv = engine.list_objects(kind, None if allowed is None else set(allowed))
            return (docs.where(keep) if narrowed else docs), rv

        pages: list_pages.Pages = request.app.state.list_pages
        items, rv, nxt, remaining = await run_in_threadpool(
            pages.page, read, _int_param(request, "limit"), q.get("continue")
        )
        meta: JsonDoc = {"resourceVersion": str(rv)}
        if nxt is not None:
            meta["continue"] = nxt
            meta["remainingItemCount"] = remaining
        with collector_paused(len(items)):  # the page's new documents hold no cycles
            if as_table:
                shaped = [shape(d) for d in items]
                return FastJSONResponse(
                    tables.table(kind, version, shaped, include=include, metadata=meta),
                    media_type=tables.TABLE_MEDIA,
                )
            return FastJSONResponse(
                {
                    "apiVersion": api_version,
                    "kind": f"{kind.kind}List",
                    "metadata": meta,
                    "items": [shape(d) for d in items],
                }
            )

    async def create(request: Request, namespace: str | None, _: str | None = None) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, None, "create")
        doc = await _read(request)
        warnings = _validate(request, doc)
        doc = writer(request, engine).updated(None, doc)
        try:
            if dry_run(request):
                out = await run_in_threadpool(
                    lambda: engine.preview(kind, namespace, None, lambda _: doc)
                )
            else:
                out = await write_workers.offload_many(
                    lambda items: engine.create_many(kind, items), (engine, kind), (namespace, doc)
                )
        except AlreadyExists as exc:
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if isinstance(name, str) and str(exc).startswith(kind.kind):
                raise already_exists(kind, name) from exc
            raise
        except Invalid as exc:
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str) or not name:
                raise
            raise invalid(kind, name, str(exc)) from exc
        return _answer(shape(out), warnings, 201)

    fast[fast_paths.collection("POST", kind, version)] = create

    async def get_one(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "get")
        return FastJSONResponse(shape(await fetch(engine, namespace, name)))

    async def fetch(engine: Engine, namespace: str | None, name: str) -> JsonDoc:
        try:
            doc: JsonDoc = await run_in_threadpool(engine.get, kind, namespace, name)
        except NotFound as exc:
            raise not_found(kind, name) from exc
        return doc

    async def get_status(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "get")
        return FastJSONResponse(shape(await fetch(engine, namespace, name)))

    async def replace(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "update")
        doc = await _read(request)
        warnings = _validate(request, doc)
        w = writer(request, engine)
        out = await write(
            engine,
            namespace,
            name,
            lambda old: w.updated(old, doc),
            create_missing=False,
            dry=dry_run(request),
        )
        return _answer(shape(out), warnings)

    async def write(
        engine: Engine,
        namespace: str | None,
        name: str,
        compute: patching.Compute,
        *,
        create_missing: bool,
        dry: bool = False,
    ) -> JsonDoc:
        do = engine.preview if dry else engine.write
        try:
            out: JsonDoc = await run_in_threadpool(
                lambda: do(kind, namespace, name, compute, create_missing=create_missing)
            )
        except NotFound as exc:
            raise not_found(kind, name) from exc
        except Conflict as exc:
            raise conflict(kind, name) from exc
        except Invalid as exc:
            raise invalid(kind, name, str(exc)) from exc
        return out

    async def patch(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "patch")
        ptype = patching.patch_type(kind, request.headers.get("content-type"))
        _, _, limit = _state(request)
        body = patching.parse(ptype, await read_body(request, limit))
        warnings = _validate(request, body) if ptype != patching.JSON_PATCH else []
        force = request.query_params.get("force", "").lower() in ("true", "1")
        compute = writer(request, engine, ptype).patch(name, ptype, body, force)
        out = await write(
            engine,
            namespace,
            name,
            compute,
            create_missing=ptype == patching.APPLY,
            dry=dry_run(request),
        )
        return _answer(shape(out), warnings)

    async def delete(request: Request, namespace: str | None, name: str | None) -> Response:
        assert name is not None  # an item's route, or its fast path
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "delete")
        dry = dry_run(request) or await _delete_options_dry_run(request)
        try:
            if dry:
                out = await write_workers.offload(engine.preview_delete, kind, namespace, name)
            else:  # the deletes of one loop step, as one call (``Engine.delete_many``)
                out = await write_workers.offload_many(
                    lambda items: engine.delete_many(kind, items),
                    ("delete", engine, kind),
                    (namespace, name),
                )
        except NotFound as exc:
            raise not_found(kind, name) from exc
        return FastJSONResponse(shape(out))

    fast[fast_paths.item("DELETE", kind, version)] = delete

    if kind.namespaced:
        coll = f"{base}/namespaces/{{namespace}}/{kind.plural}"
        item = f"{coll}/{{name}}"

        @router.get(
            coll, tags=[tag], operation_id=f"list_{op}", summary=f"List/watch {kind.plural}"
        )
        async def _list_ns(request: Request, namespace: str) -> Response:
            return await list_objects(request, namespace)

        @router.get(
            f"{base}/{kind.plural}",
            tags=[tag],
            operation_id=f"list_all_{op}",
            summary=f"List/watch {kind.plural} in every namespace",
        )
        async def _list_all(request: Request) -> Response:
            return await list_objects(request, None)

        @router.post(coll, tags=[tag], operation_id=f"create_{op}", status_code=201)
        async def _create(request: Request, namespace: str) -> Response:
            return await create(request, namespace)

        @router.get(item, tags=[tag], operation_id=f"get_{op}")
        async def _get(request: Request, namespace: str, name: str) -> Response:
            return await get_one(request, namespace, name)

        @router.put(item, tags=[tag], operation_id=f"replace_{op}")
        async def _put(request: Request, namespace: str, name: str) -> Response:
            return await replace(request, namespace, name)

        @router.patch(item, tags=[tag], operation_id=f"patch_{op}")
        async def _patch(request: Request, namespace: str, name: str) -> Response:
            return await patch(request, namespace, name)

        @router.delete(item, tags=[tag], operation_id=f"delete_{op}")
        async def _delete(request: Request, namespace: str, name: str) -> Response:
            return await delete(request, namespace, name)

        if resource(kind).status:

            @router.get(f"{item}/status", tags=[tag], operation_id=f"get_status_{op}")
            async def _get_status(request: Request, namespace: str, name: str) -> Response:
                return await get_status(request, namespace, name)

        if kind in OCM_KINDS:
            _ocm_status(router, item, tag, op, kind, who)

        if kind is WORKLOAD:

            @router.put(f"{item}/status", tags=[tag], operation_id=f"replace_status_{op}")
            @router.patch(f"{item}/status", tags=[tag], operation_id=f"patch_status_{op}")
            async def _status(request: Request, namespace: str, name: str) -> Response:
                """Admission check states, as an external check controller writes them."""
                engine, p = await who(request)
                require_admin(p, "update workloads/status")
                body = await _read(request)
                out = await run_in_threadpool(engine.update_check_states, namespace, name, body)
                return JSONResponse(shape(out))

        return

    coll = f"{base}/{kind.plural}"
    item = f"{coll}/{{name}}"

    @router.get(coll, tags=[tag], operation_id=f"list_{op}", summary=f"List/watch {kind.plural}")
    async def _list_c(request: Request) -> Response:
        return await list_objects(request, None)

    @router.post(coll, tags=[tag], operation_id=f"create_{op}", status_code=201)
    async def _create_c(request: Request) -> Response:
        return await create(request, None)

    @router.get(item, tags=[tag], operation_id=f"get_{op}")
    async def _get_c(request: Request, name: str) -> Response:
        return await get_one(request, None, name)

    @router.put(item, tags=[tag], operation_id=f"replace_{op}")
    async def _put_c(request: Request, name: str) -> Response:
        return await replace(request, None, name)

    @router.patch(item, tags=[tag], operation_id=f"patch_{op}")
    async def _patch_c(request: Request, name: str) -> Response:
        return await patch(request, None, name)

    @router.delete(item, tags=[tag], operation_id=f"delete_{op}")
    async def _delete_c(request: Request, name: str) -> Response:
        return await delete(request, None, name)

    if resource(kind).status:

        @router.get(f"{item}/status", tags=[tag], operation_id=f"get_status_{op}")
        async def _get_status_c(request: Request, name: str) -> Response:
            return await get_status(request, None, name)

    if kind in OCM_KINDS:
        _ocm_status(router, item, tag, op, kind, who)

    if kind.kind == "AdmissionCheck":

        @router.put(f"{item}/status", tags=[tag], operation_id=f"replace_status_{op}")
        @router.patch(f"{item}/status", tags=[tag], operation_id=f"patch_status_{op}")
        async def _check_status(request: Request, name: str) -> Response:
            """The Active condition, as the check's controller writes it."""
            engine, p = await who(request)
            require_admin(p, "update admissionchecks/status")
            body = await _read(request)
            out = await run_in_threadpool(engine.update_admission_check_status, name, body)
            return JSONResponse(shape(out))


def _ocm_status(router: APIRouter, item: str, tag: str, op: str, kind: Kind, who: Any) -> None:
    """PUT/PATCH ``.../status`` of an OCM kind, admin only, as an add-on's agent writes it."""

    @router.put(f"{item}/status", tags=[tag], operation_id=f"replace_status_{op}")
    @router.patch(f"{item}/status", tags=[tag], operation_id=f"patch_status_{op}")
    async def _status(request: Request, name: str, namespace: str | None = None) -> Response:
        engine, p = await who(request)
        require_admin(p, f"update {kind.plural}/status")
        body = await _read(request)
        merge = request.method == "PATCH"
        out = await run_in_threadpool(
            lambda: placements.update_status(engine, kind, namespace, name, body, merge=merge)
        )
        return JSONResponse(out)


def install(app: FastAPI) -> None:
    app.state.list_pages = list_pages.Pages()
    router = APIRouter()
    fast: fast_paths.Paths = {}
    for kind in KINDS:
        versions = kind.versions + (("v1alpha1",) if kind.kind == "Cohort" else ())
        for version in versions:
            _register(router, kind, version, fast)
    app.include_router(router)
    fast_paths.install(app, fast)
