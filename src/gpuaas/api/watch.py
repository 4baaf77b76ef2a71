"""``?watch=true``: newline-delimited JSON change events, resourceVersion aware.

Without a resourceVersion the stream starts with every matching object as ADDED, then follows live
changes; with one it replays the change log after it, then follows. Live changes arrive from the
engine's watch hub (after commit), already encoded once for every stream of the same encoding
(``encoding_key``: API version, JSON or Table), through one inbox per event loop; duplicates of
what was already sent are dropped by resourceVersion, so a change is never sent twice or out of
order. Each stream's queue is bounded (``MAX_QUEUED``): a client that reads too slowly has its
stream ended, as kube-apiserver ends a watcher that falls behind, and watches again from the
last resourceVersion it saw. Each stream yields its chunks as parts (the hand-offs' shared bytes),
which ``api.stream_writes`` sends off the event loop without joining them per stream.

As kube-apiserver: a resourceVersion older than the history the server replays (``history``
changes back) gets one ERROR event holding a 410 Expired Status and the stream ends (clients then
list again); ``allowWatchBookmarks=true`` gets BOOKMARK events (the kind with only
``metadata.resourceVersion``) after the replay and while the stream is idle.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool

from gpuaas.api.status import status_doc
from gpuaas.engine.engine import Engine
from gpuaas.engine.watch import Encoding, Lines
from gpuaas.store import Change
from gpuaas.vocab.kinds import Kind

MAX_QUEUED = 10_000  # changes a stream may have waiting; more, and it ends (the client re-watches)
SLICE = 64 * 1024  # the most bytes one stream writes in one turn of the event loop
BOOKMARK_SECONDS = 5.0  # how long an idle stream waits before it sends a bookmark
_encode = msgspec.json.Encoder().encode


def _line(change: Change, shape: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    return _event(change.type, shape(change.doc))


def _event(type_: str, obj: dict[str, Any]) -> bytes:
    """One event's line, compact as kube-apiserver writes it. Encoded by msgspec: the standard
    library's encoder took most of a change's fan-out time on a MultiKueue worker, whose every
    copy and Job change the hub watches (documents passed the body gate, so both encode the
    same values)."""
    return _encode({"type": type_, "object": obj}) + b"\n"


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


async def paced(data: bytes) -> AsyncIterator[bytes | memoryview]:
    """``data`` in slices of at most ``SLICE`` bytes (views, not copies), where uvicorn writes a
    stream (TLS; ``api.stream_writes`` otherwise).

    The server waits for a lagging reader between two writes (its flow control), never within
    one: a stream that wrote a hand-off's megabytes at once had them all copied into its
    transport's buffer, however far behind its reader was, so the bounded queue never filled
    and the server kept the backlog in memory instead. In slices, a lagging stream stops
    after a slice or two, its queue fills, and it ends when it is too far behind (``MAX_QUEUED``).
    """
    if len(data) <= SLICE:
        yield data
        return
    view = memoryview(data)
    for start in range(0, len(data), SLICE):
        yield view[start : start + SLICE]


class Joined:
    """One hand-off's lines for one encoding and filter, and their bytes joined once for every
    stream that got them: with a thousand watchers, a per-stream join copied every change's
    bytes a thousand times more than the send itself."""

    __slots__ = ("_data", "lines")

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        self._data: bytes | None = None

    def data(self) -> bytes:
        if self._data is None:
            self._data = b"".join(data for _, data in self.lines)
        return self._data


class StreamQueue:
    """One stream's bounded queue of encoded changes, filled on its event loop. It keeps the
    hand-offs' line lists themselves (shared by every stream of the same encoding and filter),
    so a hand-off costs a stream O(1), not a copy of every line."""

    def __init__(self) -> None:
        self.batches: deque[Joined] = deque()
        self.size = 0  # lines waiting
        self.ready = asyncio.Event()
        self.dropped = False

    def receive(self, lines: Lines | Joined) -> None:
        if self.dropped:
            return
        batch = lines if isinstance(lines, Joined) else Joined(lines)
        if self.size + len(batch.lines) > MAX_QUEUED:
            # Too slow: its stream ends and the client watches again from the resourceVersion
            # it saw last (or gets 410 Expired), while writers and other watchers go on.
            self.dropped = True
            self.batches.clear()
            self.size = 0
        else:
            self.batches.append(batch)
            self.size += len(batch.lines)
        self.ready.set()

    def take(self) -> Iterator[tuple[int, bytes]]:
        """Every waiting (resourceVersion, line), oldest first; the queue is empty after."""
        batches, self.batches, self.size = self.batches, deque(), 0
        for batch in batches:
            for change, data in batch.lines:
                yield change.rv, data

    def take_after(self, last: int) -> tuple[list[bytes], int]:
        """The bytes of every waiting line after resourceVersion ``last`` (lines of a hand-off
        are in resourceVersion order), as parts to send in order, and the new last one; the
        queue is empty after. A hand-off wholly after ``last`` is one part: the bytes it shares
        with the other streams (never copied per stream: ``api.stream_writes`` sends the parts
        as they are)."""
        batches, self.batches, self.size = self.batches, deque(), 0
        parts: list[bytes] = []
        for batch in batches:
            lines = batch.lines
            if not lines:
                continue
            if lines[0][0].rv > last:
                parts.append(batch.data())
                last = lines[-1][0].rv
                continue
            for change, data in lines:
                if change.rv > last:  # else already sent (the snapshot or the replay had it)
                    parts.append(data)
                    last = change.rv
        return parts, last


class _Inbox:
    """One per event loop: the fan-out thread posts each stream's lines here, and the loop is
    woken once per hand-off, not once per stream or per change."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._items: list[tuple[StreamQueue, Lines]] = []

    def post(self, pending: StreamQueue, lines: Lines) -> None:
        with self._lock:
            self._items.append((pending, lines))
            if len(self._items) > 1:
                return  # a drain is already on its way
        self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        joined: dict[int, Joined] = {}  # the line lists live while this runs: ids are unique
        for pending, lines in items:
            batch = joined.get(id(lines))
            if batch is None:
                batch = joined[id(lines)] = Joined(lines)
            pending.receive(batch)


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES[loop] = _Inbox(loop)
    return inbox


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
    encoding_key: Hashable | None = None,
    filter_key: Hashable | None = None,
) -> AsyncIterator[bytes | list[bytes]]:
    """Each yield is one chunk: bytes, or parts sent in order (``stream_writes.StreamResponse``).
    ``history``: how many changes back a resourceVersion may start (None: all of them).
    ``encoding_key``: equal for streams whose ``shape`` renders alike (API version, format), so
    that each change is encoded once for all of them; None: this stream's own. ``filter_key``:
    equal for streams whose ``match`` is the same (tenant, namespaces, selectors), so that each
    change is matched once for all of them; None: this stream's own."""
    if resource_version is not None and resource_version > engine.rv:
        yield too_large(resource_version, engine.rv)
        return
    if resource_version is not None and history is not None:
        oldest = engine.rv - history
        if resource_version < oldest:
            yield expired(resource_version, oldest)
            return
    inbox = _inbox(asyncio.get_running_loop())
    loop = inbox.loop
    pending = StreamQueue()
    encoding = Encoding(
        encoding_key if encoding_key is not None else object(), lambda c: _line(c, shape)
    )

    def deliver(lines: Lines) -> None:
        inbox.post(pending, lines)

    sub: Any
    if resource_version is None:
        initial, last, sub = await run_in_threadpool(
            engine.snapshot_for_encoded_watch, kind, match, encoding, deliver, filter_key
        )
    else:
        sub = engine.subscribe_encoded(match, encoding, deliver, filter_key)
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
        chunk: list[bytes] = []  # the snapshot or replay in chunks of about SLICE bytes
        size = 0
        for change in initial:
            line = _line(change, shape)
            chunk.append(line)
            size += len(line)
            if size >= SLICE:
                yield chunk
                chunk, size = [], 0
        if bookmarks:
            chunk.append(bookmark())
        if chunk:
            yield chunk
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if pending.dropped:
                return
            if not pending.size:
                pending.ready.clear()
                wait = None if deadline is None else max(0.0, deadline - loop.time())
                if bookmarks:
                    wait = BOOKMARK_SECONDS if wait is None else min(wait, BOOKMARK_SECONDS)
                try:
                    async with asyncio.timeout(wait):  # no task per wait, unlike wait_for
                        await pending.ready.wait()
                except TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        return
                    yield bookmark()
                continue
            parts, last = pending.take_after(last)
            if parts:
                yield parts
    finally:
        sub.close()
