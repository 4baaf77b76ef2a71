"""``kubectl auth can-i`` and ``kubectl auth whoami``: access reviews answered from the token.

``SelfSubjectAccessReview`` and ``SelfSubjectRulesReview`` (``authorization.k8s.io/v1``) and
``SelfSubjectReview`` (``authentication.k8s.io/v1``), as kube-apiserver serves them. A review is
answered by the same rules every request passes (``auth.authorize`` and the routes' own:
writing a workload's or an admission check's status, nodes, metrics and tokens need the admin
token; pods, nodes and events are read only for everyone), so ``can-i`` says yes exactly where
the request would be let through. The admin may do everything else, as a cluster-admin; a
tenant may do what the tenancy rules allow in its namespaces. Reviews change nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gpuaas.api import kube_protobuf
from gpuaas.api.auth import AuthError, Principal, authenticate, authorize
from gpuaas.api.body import BodyError, parse_body, read_body
from gpuaas.vocab.crds import VERBS, resource
from gpuaas.vocab.kinds import KINDS, NAMESPACE, NODE, OCM_KINDS, POD, RUNTIME_KINDS, Kind

JsonDoc = dict[str, Any]
AUTHZ = "/apis/authorization.k8s.io/v1"
AUTHN = "/apis/authentication.k8s.io/v1"
ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
READS = ("get", "list", "watch")
# Paths outside the kinds that any token may read (discovery, OpenAPI, version, health).
_PUBLIC_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi/*", "/version", "/healthz")
# Subresources written only with the admin token (their controllers' writes).
_ADMIN_STATUS = {"Workload", "AdmissionCheck", *(k.kind for k in OCM_KINDS)}
_REVIEWS = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
}


def _kind_of(group: str, plural: str) -> Kind | None:
    for k in KINDS + RUNTIME_KINDS:
        if k.plural == plural and (group in (k.group, "*")):
            return k
    return None


def decide(
    p: Principal, verb: str, group: str, plural: str, subresource: str, namespace: str, name: str
) -> tuple[bool, str]:
    """(allowed, reason) for one request's attributes, by the rules the routes apply."""
    if (group, plural) in _REVIEWS:
        return verb == "create", "every token may review its own access"
    kind = _kind_of(group, plural)
    is_events = plural == "events" and group in ("", "events.k8s.io", "*")
    if kind in RUNTIME_KINDS or is_events:
        if verb not in READS:
            return False, f"{plural} are read only: the runtime and the engine make them"
        if kind is NODE and not p.admin:
            return False, f"token {p.name} may not {verb} nodes: it needs the admin token"
    if p.admin:
        return True, "the admin token may do everything"
    if "*" in (verb, plural, group):
        return False, f"token {p.name} may not use wildcards: it is a tenant token"
    if is_events:
        if namespace and namespace not in p.namespaces:
            return False, f"token {p.name} may not {verb} events in namespace {namespace}"
        return True, "events of the token's namespaces"
    if kind is None:
        return False, f"token {p.name} may not {verb} {plural}: gpuaas serves no such kind to it"
    if verb not in VERBS:
        return False, f"gpuaas does not serve {verb} on {plural}"
    if subresource == "status" and verb != "get":
        if kind.kind in _ADMIN_STATUS and verb in ("update", "patch"):
            return False, f"token {p.name} may not {verb} {plural}/status: it needs the admin token"
        return False, f"{plural}/status is read with get"
    if subresource == "log" and (kind is not POD or verb != "get"):
        return False, "logs are read with get pods/log"
    if subresource not in ("", "status", "log"):
        return False, f"no subresource {plural}/{subresource}"
    if subresource == "status" and kind.kind not in _ADMIN_STATUS and not resource(kind).status:
        return False, f"{plural} has no status subresource"
    try:
        authorize(p, kind, namespace or None, name or None, verb)
    except AuthError as exc:
        return False, exc.message
    return True, "allowed by the token's namespaces"


def _non_resource(p: Principal, verb: str, path: str) -> tuple[bool, str]:
    if p.admin:
        return True, "the admin token may do everything"
    public = any(path == x or (x.endswith("*") and path.startswith(x[:-1])) for x in _PUBLIC_PATHS)
    if verb == "get" and public:
        return True, "discovery is open to every token"
    return False, f"token {p.name} may not {verb} {path}: it needs the admin token"


def _resources() -> list[tuple[str, str, str]]:
    """(group, resource, subresource) of everything served, for the rules review."""
    out: list[tuple[str, str, str]] = []
    for k in KINDS:
        out.append((k.group, k.plural, ""))
        if resource(k).status:
            out.append((k.group, k.plural, "status"))
    out += [("", "pods", ""), ("", "pods", "status"), ("", "pods", "log"), ("", "nodes", "")]
    out += [("", "events", ""), ("events.k8s.io", "events", "")]
    return out


def rules(p: Principal, namespace: str) -> tuple[list[JsonDoc], list[JsonDoc]]:
    """(resourceRules, nonResourceRules) for ``namespace``, as SelfSubjectRulesReview lists."""
    if p.admin:
        return (
            [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        )
    out: list[JsonDoc] = []
    for group, plural, sub in _resources():
        name = f"{plural}/{sub}" if sub else plural
        if plural == NAMESPACE.plural:
            out.append({"verbs": ["list", "watch"], "apiGroups": [""], "resources": [name]})
            names = sorted(p.namespaces)
            if names:
                out.append(
                    {
                        "verbs": ["get"],
                        "apiGroups": [""],
                        "resources": [name],
                        "resourceNames": names,
                    }
                )
            continue
        verbs = [v for v in ALL_VERBS if decide(p, v, group, plural, sub, namespace, "")[0]]
        if verbs:
            out.append({"verbs": verbs, "apiGroups": [group], "resources": [name]})
    for group, plural in sorted(_REVIEWS):
        out.append({"verbs": ["create"], "apiGroups": [group], "resources": [plural]})
    return out, [{"verbs": ["get"], "nonResourceURLs": list(_PUBLIC_PATHS)}]


def user_info(p: Principal) -> JsonDoc:
    groups = ["system:authenticated"] + (["gpuaas:admin"] if p.admin else [])
    groups += [f"gpuaas:namespace:{n}" for n in sorted(p.namespaces)]
    return {"username": p.name, "groups": groups}


async def _review(request: Request, kind: str) -> tuple[Principal, JsonDoc, JsonDoc]:
    p = await authenticate(request, request.app.state.tokens)
    raw = await read_body(request, request.app.state.max_body)
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(kube_protobuf.PROTOBUF):
        body: Any = kube_protobuf.decode(raw)
    else:
        body = parse_body(raw, content_type or "application/json")
    if not isinstance(body, dict):
        raise BodyError(400, f"{kind}: the body must be an object")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise BodyError(422, f"{kind}: spec: must be an object")
    return p, body, spec


def _answer(body: JsonDoc, api_version: str, kind: str, status: JsonDoc) -> Response:
    out = {**body, "apiVersion": api_version, "kind": kind, "status": status}
    out.setdefault("metadata", {})
    return JSONResponse(out, status_code=201)


def _text(attrs: JsonDoc, field: str) -> str:
    value = attrs.get(field, "")
    if not isinstance(value, str):
        raise BodyError(
            422, f"SelfSubjectAccessReview: spec.resourceAttributes.{field}: must be a string"
        )
    return value


def install(app: FastAPI) -> None:
    router = APIRouter(tags=["authorization"])
    authz = "authorization.k8s.io/v1"

    @router.post(f"{AUTHZ}/selfsubjectaccessreviews", operation_id="create_ssar", status_code=201)
    async def _ssar(request: Request) -> Response:
        p, body, spec = await _review(request, "SelfSubjectAccessReview")
        attrs = spec.get("resourceAttributes")
        other = spec.get("nonResourceAttributes")
        if isinstance(attrs, dict):
            allowed, reason = decide(
                p,
                _text(attrs, "verb"),
                _text(attrs, "group"),
                _text(attrs, "resource"),
                _text(attrs, "subresource"),
                _text(attrs, "namespace"),
                _text(attrs, "name"),
            )
        elif isinstance(other, dict):
            allowed, reason = _non_resource(
                p, str(other.get("verb", "")), str(other.get("path", ""))
            )
        else:
            raise BodyError(
                422,
                "SelfSubjectAccessReview: spec: exactly one of resourceAttributes and "
                "nonResourceAttributes must be set",
            )
        status: JsonDoc = {"allowed": allowed, "reason": reason}
        if not allowed:
            status["denied"] = True
        return _answer(body, authz, "SelfSubjectAccessReview", status)

    @router.post(f"{AUTHZ}/selfsubjectrulesreviews", operation_id="create_ssrr", status_code=201)
    async def _ssrr(request: Request) -> Response:
        p, body, spec = await _review(request, "SelfSubjectRulesReview")
        namespace = spec.get("namespace") or ""
        if not isinstance(namespace, str):
            raise BodyError(422, "SelfSubjectRulesReview: spec.namespace: must be a string")
        resource_rules, non_resource_rules = rules(p, namespace)
        status = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        }
        return _answer(body, authz, "SelfSubjectRulesReview", status)

    @router.post(f"{AUTHN}/selfsubjectreviews", operation_id="create_ssr", status_code=201)
    async def _ssr(request: Request) -> Response:
        p, body, _ = await _review(request, "SelfSubjectReview")
        status = {"userInfo": user_info(p)}
        return _answer(body, "authentication.k8s.io/v1", "SelfSubjectReview", status)

    app.include_router(router)
