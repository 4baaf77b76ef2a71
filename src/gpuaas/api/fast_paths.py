"""The write fast paths: a kind's ``POST`` (create) and item ``DELETE`` skip FastAPI's router.

Creates and deletes are the API's hot writes: a batch system takes thousands of Workloads and
Jobs a second, and a MultiKueue worker deletes every losing copy the hub sent it. Profiles of
``bench/api.py`` and ``bench/multicluster.py`` showed FastAPI's routing (over the hundreds of
routes ``api.resources`` registers), its parameter handling and anyio's thread hand-off take
more of such a request's CPU than the engine does. ``FastPaths`` is the outermost ASGI app of a served
server (``server.run``: in front of uvicorn's proxy headers, ``api.draining`` and FastAPI's own
middleware stack, which a profile showed cost about a tenth of a create's event-loop time): a
``POST`` on the collection, or a ``DELETE`` on an item, of a kind served by ``api.resources``
goes straight to that kind's own handler (the very function the route calls, registered here by
``api.resources``), its errors to the app's own exception handlers, and an unexpected error to
the app's 500 handler and then on to uvicorn (which logs it), as FastAPI's error middleware
does, so the answer is the same byte for byte as through the router. Every other request passes
through untouched. None of the layers skipped acts on these requests: proxy headers only rewrite
the client address and scheme, which no write handler reads; draining ends GET streams only;
FastAPI's body limit is unset (``api.body`` limits bodies) and its telemetry off.

This module decides nothing about a write: no validation, no authorization, no engine call of
its own. It only finds the handler from the method and the path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gpuaas.vocab.kinds import Kind

# handler(request, namespace, name): name is None on a collection, namespace on a cluster kind
Handle = Callable[[Request, str | None, str | None], Awaitable[Response]]
# (method, the version's base path, namespaced, plural, item) -> that kind's handler
Key = tuple[str, str, bool, str, bool]
Paths = dict[Key, Handle]
Handler = Callable[[Request, Exception], Awaitable[Response]]


def collection(method: str, kind: Kind, version: str) -> Key:
    """The key of ``method`` on ``kind``'s collection in ``version``."""
    return method, _base(kind, version), kind.namespaced, kind.plural, False


def item(method: str, kind: Kind, version: str) -> Key:
    """The key of ``method`` on one object of ``kind`` in ``version``."""
    return method, _base(kind, version), kind.namespaced, kind.plural, True


def _base(kind: Kind, version: str) -> str:
    return f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"


def find(paths: Paths, method: str, path: str) -> tuple[Handle, str | None, str | None] | None:
    """The handler for ``method`` on ``path``, its namespace and name, or None when no route of
    ``api.resources`` in ``paths`` serves it.

    Same matches as the routes: a path parameter is one non-empty segment, and a trailing slash
    or anything below an item is not that item."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0]:
        return None
    if parts[1] == "apis":
        base, rest = "/".join(parts[:4]), parts[4:]
    elif parts[1] == "api":
        base, rest = "/".join(parts[:3]), parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
        if not namespace:
            return None
    if len(rest) == 1:
        handle = paths.get((method, base, namespace is not None, rest[0], False))
        return None if handle is None else (handle, namespace, None)
    if len(rest) == 2 and rest[1]:
        handle = paths.get((method, base, namespace is not None, rest[0], True))
        return None if handle is None else (handle, namespace, rest[1])
    return None


class FastPaths:
    """ASGI app in front of ``app`` (which serves ``api``, or is it): see the module docstring."""

    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api
        self.paths: Paths = api.state.fast_paths
        # the app's own dict (handlers added later are seen); FastAPI types its values loosely
        self.handlers: dict[Any, Handler] = cast(dict[Any, Handler], api.exception_handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = None
        if scope["type"] == "http" and scope["method"] in ("POST", "DELETE"):
            found = find(self.paths, scope["method"], scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        handle, namespace, name = found
        scope["app"] = self.api  # as Starlette sets it: handlers read ``request.app.state``
        request = Request(scope, receive, send)
        try:
            response = await handle(request, namespace, name)
        except Exception as exc:
            handler = _handler(self.handlers, exc)
            if handler is None:  # FastAPI's error middleware: the 500 answer, then raise
                await (await _unexpected(self.handlers, request, exc))(scope, receive, send)
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


def _handler(handlers: dict[Any, Handler], exc: Exception) -> Handler | None:
    """The app's handler for ``exc``, as Starlette's exception middleware looks it up (by the
    exception's classes in order); None for the catch-all, which the error middleware uses."""
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in handlers:
            return handlers[cls]
    return None


async def _unexpected(handlers: dict[Any, Handler], request: Request, exc: Exception) -> Response:
    """The answer of FastAPI's error middleware: its 500 handler's (the last of ``500`` and
    ``Exception`` registered), or Starlette's plain one."""
    handler: Handler | None = None
    for key, value in handlers.items():
        if key in (500, Exception):
            handler = value
    if handler is None:
        return PlainTextResponse("Internal Server Error", status_code=500)
    return await handler(request, exc)


def install(app: FastAPI, paths: Paths) -> None:
    """Keep ``paths`` for the fast paths ``outermost`` puts in front of ``app``."""
    app.state.fast_paths = paths


def outermost(api: FastAPI, inner: ASGIApp | None = None) -> FastPaths:
    """The fast paths in front of ``inner`` (default: ``api`` itself), for ``api``'s routes."""
    return FastPaths(api if inner is None else inner, api)
