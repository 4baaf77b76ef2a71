"""``?watch=true``: newline-delimited JSON change events, resourceVersion aware.

Without a resourceVersion the stream starts with every matching object as ADDED, then follows live
changes; with one it replays the change log after it, then follows. Live changes arrive from the
engine's watch hub (after commit) through the event loop; duplicates of what was already sent are
dropped by resourceVersion, so a change is never sent twice or out of order.

As kube-apiserver: a resourceVersion older than the history the server replays (``history``
changes back) gets one ERROR event holding a 410 Expired Status and the stream ends (clients then
list again); ``allowWatchBookmarks=true`` gets BOOKMARK events (the kind with only
``metadata.resourceVersion``) after the replay and while the stream is idle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from gpuaas.api.status import status_doc
from gpuaas.engine.engine import Engine
from gpuaas.store import Change
from gpuaas.vocab.kinds import Kind

_MAX_QUEUED = 50_000
BOOKMARK_SECONDS = 5.0  # how long an idle stream waits before it sends a bookmark


def _line(change: Change, shape: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    return (json.dumps({"type": change.type, "object": shape(change.doc)}) + "\n").encode()


def _event(type_: str, obj: dict[str, Any]) -> bytes:
    return (json.dumps({"type": type_, "object": obj}) + "\n").encode()


def expired(resource_version: int, oldest: int) -> bytes:
    """The ERROR event kube-apiserver sends for a resourceVersion it no longer has."""
    message = f"too old resource version: {resource_version} ({oldest})"
    return _event("ERROR", status_doc(410, message, "Expired"))


def too_large(resource_version: int, current: int) -> bytes:
    """kube-apiserver's answer to a resourceVersion ahead of it (rather than waiting silently)."""
    message = f"Too large resource version: {resource_version}, current: {current}"
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return _event(
        "ERROR", status_doc(504, message, "Timeout", {"causes": [cause], "retryAfterSeconds": 1})
    )


async def _next(queue: asyncio.Queue[Change | None]) -> Change | None:
    return await queue.get()


async def stream(
    engine: Engine,
    kind: Kind,
    match: Callable[[Change], bool],
    resource_version: int | None,
    timeout: float | None,
    shape: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    bookmarks: bool = False,
    api_version: str = "",
    history: int | None = None,
) -> AsyncIterator[bytes]:
    """``history``: how many changes back a resourceVersion may start (None: all of them)."""
    if resource_version is not None and resource_version > engine.rv:
        yield too_large(resource_version, engine.rv)
        return
    if resource_version is not None and history is not None:
        oldest = engine.rv - history
        if resource_version < oldest:
            yield expired(resource_version, oldest)
            return
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Change | None] = asyncio.Queue()

    def deliver(change: Change) -> None:
        if queue.qsize() > _MAX_QUEUED:
            loop.call_soon_threadsafe(queue.put_nowait, None)  # too slow: end the stream
            raise RuntimeError("watcher fell behind")
        loop.call_soon_threadsafe(queue.put_nowait, change)

    sub: Any
    if resource_version is None:
        initial, last, sub = await run_in_threadpool(
            engine.snapshot_for_watch, kind, match, deliver
        )
    else:
        sub = engine.subscribe(match, deliver)
        initial, last = [], resource_version
        while True:
            batch = await run_in_threadpool(engine.store.changes_since, last, 5000)
            if not batch:
                break
            initial.extend(c for c in batch if match(c))
            last = batch[-1].rv

    def bookmark() -> bytes:
        meta = {"resourceVersion": str(last)}
        return _event("BOOKMARK", {"kind": kind.kind, "apiVersion": api_version, "metadata": meta})

    try:
        for change in initial:
            yield _line(change, shape)
        if bookmarks:
            yield bookmark()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - loop.time())
            if bookmarks:
                wait = BOOKMARK_SECONDS if wait is None else min(wait, BOOKMARK_SECONDS)
            try:
                nxt = await asyncio.wait_for(_next(queue), wait)
            except TimeoutError:
                if deadline is not None and loop.time() >= deadline:
                    return
                yield bookmark()
                continue
            if nxt is None:
                return
            if nxt.rv <= last:
                continue
            last = nxt.rv
            yield _line(nxt, shape)
    finally:
        sub.close()
