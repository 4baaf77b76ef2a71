"""The dashboard's routes: the page and its assets, the summary, and a live Server-Sent Events feed.

``/`` and ``/static/...`` serve the files shipped in ``gpuaas/dashboard/static`` (no CDN, no build
step). ``.../dashboard/summary`` answers ``dashboard_view.build_summary`` for the caller's token;
``.../dashboard/stream`` sends the same summary as an SSE ``summary`` event on connect, and then,
within a fraction of a second of every committed change (through the engine's subscribe hook) and
every few seconds otherwise, a ``patch`` event: the summary's other fields and only the workload
rows that changed (``dashboard_patch``), so a push costs a stream the size of the change, not of
every workload. The summary and its patch are built and serialized once per burst of changes for
all the open streams of one caller (``_Feed``), never once per stream; a stream that fell more than
``PATCHES_KEPT`` pushes behind gets the newest whole summary instead, so a slow reader skips
rather than queues. EventSource cannot set headers, so both JSON routes take the token from
``Authorization: Bearer`` or from ``?token=``. A sampler thread feeds the per-ClusterQueue usage
history on every change and every few seconds. Nothing here changes engine state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import AsyncIterator
from functools import partial
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import msgspec
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api.auth import AuthError, Principal, authenticate
from gpuaas.api.dashboard_rows import LiveRows
from gpuaas.api.dashboard_view import SummaryParts, UsageHistory, build_summary
from gpuaas.api.stream_writes import StreamResponse
from gpuaas.engine.engine import Engine
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.tokens import Tokens
from gpuaas.inventory import NodeInventory
from gpuaas.store import Change

DASHBOARD = "/apis/gpuaas.dev/v1alpha1/dashboard"
COALESCE_S = 0.1  # gather a burst of commits into one push; well inside the 1 s promise
PER_STREAM_S = 0.002  # ... and longer while streams are many (300: 0.7 s), still inside it
MAX_COALESCE_S = 0.9
REFRESH_S = 5.0  # push anyway so sparklines and clocks move when nothing changes
SAMPLE_EVERY_S = 3.0
SAMPLE_MIN_GAP_S = 0.25
PATCHES_KEPT = 16  # a stream further behind than this many pushes gets the whole summary again
log = logging.getLogger(__name__)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}


def static_root() -> Traversable:
    return resources.files("gpuaas").joinpath("dashboard", "static")


def _asset(path: str) -> Response:
    parts = [p for p in path.split("/") if p]
    suffix = "." + parts[-1].rpartition(".")[2] if parts and "." in parts[-1] else ""
    bad = not parts or any(p in (".", "..") or "\\" in p for p in parts)
    node = static_root()
    if not bad:
        for p in parts:
            node = node.joinpath(p)
    if bad or suffix not in _TYPES or not node.is_file():
        return JSONResponse(
            {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound",
             "message": f"dashboard asset {path!r} not found"},
            status_code=404,
        )  # fmt: skip
    return Response(
        node.read_bytes(), media_type=_TYPES[suffix], headers={"Cache-Control": "no-cache"}
    )


async def principal_of(request: Request) -> Principal:
    """The caller, from ``Authorization: Bearer`` or (for EventSource) ``?token=``."""
    tokens: Tokens = request.app.state.tokens
    token = request.query_params.get("token", "").strip()
    if not token:
        return await authenticate(request, tokens)
    rec = await run_in_threadpool(tokens.authenticate, token)
    if rec is None:
        raise AuthError(401, "unknown token")
    return Principal(rec.name, rec.admin, frozenset(rec.namespaces))


class _Sampler:
    """Samples usage into the history on every committed change (at most every
    ``SAMPLE_MIN_GAP_S``) and every few seconds; a sample reads the ClusterQueues only.

    It stays subscribed without a viewer, on purpose (tried, 2026-11-26): with no subscriber
    the watch hub's thread no longer woke on each commit, and a lone client's creates over HTTP
    got slower, not faster (255 and 400 against 431 and 653 creates/s, runs in both orders, the
    same CPU per create), while in-process, without the HTTP side, they got faster: what costs
    there is the wake-ups of the request's threads, not this subscriber's work.
    """

    def __init__(self, engine: Engine, history: UsageHistory) -> None:
        self.engine, self.history = engine, history
        self.stop = threading.Event()
        self._dirty = threading.Event()
        self._sub: Any = engine.subscribe(lambda _c: True, lambda _c: self._dirty.set())
        self._thread = threading.Thread(target=self._run, name="gpuaas-dashboard", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self._dirty.wait(SAMPLE_EVERY_S)
                self._dirty.clear()
                if self.stop.is_set():
                    break
                try:
                    self.history.sample(self.engine)
                except Exception:  # never let a sample kill the sampler; try again next time
                    continue
                self.stop.wait(SAMPLE_MIN_GAP_S)
        finally:
            self._sub.close()

    def close(self) -> None:
        self.stop.set()
        self._dirty.set()
        self._thread.join(timeout=5)


_encode = msgspec.json.Encoder().encode


def _sse(event: str, data: Any) -> bytes:
    """One server-sent event. Encoded by msgspec (compact, UTF-8, no raw newline): the
    standard library's encoder was most of a push's cost after the rows themselves."""
    return b"event: " + event.encode() + b"\ndata: " + _encode(data) + b"\n\n"


class _Feed:
    """One caller's summary, built once per burst of changes (and every ``REFRESH_S``) for all
    of that caller's open streams from the rows it keeps (``dashboard_rows.LiveRows``), and
    serialized once as a patch of the one before; the whole summary is serialized only when a
    stream needs it (it connected, or fell more than ``PATCHES_KEPT`` pushes behind)."""

    def __init__(self, feeds: _Feeds, principal: Principal) -> None:
        self.feeds, self.principal = feeds, principal
        self.streams = 0
        self.seq = 0
        self.summary: dict[str, Any] = {}  # the newest, whole
        self._whole: tuple[int, asyncio.Future[bytes]] | None = None  # its bytes, once asked
        self.patches: deque[tuple[int, bytes]] = deque(maxlen=PATCHES_KEPT)  # (seq, patch)
        parts = SummaryParts(feeds.engine, principal, feeds.history, feeds.node, feeds.telemetry)
        self.live = LiveRows(parts)
        self.fresh = asyncio.Condition()
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def _build(self) -> tuple[dict[str, Any], bytes | None]:
        """The summary now and its patch of the last one, serialized (None: none, the streams
        start again from the whole); in a worker thread, as it reads the engine."""
        summary, patch = self.live.update()
        return summary, None if patch is None else _sse("patch", patch)

    async def run(self) -> None:
        f = self.feeds
        loop = asyncio.get_running_loop()
        flagged = threading.Event()  # set from the fan-out thread: one wake per burst

        def visible(c: Change) -> bool:
            ns = c.key.namespace
            return not ns or self.principal.admin or ns in self.principal.namespaces

        def deliver(c: Change) -> None:
            self.live.changed(c)
            if not flagged.is_set():
                flagged.set()
                loop.call_soon_threadsafe(self.changed.set)

        # Subscribed before the first (whole) read: a change after it is told, none is missed.
        sub: Any = f.engine.subscribe(visible, deliver)
        try:
            while self.streams > 0:
                try:
                    summary, patch = await run_in_threadpool(self._build)
                except Exception:  # the next change or refresh tries again
                    log.exception("building the dashboard summary failed")
                else:
                    async with self.fresh:
                        self.seq += 1
                        self.summary = summary
                        if patch is None:
                            self.patches.clear()
                        else:
                            self.patches.append((self.seq, patch))
                        self.fresh.notify_all()
                try:
                    await asyncio.wait_for(self.changed.wait(), REFRESH_S)
                    await asyncio.sleep(f.coalesce_s())
                except TimeoutError:
                    pass
                self.changed.clear()
                flagged.clear()
        finally:
            sub.close()

    def _newer(self, seen: int) -> bool:
        return self.seq > seen

    def _patches_since(self, seen: int) -> list[bytes] | None:
        """The patches a stream that sent everything up to ``seen`` sends now, or None when
        it must start again from the whole summary."""
        if seen and self.patches and self.patches[0][0] <= seen + 1:
            return [p for seq, p in self.patches if seq > seen]
        return None

    async def _whole_now(self) -> tuple[int, bytes]:
        """The newest whole summary as sent, serialized once for every stream that asks."""
        if self._whole is None or self._whole[0] != self.seq:
            serialized = asyncio.ensure_future(run_in_threadpool(_sse, "summary", self.summary))
            self._whole = (self.seq, serialized)
        seq, whole = self._whole
        return seq, await asyncio.shield(whole)

    async def updates(self) -> AsyncIterator[bytes]:
        """The whole summary, then each patch; a reader too far behind starts again."""
        seen = 0
        while True:
            async with self.fresh:
                await self.fresh.wait_for(partial(self._newer, seen))
                parts = self._patches_since(seen)
                seen = self.seq
            if parts is None:
                seen, data = await self._whole_now()
                parts = [data]
            for data in parts:
                yield data


class _Feeds:
    """The open feeds, one per caller (token name, admin, namespaces), on the event loop."""

    def __init__(
        self,
        engine: Engine,
        history: UsageHistory,
        node: NodeInventory | None,
        telemetry: TelemetryBridge | None,
    ) -> None:
        self.engine, self.history, self.node, self.telemetry = engine, history, node, telemetry
        self._feeds: dict[Principal, _Feed] = {}

    def coalesce_s(self) -> float:
        """How long a feed gathers changes before it rebuilds: every push is a turn per stream
        on the event loop and a send per stream, so many streams push less often."""
        streams = sum(f.streams for f in self._feeds.values())
        return min(MAX_COALESCE_S, COALESCE_S + PER_STREAM_S * streams)

    def join(self, principal: Principal) -> _Feed:
        feed = self._feeds.get(principal)
        if feed is None or feed.task is None or feed.task.done():
            feed = self._feeds[principal] = _Feed(self, principal)
        feed.streams += 1
        if feed.task is None:
            feed.task = asyncio.get_running_loop().create_task(feed.run())
        return feed

    def leave(self, feed: _Feed) -> None:
        feed.streams -= 1
        if feed.streams <= 0:
            if self._feeds.get(feed.principal) is feed:
                del self._feeds[feed.principal]
            if feed.task is not None:
                feed.task.cancel()


async def _stream(feeds: _Feeds, principal: Principal) -> AsyncIterator[bytes]:
    feed = feeds.join(principal)
    try:
        yield b"retry: 1000\n\n"
        async for data in feed.updates():
            yield data  # shared by the feed's streams; sliced only where uvicorn writes it
    finally:
        feeds.leave(feed)


def install(app: FastAPI) -> None:
    engine: Engine = app.state.engine
    node: NodeInventory | None = app.state.node
    telemetry: TelemetryBridge | None = app.state.telemetry
    history = UsageHistory()
    history.sample(engine)
    app.state.dashboard_history = history
    app.state.dashboard_sampler = _Sampler(engine, history)
    feeds = _Feeds(engine, history, node, telemetry)
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def _index() -> Response:
        return _asset("index.html")

    @router.get("/static/{path:path}", include_in_schema=False)
    async def _static(path: str) -> Response:
        return _asset(path)

    @router.get(f"{DASHBOARD}/summary", tags=["gpuaas"], operation_id="dashboard_summary")
    async def _summary(request: Request) -> Response:
        p = await principal_of(request)
        summary = await run_in_threadpool(build_summary, engine, p, history, node, telemetry)
        return JSONResponse(summary)

    @router.get(f"{DASHBOARD}/stream", tags=["gpuaas"], operation_id="dashboard_stream")
    async def _live(request: Request) -> Response:
        p = await principal_of(request)
        return StreamResponse(
            _stream(feeds, p),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    app.include_router(router)
