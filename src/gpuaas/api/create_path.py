"""The create fast path: ``POST`` on a kind's collection skips FastAPI's router.

Creates are the API's hot write (a batch system takes thousands of Workloads and Jobs a
second), and a profile of ``bench/api.py`` showed FastAPI's routing, over the hundreds of routes
``api.resources`` registers, its parameter handling and its per-route middleware take more of a
create's CPU than the engine does. ``CreatePath`` is an ASGI middleware inside FastAPI's error
middleware: a ``POST`` whose path is the collection of a kind served by ``api.resources`` goes
straight to that kind's own create handler (the very function the route calls, registered here
by ``api.resources``), and its errors to the app's own exception handlers, so the answer is the
same byte for byte as through the router. Every other request passes through untouched.

This module decides nothing about a create: no validation, no authorization, no engine call of
its own. It only finds the handler from the path.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gpuaas.vocab.kinds import Kind

Create = Callable[[Request, str | None], Awaitable[Response]]
# (the version's base path, namespaced, plural) -> that kind's create handler
Creates = dict[tuple[str, bool, str], Create]
Handler = Callable[[Request, Exception], Awaitable[Response]]
_T = TypeVar("_T")

# Threads for the engine's blocking calls on the create path. Each waits for its group commit,
# so there are as many as the requests one commit should be able to batch; asyncio's executor
# hand-off is a fraction of anyio's (``run_in_threadpool``: cancel scopes, a capacity limiter).
_WORKERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gpuaas-create")


async def offload(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a create worker thread, awaited without blocking the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_WORKERS, functools.partial(fn, *args))


def collection(kind: Kind, version: str) -> tuple[str, bool, str]:
    """The key of ``kind``'s collection in ``version`` (its route's path, without a namespace)."""
    base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
    return base, kind.namespaced, kind.plural


def find(creates: Creates, path: str) -> tuple[Create, str | None] | None:
    """The create handler for ``path`` and its namespace, or None when it is not a collection.

    Same matches as the routes: a path parameter is one non-empty segment, and a trailing slash
    or anything below the collection is not the collection."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0]:
        return None
    if parts[1] == "apis":
        base, rest = "/".join(parts[:4]), parts[4:]
    elif parts[1] == "api":
        base, rest = "/".join(parts[:3]), parts[3:]
    else:
        return None
    if len(rest) == 1:
        create = creates.get((base, False, rest[0]))
        return None if create is None else (create, None)
    if len(rest) == 3 and rest[0] == "namespaces" and rest[1]:
        create = creates.get((base, True, rest[2]))
        return None if create is None else (create, rest[1])
    return None


class CreatePath:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app: ASGIApp, creates: Creates) -> None:
        self.app = app
        self.creates = creates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = None
        if scope["type"] == "http" and scope["method"] == "POST":
            found = find(self.creates, scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        create, namespace = found
        request = Request(scope, receive, send)
        try:
            response = await create(request, namespace)
        except Exception as exc:
            handler = _handler(scope["app"], exc)
            if handler is None:
                raise  # the app's 500 handler answers it, in FastAPI's error middleware
            response = await handler(request, exc)
        await response(scope, receive, send)


def _handler(app: Any, exc: Exception) -> Handler | None:
    """The app's handler for ``exc``, as Starlette's exception middleware looks it up (by the
    exception's classes in order); None for the catch-all, which answers from further out."""
    handlers: dict[Any, Handler] = app.exception_handlers
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in handlers:
            return handlers[cls]
    return None


def install(app: FastAPI, creates: Creates) -> None:
    """Put the fast path in front of ``app``'s router for the collections in ``creates``."""
    app.add_middleware(CreatePath, creates=creates)
