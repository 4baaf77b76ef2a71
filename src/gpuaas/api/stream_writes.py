"""Long-lived response bodies (watches, dashboard streams) written to their sockets off the event
loop, with the GIL released.

Why: with 1,000 open watches a profile of ``bench/api.py --parts fanout`` put the server's event
loop at 96 % kernel time (``sys`` in ``/proc``), all of it in the streams' socket writes and in
the copies made to frame them (uvicorn joins every chunk with its framing, the step transport
joins again): uvloop writes with the GIL held, so every byte sent to a watcher was time no create
was served, while the machine's second core sat mostly idle. Here a stream's body, once its
headers are out, goes to one process-wide writer thread: ``sendmsg`` of the chunk's framing and
its parts (the hand-off's bytes, shared by every stream that got them, never copied per stream),
which releases the GIL for the copy into the kernel, and ``poll`` for sockets that are full.

The stream keeps HTTP/1.1 chunked framing byte for byte as uvicorn writes it; its end (the last,
empty chunk) is written by uvicorn once the thread has sent everything before it. Flow control is
kept: a stream whose client reads slowly waits while more than ``HIGH`` bytes are unsent, so its
own bounded queue fills and it ends, as before (``api.watch``). Plain TCP only: a TLS connection,
a response that is not chunked, or a transport that still holds bytes is written by uvicorn as
before (``paced`` slices), and so is everything when the server is not uvicorn's httptools
protocol (``http_writes.HttpProtocol`` puts the request's cycle in the scope's extensions).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import select
import socket
import threading
from collections import deque
from collections.abc import AsyncIterable, Sequence
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Send

from gpuaas.api.http_writes import CYCLE
from gpuaas.api.watch import paced

log = logging.getLogger(__name__)

HIGH = 1 << 20  # unsent bytes past which a stream waits for its client
LOW = 256 << 10  # ... until they fall to this
IOV = 512  # buffers per sendmsg (IOV_MAX is 1,024)
# The thread's niceness (Linux schedules threads one by one): its sends' kernel time yields the
# cores to the request path. Measured (22:03-22:06 UTC, 1,000 watches + 300 streams, two
# alternating pairs): p50 22.1 and 22.5 ms at 1,240/s with 10, 27.6 and 26.0 ms at 1,020/s
# without, the streams reading as much (1.7 GB/s).
NICE = 10  # added to the process's own

Chunk = bytes | memoryview | Sequence[bytes | memoryview]


class _Conn:
    """One stream's socket (a duplicate of the connection's descriptor, so that it stays valid
    until the thread is done with it) and its unsent buffers."""

    __slots__ = (
        "blocked",
        "bufs",
        "closing",
        "dead",
        "loop",
        "noted",
        "pending",
        "polled",
        "queued",
        "ready",
        "sock",
        "wake_at",
    )

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self.loop = loop
        self.queued: list[bytes | memoryview] = []  # posted, not yet taken by the thread
        self.bufs: deque[bytes | memoryview] = deque()  # the thread's own
        self.pending = 0  # bytes posted and not yet sent
        self.ready = asyncio.Event()
        self.blocked = False  # the stream waits for pending <= wake_at
        self.wake_at = LOW
        self.dead = False  # a send failed: the client is gone
        self.closing = False
        self.noted = False  # on the thread's to-do list
        self.polled = False  # registered for POLLOUT


class _Writer:
    """The writer thread: sends what streams post, in order per stream, polls full sockets."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._todo: list[_Conn] = []
        self._awake = True
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll = select.poll()
        self._poll.register(self._wake_r, select.POLLIN)
        self._polled: dict[int, _Conn] = {}
        thread = threading.Thread(target=self._run, name="gpuaas-stream-writes", daemon=True)
        thread.start()

    def note(self, conn: _Conn) -> None:
        """Have the thread look at ``conn`` (call with ``lock`` held)."""
        if not conn.noted:
            conn.noted = True
            self._todo.append(conn)
        if not self._awake:
            self._awake = True
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_w, b"x")

    def _run(self) -> None:
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):  # the kernel runs writers' threads first
            os.setpriority(
                os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE)
            )
        while True:
            try:
                self._round()
            except Exception:  # never let one stream stop the others' writes
                log.exception("stream writes failed")

    def _round(self) -> None:
        with self.lock:
            todo, self._todo = self._todo, []
            for conn in todo:
                conn.noted = False
                conn.bufs.extend(conn.queued)
                conn.queued = []
            if not todo:
                self._awake = False
        events = self._poll.poll(0 if todo else None)  # the GIL released while it waits
        if not todo:
            with self.lock:
                self._awake = True
        conns = {id(c): c for c in todo}
        for fd, _ in events:
            if fd == self._wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            elif fd in self._polled:
                conns.setdefault(id(self._polled[fd]), self._polled[fd])
        wakes: dict[asyncio.AbstractEventLoop, list[asyncio.Event]] = {}
        for conn in conns.values():
            self._send(conn, wakes)
        for loop, events_ in wakes.items():
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(_set_all, events_)

    def _send(
        self, conn: _Conn, wakes: dict[asyncio.AbstractEventLoop, list[asyncio.Event]]
    ) -> None:
        if conn.sock.fileno() < 0:
            return  # closed in an earlier round
        sent = 0
        bufs = conn.bufs
        while bufs and not conn.dead and not conn.closing:
            try:
                n = conn.sock.sendmsg(list(itertools.islice(bufs, IOV)))  # the GIL released
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # the client went away: its stream ends on the disconnect
                conn.dead = True
                break
            sent += n
            while n:
                first = len(bufs[0])
                if n >= first:
                    bufs.popleft()
                    n -= first
                else:
                    bufs[0] = memoryview(bufs[0])[n:]
                    n = 0
        fd = conn.sock.fileno()
        want = bool(bufs) and not conn.dead and not conn.closing
        if want != conn.polled:
            conn.polled = want
            if want:
                self._poll.register(fd, select.POLLOUT)
                self._polled[fd] = conn
            else:
                self._poll.unregister(fd)
                del self._polled[fd]
        with self.lock:
            if conn.dead or conn.closing:
                bufs.clear()
                conn.queued = []
                conn.pending = 0
            else:
                conn.pending -= sent
            if conn.closing:
                conn.sock.close()
            if conn.blocked and (conn.dead or conn.closing or conn.pending <= conn.wake_at):
                conn.blocked = False
                wakes.setdefault(conn.loop, []).append(conn.ready)


def _set_all(events: list[asyncio.Event]) -> None:
    for event in events:
        event.set()


_WRITER: _Writer | None = None
_WRITER_LOCK = threading.Lock()


def _writer() -> _Writer:
    global _WRITER
    with _WRITER_LOCK:
        if _WRITER is None:
            _WRITER = _Writer()
        return _WRITER


class DirectBody:
    """A chunked response body written by the writer thread (``open``: None where it cannot)."""

    def __init__(self, cycle: Any, conn: _Conn) -> None:
        self.cycle, self.conn, self.writer = cycle, conn, _writer()

    @classmethod
    def open(cls, scope: dict[str, Any]) -> DirectBody | None:
        """After ``http.response.start`` was sent: the body's writer, or None (uvicorn's)."""
        ref = (scope.get("extensions") or {}).get(CYCLE)
        cycle = ref() if ref is not None else None
        if cycle is None or not getattr(cycle, "chunked_encoding", False) or cycle.disconnected:
            return None
        transport = cycle.transport
        flush = getattr(transport, "flush", None)
        if flush is not None:
            flush()  # the status line and headers, kept for the end of this step
        if transport.get_extra_info("sslcontext") is not None:
            return None
        if transport.get_extra_info("ssl_object") is not None:
            return None
        if transport.is_closing() or transport.get_write_buffer_size() or cycle.flow.write_paused:
            return None  # bytes are still on their way: uvicorn's writes keep the order
        sock = transport.get_extra_info("socket")
        if sock is None or sock.type != socket.SOCK_STREAM:
            return None
        try:
            dup = socket.socket(fileno=os.dup(sock.fileno()))
            dup.setblocking(False)
        except OSError:
            return None
        return cls(cycle, _Conn(dup, asyncio.get_running_loop()))

    async def write(self, parts: Sequence[bytes | memoryview]) -> bool:
        """One chunk of ``parts`` (sent as they are, not joined); waits while the client lags.
        False once the client is gone: the stream ends (a stream that went on would never wait
        again, and starve the event loop that is to tell it of the disconnect)."""
        size = sum(len(p) for p in parts)
        conn = self.conn
        if conn.dead:
            return False
        if not size:
            return True
        with self.writer.lock:
            conn.queued.append(b"%x\r\n" % size)
            conn.queued.extend(parts)
            conn.queued.append(b"\r\n")
            conn.pending += size + 4 + len(b"%x" % size)
            self.writer.note(conn)
        await self._wait(HIGH, LOW)
        return not conn.dead

    async def _wait(self, high: int, low: int) -> None:
        conn = self.conn
        while True:
            with self.writer.lock:
                if conn.dead or conn.pending <= high:
                    return
                conn.blocked, conn.wake_at = True, low
                conn.ready.clear()
            await conn.ready.wait()

    async def finish(self) -> None:
        """Once every posted byte is sent, give the connection back to uvicorn."""
        await self._wait(0, 0)
        self.close()

    def close(self) -> bool:
        """Stop writing (the thread closes its descriptor); True when bytes were left unsent,
        so the response's framing is broken and the connection must not be used again."""
        conn = self.conn
        with self.writer.lock:
            if conn.closing:
                return False
            broken = conn.pending > 0 and not conn.dead
            conn.closing = True
            self.writer.note(conn)
        return broken


class StreamResponse(StreamingResponse):
    """Starlette's ``StreamingResponse`` whose body goes through ``DirectBody`` where it can.

    Its iterator may yield bytes or a sequence of them (one chunk, never joined on the direct
    path: the parts are shared by many streams)."""

    def __init__(self, content: AsyncIterable[Chunk], media_type: str | None = None, **kw: Any):
        body: Any = content  # chunks that are sequences are this class's own (stream_response)
        super().__init__(body, media_type=media_type, **kw)
        self._scope: dict[str, Any] = {}
        self.direct = False  # whether its body went through ``DirectBody`` (set once started)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self._scope = scope
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        direct = DirectBody.open(self._scope)
        self.direct = direct is not None
        done = False
        try:
            async for chunk in self.body_iterator:
                parts: Sequence[bytes | memoryview]
                parts = (chunk,) if isinstance(chunk, bytes | memoryview) else chunk  # type: ignore[assignment]
                if direct is not None:
                    if not await direct.write(parts):
                        break  # the client is gone
                    continue
                data = parts[0] if len(parts) == 1 else b"".join(parts)
                async for piece in paced(bytes(data) if isinstance(data, memoryview) else data):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            if direct is not None:
                await direct.finish()
            done = True
        finally:
            if direct is not None and direct.close() and not done:
                direct.cycle.transport.abort()  # a chunk half sent: the client reconnects
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:  # its finally now (a watch unsubscribes), not when collected
                with anyio.CancelScope(shield=True):
                    await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
