"""Kubernetes-style routes for every kind in ``vocab.kinds``: create, get, list, replace, patch,
delete and watch, on the same paths Kubernetes uses (namespaced and all-namespaces forms).

Handlers are thin: authenticate, authorize, read the body, call the engine in a worker thread,
shape the answer. Errors are answered as Kubernetes ``Status`` objects by ``api.app``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from gpuaas.api import watch
from gpuaas.api.auth import Principal, authenticate, authorize, require_admin
from gpuaas.api.body import BodyError, parse_body, read_body
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.engine.tokens import Tokens
from gpuaas.store import Change
from gpuaas.vocab.kinds import KINDS, NAMESPACE, WORKLOAD, Kind

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


def _field_selector(request: Request) -> dict[str, str]:
    out: dict[str, str] = {}
    raw = request.query_params.get("fieldSelector", "")
    for part in filter(None, raw.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise BodyError(400, f"fieldSelector {part!r}: expected key=value")
        out[key.strip()] = value.strip().lstrip("=")
    unknown = set(out) - {"metadata.name", "metadata.namespace"}
    if unknown:
        raise BodyError(400, f"fieldSelector: unsupported field(s) {', '.join(sorted(unknown))}")
    return out


def _int_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise BodyError(400, f"{name} {raw!r} is not a number") from exc


def _is_watch(request: Request) -> bool:
    return request.query_params.get("watch", "").lower() in ("true", "1")


async def _read(request: Request) -> Any:
    _, _, limit = _state(request)
    raw = await read_body(request, limit)
    return parse_body(raw, request.headers.get("content-type"))


def _register(router: APIRouter, kind: Kind, version: str) -> None:
    base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
    shape = _shaper(kind, version)
    tag = kind.kind
    op = f"{kind.plural}_{version}"

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
        fields = _field_selector(request)
        name_only = fields.get("metadata.name")
        if fields.get("metadata.namespace"):
            ns_only = fields["metadata.namespace"]
            allowed = {ns_only} if allowed is None else allowed & {ns_only}
        visible_ns = set(p.namespaces) if (kind is NAMESPACE and not p.admin) else None

        def match(c: Change) -> bool:
            if c.key.gk != kind.gk:
                return False
            if allowed is not None and c.key.namespace not in allowed:
                return False
            if visible_ns is not None and c.key.name not in visible_ns:
                return False
            return name_only is None or c.key.name == name_only

        if verb == "watch":
            rv = _int_param(request, "resourceVersion")
            timeout = _int_param(request, "timeoutSeconds")
            gen = watch.stream(engine, kind, match, rv or None, timeout, shape)
            return StreamingResponse(gen, media_type="application/json")
        docs, rv = await run_in_threadpool(
            engine.list_objects, kind, None if allowed is None else set(allowed)
        )
        items = [
            shape(d)
            for d in docs
            if (name_only is None or d["metadata"]["name"] == name_only)
            and (visible_ns is None or d["metadata"]["name"] in visible_ns)
        ]
        return JSONResponse(
            {
                "apiVersion": f"{kind.group}/{version}" if kind.group else version,
                "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            }
        )

    async def create(request: Request, namespace: str | None) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, None, "create")
        doc = await _read(request)
        out = await run_in_threadpool(engine.create, kind, namespace, doc)
        return JSONResponse(shape(out), status_code=201)

    async def get_one(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "get")
        return JSONResponse(shape(await run_in_threadpool(engine.get, kind, namespace, name)))

    async def replace(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "update")
        doc = await _read(request)
        out = await run_in_threadpool(engine.replace, kind, namespace, name, doc)
        return JSONResponse(shape(out))

    async def patch(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "patch")
        body = await _read(request)
        if not isinstance(body, dict):
            raise Invalid(f"{kind.kind} {name}: a merge patch must be an object")
        out = await run_in_threadpool(engine.patch, kind, namespace, name, body)
        return JSONResponse(shape(out))

    async def delete(request: Request, namespace: str | None, name: str) -> Response:
        engine, p = await who(request)
        authorize(p, kind, namespace, name, "delete")
        out = await run_in_threadpool(engine.delete, kind, namespace, name)
        return JSONResponse(shape(out))

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


def install(app: FastAPI) -> None:
    router = APIRouter()
    for kind in KINDS:
        versions = kind.versions + (("v1alpha1",) if kind.kind == "Cohort" else ())
        for version in versions:
            _register(router, kind, version)
    app.include_router(router)
