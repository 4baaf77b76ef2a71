"""Discovery as kube-apiserver serves it: ``/version``, ``/api``, ``/apis``, each group and
group/version's resource list, and aggregated discovery (``apidiscovery.k8s.io/v2``) when the
client asks for it in ``Accept``, as kubectl 1.32 does.

Everything here is read from ``vocab.crds`` (short names, categories and subresources as Kueue's
CRDs declare them); the routes only shape it. Discovery needs a valid token (any tenant), as
kube-apiserver's ``system:discovery`` role; ``/version`` is public, as ``system:public-info-viewer``.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gpuaas import __version__
from gpuaas.api.auth import authenticate
from gpuaas.vocab.crds import READ_ONLY_VERBS, VERBS, Resource, group_versions, resources_of

JsonDoc = dict[str, Any]

KUBE_VERSION = ("1", "32")  # the Kubernetes API level gpuaas speaks (kubectl's skew check)
_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

# Groups served beside the kinds table: Events (events.k8s.io) and Kueue's visibility API.
EXTRA_GROUPS: dict[str, tuple[str, ...]] = {
    "events.k8s.io": ("v1",),
    "visibility.kueue.x-k8s.io": ("v1beta1",),
    "authorization.k8s.io": ("v1",),
    "authentication.k8s.io": ("v1",),
}


def _version_key(v: str) -> tuple[int, int, int]:
    """kube's version priority: GA > beta > alpha, then the higher number first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if m is None:
        return (3, 0, 0)
    major, level, minor = int(m[1]), m[2], int(m[3] or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -major, -minor)


def versions_by_priority(group: str) -> tuple[str, ...]:
    versions = {**group_versions(), **EXTRA_GROUPS}.get(group, ())
    return tuple(sorted(versions, key=_version_key))


def _event_resources(group: str) -> list[JsonDoc]:
    """``events`` in core/v1 and events.k8s.io/v1 (read only)."""
    return [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": list(READ_ONLY_VERBS),
            "shortNames": ["ev"],
        }
    ]


def _runtime_resources() -> list[JsonDoc]:
    """``pods`` and ``nodes`` (read only, made from the runtime) as kube-apiserver lists them."""
    return [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
         "verbs": list(READ_ONLY_VERBS), "shortNames": ["no"]},
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": list(READ_ONLY_VERBS), "shortNames": ["po"], "categories": ["all"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
         "verbs": ["get"]},
        {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod",
         "verbs": ["get"]},
    ]  # fmt: skip


def _review_resources(group: str) -> list[JsonDoc]:
    """The self-reviews ``kubectl auth can-i`` and ``kubectl auth whoami`` create."""
    kinds = {
        "authorization.k8s.io": ("SelfSubjectAccessReview", "SelfSubjectRulesReview"),
        "authentication.k8s.io": ("SelfSubjectReview",),
    }[group]
    return [
        {"name": f"{k.lower()}s", "singularName": k.lower(), "namespaced": False, "kind": k,
         "verbs": ["create"]}
        for k in kinds
    ]  # fmt: skip


def _visibility_resources() -> list[JsonDoc]:
    return [
        {"name": "clusterqueues", "singularName": "clusterqueue", "namespaced": False,
         "kind": "ClusterQueue", "verbs": ["get"]},
        {"name": "clusterqueues/pendingworkloads", "singularName": "", "namespaced": False,
         "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
        {"name": "localqueues", "singularName": "localqueue", "namespaced": True,
         "kind": "LocalQueue", "verbs": ["get"]},
        {"name": "localqueues/pendingworkloads", "singularName": "", "namespaced": True,
         "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
    ]  # fmt: skip


def resource_list(group: str, version: str) -> list[JsonDoc]:
    """The ``APIResourceList.resources`` of one group/version (legacy discovery)."""
    out: list[JsonDoc] = []
    for r in resources_of(group, version):
        out.append(
            {
                "name": r.kind.plural,
                "singularName": r.singular,
                "namespaced": r.kind.namespaced,
                "kind": r.kind.kind,
                "verbs": list(VERBS),
                **({"shortNames": list(r.short_names)} if r.short_names else {}),
                **({"categories": list(r.categories)} if r.categories else {}),
            }
        )
        if r.status:
            out.append(
                {
                    "name": f"{r.kind.plural}/status",
                    "singularName": "",
                    "namespaced": r.kind.namespaced,
                    "kind": r.kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    if (group, version) in (("", "v1"), ("events.k8s.io", "v1")):
        out += _event_resources(group)
    if (group, version) == ("", "v1"):
        out += _runtime_resources()
    if group in ("authorization.k8s.io", "authentication.k8s.io"):
        out += _review_resources(group)
    if group == "visibility.kueue.x-k8s.io":
        out += _visibility_resources()
    return out


def _aggregated_resource(group: str, version: str, r: JsonDoc) -> JsonDoc:
    kind = {"group": group, "version": version, "kind": r["kind"]}
    doc: JsonDoc = {
        "resource": r["name"],
        "responseKind": kind,
        "scope": "Namespaced" if r["namespaced"] else "Cluster",
        "singularResource": r["singularName"],
        "verbs": r["verbs"],
    }
    if r.get("shortNames"):
        doc["shortNames"] = r["shortNames"]
    if r.get("categories"):
        doc["categories"] = r["categories"]
    return doc


def _aggregated_group(group: str) -> JsonDoc:
    versions = []
    for v in versions_by_priority(group):
        listed = resource_list(group, v)
        top = [r for r in listed if "/" not in r["name"]]
        subs = [r for r in listed if "/" in r["name"]]
        resources = []
        for r in top:
            doc = _aggregated_resource(group, v, r)
            mine = [s for s in subs if s["name"].split("/")[0] == r["name"]]
            if mine:
                doc["subresources"] = [
                    {
                        "subresource": s["name"].split("/")[1],
                        "responseKind": {"group": group, "version": v, "kind": s["kind"]},
                        "verbs": s["verbs"],
                    }
                    for s in mine
                ]
            resources.append(doc)
        versions.append({"version": v, "resources": resources, "freshness": "Current"})
    return {"metadata": {"name": group} if group else {}, "versions": versions}


def _wants_aggregated(request: Request) -> bool:
    return "as=APIGroupDiscoveryList" in request.headers.get("accept", "")


def _aggregated(groups: list[str]) -> Response:
    body = {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [_aggregated_group(g) for g in groups],
    }
    return JSONResponse(body, media_type=_AGGREGATED, headers={"Vary": "Accept"})


def api_groups() -> list[str]:
    return [g for g in {**group_versions(), **EXTRA_GROUPS} if g]


def _group_doc(group: str) -> JsonDoc:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions_by_priority(group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def version_info() -> JsonDoc:
    major, minor = KUBE_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor}.0+gpuaas.{__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "gpuaas",
        "platform": "linux/amd64",
    }


def install(app: FastAPI) -> None:
    router = APIRouter()

    async def who(request: Request) -> None:
        await authenticate(request, request.app.state.tokens)

    @router.get("/version", tags=["discovery"], operation_id="kube_version")
    async def _version() -> Response:
        return JSONResponse(version_info())

    @router.get("/api", tags=["discovery"], operation_id="kube_api")
    async def _api(request: Request) -> Response:
        await who(request)
        if _wants_aggregated(request):
            return _aggregated([""])
        host = request.headers.get("host", "")
        return JSONResponse(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
            },
            headers={"Vary": "Accept"},
        )

    @router.get("/apis", tags=["discovery"], operation_id="kube_apis")
    async def _apis(request: Request) -> Response:
        await who(request)
        if _wants_aggregated(request):
            return _aggregated(api_groups())
        return JSONResponse(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [_group_doc(g) for g in api_groups()],
            },
            headers={"Vary": "Accept"},
        )

    @router.get("/api/v1", tags=["discovery"], operation_id="kube_api_v1")
    async def _core_v1(request: Request) -> Response:
        await who(request)
        return JSONResponse(
            {"kind": "APIResourceList", "groupVersion": "v1", "resources": resource_list("", "v1")}
        )

    for group in api_groups():
        _register_group(router, group, who)
    app.include_router(router)


def _register_group(router: APIRouter, group: str, who: Any) -> None:
    @router.get(f"/apis/{group}", tags=["discovery"], operation_id=f"kube_group_{group}")
    async def _group(request: Request) -> Response:
        await who(request)
        return JSONResponse({"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group)})

    for version in versions_by_priority(group):
        _register_version(router, group, version, who)


def _register_version(router: APIRouter, group: str, version: str, who: Any) -> None:
    @router.get(
        f"/apis/{group}/{version}", tags=["discovery"], operation_id=f"kube_gv_{group}_{version}"
    )
    async def _gv(request: Request) -> Response:
        await who(request)
        return JSONResponse(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}",
                "resources": resource_list(group, version),
            }
        )


__all__ = ["Resource", "install", "resource_list", "version_info"]
