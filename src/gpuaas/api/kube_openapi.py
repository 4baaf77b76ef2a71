"""OpenAPI v2 (``/openapi/v2``) and v3 (``/openapi/v3``, one document per group/version) as
kube-apiserver serves them, with the real schema of every served kind.

Kueue's kinds carry the ``openAPIV3Schema`` of Kueue's CRDs (``vocab.crds``), named as
kube-apiserver names a CRD's definition (``io.x-k8s.kueue.v1beta2.ClusterQueue``) and tagged
with ``x-kubernetes-group-version-kind``, which ``kubectl explain`` looks up. Each group/version
document lists its paths and operations, with the ``fieldValidation`` parameter on writes, which
is how kubectl learns the server validates fields. Documents are built once per process: they
depend on the vendored data only. Needs any valid token, as discovery.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from gpuaas.api.auth import authenticate
from gpuaas.api.discovery import KUBE_VERSION, api_groups, versions_by_priority
from gpuaas.vocab.crds import Resource, resources_of

JsonDoc = dict[str, Any]

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_META_FIELDS: dict[str, str] = {
    "name": "string",
    "namespace": "string",
    "generateName": "string",
    "uid": "string",
    "resourceVersion": "string",
    "generation": "integer",
    "creationTimestamp": "string",
    "deletionTimestamp": "string",
    "deletionGracePeriodSeconds": "integer",
    "labels": "object",
    "annotations": "object",
    "ownerReferences": "array",
    "finalizers": "array",
    "managedFields": "array",
}


def object_meta_schema() -> JsonDoc:
    props: JsonDoc = {}
    for name, type_ in _META_FIELDS.items():
        p: JsonDoc = {"type": type_}
        if type_ == "object":
            p["additionalProperties"] = {"type": "string"}
        elif type_ == "array":
            p["items"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        props[name] = p
    return {
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "type": "object",
        "properties": props,
    }


def definition_name(group: str, version: str, kind: str) -> str:
    """kube-apiserver's name for a kind's schema: the group reversed, then version and kind."""
    if not group:
        return f"io.k8s.api.core.{version}.{kind}"
    if group == "batch":
        return f"io.k8s.api.batch.{version}.{kind}"
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


def kind_schema(r: Resource, version: str, ref_prefix: str) -> JsonDoc:
    schema = r.schema(version)
    props = dict(schema.get("properties") or {})
    if "metadata" in props:
        props["metadata"] = {
            "description": "Standard object's metadata.",
            "allOf": [{"$ref": f"{ref_prefix}{_OBJECT_META}"}],
        }
    return {
        **schema,
        "properties": props,
        "x-kubernetes-group-version-kind": [
            {"group": r.kind.group, "kind": r.kind.kind, "version": version}
        ],
    }


_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")


def _operation(op_id: str, verb: str, r: Resource, version: str) -> JsonDoc:
    params = [{"name": "pretty", "in": "query", "schema": {"type": "string"}}]
    if verb in ("post", "put", "patch"):
        params += [{"name": p, "in": "query", "schema": {"type": "string"}} for p in _WRITE_PARAMS]
    return {
        "operationId": op_id,
        "tags": [r.kind.kind],
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": {"get": "get", "put": "put", "patch": "patch"}.get(verb, verb),
        "x-kubernetes-group-version-kind": {
            "group": r.kind.group,
            "kind": r.kind.kind,
            "version": version,
        },
    }


def _paths(group: str, version: str) -> JsonDoc:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: JsonDoc = {}
    for r in resources_of(group, version):
        name = f"{r.kind.kind}{version.capitalize()}"
        scope = f"{base}/namespaces/{{namespace}}" if r.kind.namespaced else base
        paths[f"{scope}/{r.kind.plural}"] = {
            "get": _operation(f"list{name}", "get", r, version),
            "post": _operation(f"create{name}", "post", r, version),
        }
        paths[f"{scope}/{r.kind.plural}/{{name}}"] = {
            verb: _operation(f"{verb}{name}", verb, r, version)
            for verb in ("get", "put", "patch", "delete")
        }
        if r.status:
            paths[f"{scope}/{r.kind.plural}/{{name}}/status"] = {
                verb: _operation(f"{verb}{name}Status", verb, r, version)
                for verb in ("get", "put", "patch")
            }
    return paths


@functools.cache
def v3_document(group: str, version: str) -> bytes:
    prefix = "#/components/schemas/"
    schemas: JsonDoc = {_OBJECT_META: object_meta_schema()}
    for r in resources_of(group, version):
        schemas[definition_name(group, version, r.kind.kind)] = kind_schema(r, version, prefix)
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{KUBE_VERSION[0]}.{KUBE_VERSION[1]}.0"},
        "paths": _paths(group, version),
        "components": {"schemas": schemas},
    }
    return json.dumps(doc).encode()


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _all_group_versions() -> list[tuple[str, str]]:
    out = [("", "v1")]
    for g in api_groups():
        out += [(g, v) for v in versions_by_priority(g) if resources_of(g, v)]
    return out


@functools.cache
def v3_index() -> bytes:
    paths = {}
    for g, v in _all_group_versions():
        digest = hashlib.sha512(v3_document(g, v)).hexdigest()[:32].upper()
        paths[_gv_key(g, v)] = {"serverRelativeURL": f"/openapi/v3/{_gv_key(g, v)}?hash={digest}"}
    return json.dumps({"paths": paths}).encode()


@functools.cache
def v2_document() -> bytes:
    prefix = "#/definitions/"
    definitions: JsonDoc = {_OBJECT_META: object_meta_schema()}
    paths: JsonDoc = {}
    for g, v in _all_group_versions():
        for r in resources_of(g, v):
            definitions[definition_name(g, v, r.kind.kind)] = kind_schema(r, v, prefix)
        paths.update(_paths(g, v))
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{KUBE_VERSION[0]}.{KUBE_VERSION[1]}.0"},
        "paths": paths,
        "definitions": definitions,
    }
    return json.dumps(doc).encode()


def install(app: FastAPI) -> None:
    router = APIRouter()

    async def who(request: Request) -> None:
        await authenticate(request, request.app.state.tokens)

    @router.get("/openapi/v2", tags=["discovery"], operation_id="kube_openapi_v2")
    async def _v2(request: Request) -> Response:
        await who(request)
        return Response(v2_document(), media_type="application/json")

    @router.get("/openapi/v3", tags=["discovery"], operation_id="kube_openapi_v3")
    async def _v3(request: Request) -> Response:
        await who(request)
        return Response(v3_index(), media_type="application/json")

    @router.get("/openapi/v3/api/v1", tags=["discovery"], operation_id="kube_openapi_v3_core")
    async def _v3_core(request: Request) -> Response:
        await who(request)
        return Response(v3_document("", "v1"), media_type="application/json")

    for g, v in _all_group_versions():
        if g:
            _register_v3(router, g, v, who)
    app.include_router(router)


def _register_v3(router: APIRouter, group: str, version: str, who: Any) -> None:
    @router.get(
        f"/openapi/v3/apis/{group}/{version}",
        tags=["discovery"],
        operation_id=f"kube_openapi_v3_{group}_{version}",
    )
    async def _doc(request: Request) -> Response:
        await who(request)
        return Response(v3_document(group, version), media_type="application/json")
