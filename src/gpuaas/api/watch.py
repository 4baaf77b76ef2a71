"""``?watch=true``: newline-delimited JSON change events, resourceVersion aware.

Without a resourceVersion the stream starts with every matching object as ADDED, then follows live
changes; with one it replays the change log after it, then follows. Live changes arrive from the
engine's watch hub (after commit) through the event loop; duplicates of what was already sent are
dropped by resourceVersion, so a change is never sent twice or out of order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from gpuaas.engine.engine import Engine
from gpuaas.store import Change
from gpuaas.vocab.kinds import Kind

_MAX_QUEUED = 50_000


def _line(change: Change, shape: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    return (json.dumps({"type": change.type, "object": shape(change.doc)}) + "\n").encode()


async def _next(queue: asyncio.Queue[Change | None]) -> Change | None:
    return await queue.get()


async def stream(
    engine: Engine,
    kind: Kind,
    match: Callable[[Change], bool],
    resource_version: int | None,
    timeout: float | None,
    shape: Callable[[dict[str, Any]], dict[str, Any]],
) -> AsyncIterator[bytes]:
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
    try:
        for change in initial:
            yield _line(change, shape)
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                nxt = await asyncio.wait_for(_next(queue), wait)
            except TimeoutError:
                return
            if nxt is None:
                return
            if nxt.rv <= last:
                continue
            last = nxt.rv
            yield _line(nxt, shape)
    finally:
        sub.close()
