"""Who is calling and what they may do: bearer tokens and the namespace tenancy rules.

The admin token may do everything. A namespace token reads and writes namespaced objects in its
namespaces only, reads cluster-scoped objects (but only its own Namespace objects), and is refused
(403) anything else. Lists across namespaces are filtered, never refused. A missing or unknown
token is 401. This module only checks; it never changes state.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from gpuaas.engine.tokens import Tokens
from gpuaas.vocab.kinds import NAMESPACE, Kind

READ_VERBS = frozenset({"get", "list", "watch"})


class AuthError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True, frozen=True)
class Principal:
    name: str
    admin: bool
    namespaces: frozenset[str]

    def namespace_filter(self) -> set[str] | None:
        """None (no filter) for the admin, else the namespaces this token may see."""
        return None if self.admin else set(self.namespaces)


async def authenticate(request: Request, tokens: Tokens) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "missing bearer token (Authorization: Bearer <token>)")
    rec = tokens.cached(token.strip())  # most requests: no thread hop
    if rec is None:
        rec = await run_in_threadpool(tokens.authenticate, token.strip())
    if rec is None:
        raise AuthError(401, "unknown token")
    return Principal(rec.name, rec.admin, frozenset(rec.namespaces))


def authorize(p: Principal, kind: Kind, namespace: str | None, name: str | None, verb: str) -> None:
    """Raise 403 unless ``p`` may ``verb`` the object (``namespace`` None: across namespaces)."""
    if p.admin:
        return
    what = f"{verb} {kind.plural}"
    if kind.namespaced:
        if namespace is None:
            if verb in READ_VERBS:
                return  # filtered to the token's namespaces by the caller
            raise AuthError(403, f"token {p.name} may not {what} across namespaces")
        if namespace not in p.namespaces:
            raise AuthError(403, f"token {p.name} may not {what} in namespace {namespace}")
        return
    if verb not in READ_VERBS:
        raise AuthError(403, f"token {p.name} may not {what}: {kind.kind} is cluster-scoped")
    if kind is NAMESPACE and name is not None and name not in p.namespaces:
        raise AuthError(403, f"token {p.name} may not {what} {name}")


def require_admin(p: Principal, what: str) -> None:
    if not p.admin:
        raise AuthError(403, f"token {p.name} may not {what}: it needs the admin token")


def require_namespace(p: Principal, namespace: str, what: str) -> None:
    if not p.admin and namespace not in p.namespaces:
        raise AuthError(403, f"token {p.name} may not {what} in namespace {namespace}")
