"""The door to a running workbench: ``/workbenches/NS/NAME/...`` proxied to its JupyterLab.

A workbench's JupyterLab listens on loopback with no token of its own (``runtimes.workbench``);
this proxy is the only way in, and it checks the caller's gpuaas token first: the token of the
Notebook's namespace (or the admin's) passes, another tenant's gets 403, none 401. A browser opens
the Notebook's ``status.url`` once with ``?token=...`` (the dashboard's "Open" link does); the
proxy then sets an HttpOnly cookie scoped to that workbench's path and redirects to the URL
without the token, so JupyterLab's own requests (HTTP and the kernels' websockets) carry the
cookie and the user never logs in twice. The token never reaches JupyterLab: the proxy strips it
from the query, the ``Authorization`` header and the cookies it forwards.

HTTP goes through one shared ``httpx.AsyncClient``, streamed both ways; websockets through the
``websockets`` client, relayed frame by frame. Errors are Kubernetes ``Status`` objects, as
everywhere on the API. This module never changes engine state.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import urlencode

import httpx
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketDisconnect

from gpuaas.api.auth import AuthError, Principal, authorize
from gpuaas.api.status import status_response
from gpuaas.engine.errors import NotFound
from gpuaas.vocab.kinds import NOTEBOOK

PREFIX = "/workbenches"
COOKIE = "gpuaas_workbench"
TOKEN_PARAM = "token"
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "cookie",
        "content-length",
    }
)
_WS_SKIP = frozenset(
    {
        "host",
        "authorization",
        "cookie",
        "connection",
        "upgrade",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    }
)


class _Closed(Exception):
    """The proxy cannot reach the workbench: (status, reason, message)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _token(headers: Any, query: Any, cookies: Any) -> tuple[str, bool]:
    """(the caller's token, whether it came in the query) from header, query or cookie."""
    scheme, _, value = str(headers.get("authorization", "")).partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    if query.get(TOKEN_PARAM):
        return str(query[TOKEN_PARAM]), True
    return str(cookies.get(COOKIE, "")), False


async def _principal(app: FastAPI, token: str, namespace: str, name: str) -> Principal:
    if not token:
        raise AuthError(
            401,
            f"workbench {namespace}/{name}: missing token (open it with ?token=<your gpuaas "
            "token> once, or send Authorization: Bearer <token>)",
        )
    rec = await run_in_threadpool(app.state.tokens.authenticate, token)
    if rec is None:
        raise AuthError(401, "unknown token")
    p = Principal(rec.name, rec.admin, frozenset(rec.namespaces))
    authorize(p, NOTEBOOK, namespace, name, "update")
    return p


def _port(app: FastAPI, namespace: str, name: str) -> int:
    """The running workbench's port; 404 without such a Notebook, 503 when it is not running."""
    try:
        app.state.engine.get(NOTEBOOK, namespace, name)
    except NotFound:
        raise _Closed(404, "NotFound", f'notebooks.kubeflow.org "{name}" not found') from None
    bridge = app.state.runtime
    bench = bridge.workbench_at(f"{namespace}/{name}") if bridge is not None else None
    if bench is None:
        raise _Closed(
            503,
            "ServiceUnavailable",
            f"workbench {namespace}/{name} is not running (queued, stopped, or this server "
            "runs no pods); its Notebook's status says why",
        )
    return int(bench.port)


def _client(app: FastAPI) -> httpx.AsyncClient:
    client: httpx.AsyncClient | None = getattr(app.state, "workbench_client", None)
    if client is None:
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        app.state.workbench_client = client
    return client


def _forwarded_cookies(cookies: Any) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items() if k != COOKIE)


def _query_without_token(query: Any) -> str:
    items = [(k, v) for k, v in query.multi_items() if k != TOKEN_PARAM]
    return urlencode(items)


async def _proxy_http(request: Request, namespace: str, name: str) -> Response:
    app = request.app
    token, from_query = _token(request.headers, request.query_params, request.cookies)
    await _principal(app, token, namespace, name)  # AuthError: answered 401/403 by api.app
    try:
        port = await run_in_threadpool(_port, app, namespace, name)
    except _Closed as exc:
        return status_response(exc.status, exc.message, exc.reason)
    base = f"{PREFIX}/{namespace}/{name}/"
    query = _query_without_token(request.query_params)
    if from_query:  # first visit from a link: keep the token in a cookie, not in the URL
        target = request.url.path + (f"?{query}" if query else "")
        redirect = RedirectResponse(target, status_code=303)
        redirect.set_cookie(
            COOKIE,
            token,
            path=base,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )
        return redirect
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
    cookies = _forwarded_cookies(request.cookies)
    if cookies:
        headers["cookie"] = cookies
    headers["x-forwarded-proto"] = request.url.scheme
    headers["host"] = f"127.0.0.1:{port}"
    url = f"http://127.0.0.1:{port}{request.url.path}" + (f"?{query}" if query else "")
    client = _client(app)
    # A body only when the request has one: a GET with a chunked empty body confuses servers.
    has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
    upstream_req = client.build_request(
        request.method, url, headers=headers, content=request.stream() if has_body else None
    )
    try:
        upstream = await client.send(upstream_req, stream=True)
    except httpx.HTTPError as exc:
        return status_response(
            503,
            f"workbench {namespace}/{name} is starting or not answering ({type(exc).__name__})",
            "ServiceUnavailable",
        )
    out_headers = [
        (k, v)
        for k, v in upstream.headers.multi_items()
        if k.lower() not in ("connection", "keep-alive", "transfer-encoding")
    ]
    response = StreamingResponse(
        upstream.aiter_raw(),
        status_code=upstream.status_code,
        background=BackgroundTask(upstream.aclose),
    )
    response.raw_headers = [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in out_headers
    ]
    return response


async def _proxy_ws(ws: WebSocket, namespace: str, name: str, path: str) -> None:
    import websockets  # the workbench extra's; imported here so the API runs without it

    app = ws.app
    token, _ = _token(ws.headers, ws.query_params, ws.cookies)
    try:
        await _principal(app, token, namespace, name)
        port = await run_in_threadpool(_port, app, namespace, name)
    except (AuthError, _Closed) as exc:
        # 1008: policy violation (refused), as the HTTP answer would be 401/403/404/503.
        await ws.close(code=1008, reason=str(exc)[:120])
        return
    query = _query_without_token(ws.query_params)
    url = f"ws://127.0.0.1:{port}{PREFIX}/{namespace}/{name}/{path}" + (
        f"?{query}" if query else ""
    )
    headers = [(k, v) for k, v in ws.headers.items() if k.lower() not in _WS_SKIP]
    cookies = _forwarded_cookies(ws.cookies)
    if cookies:
        headers.append(("cookie", cookies))
    protocols = [
        p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",") if p.strip()
    ]
    try:
        upstream = await websockets.connect(
            url,
            additional_headers=headers,
            subprotocols=protocols or None,  # type: ignore[arg-type]
            max_size=None,
            open_timeout=10,
        )
    except (OSError, websockets.WebSocketException, TimeoutError) as exc:
        await ws.close(code=1011, reason=f"workbench not answering: {type(exc).__name__}")
        return
    await ws.accept(subprotocol=upstream.subprotocol)

    async def client_to_upstream() -> None:
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                return
            if msg.get("bytes") is not None:
                await upstream.send(msg["bytes"])
            elif msg.get("text") is not None:
                await upstream.send(msg["text"])

    async def upstream_to_client() -> None:
        async for data in upstream:
            if isinstance(data, bytes):
                await ws.send_bytes(data)
            else:
                await ws.send_text(data)

    tasks = [
        asyncio.ensure_future(client_to_upstream()),
        asyncio.ensure_future(upstream_to_client()),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, Exception):
                await t
        await upstream.close()
        with contextlib.suppress(RuntimeError):
            await ws.close()


def install(app: FastAPI) -> None:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @app.api_route(
        f"{PREFIX}/{{namespace}}/{{name}}/{{path:path}}", methods=methods, include_in_schema=False
    )
    async def _workbench(request: Request, namespace: str, name: str, path: str) -> Response:
        return await _proxy_http(request, namespace, name)

    @app.get(f"{PREFIX}/{{namespace}}/{{name}}", include_in_schema=False)
    async def _workbench_root(request: Request, namespace: str, name: str) -> Response:
        query = request.url.query
        return RedirectResponse(f"{PREFIX}/{namespace}/{name}/" + (f"?{query}" if query else ""))

    @app.websocket(f"{PREFIX}/{{namespace}}/{{name}}/{{path:path}}")
    async def _workbench_ws(ws: WebSocket, namespace: str, name: str, path: str) -> None:
        await _proxy_ws(ws, namespace, name, path)
