"""Kept-alive HTTP/1.1 connections from the manager to one worker, for request/response calls.

The hub makes six writes to workers per workload it dispatches, and ``http.client`` spent more
CPU on each than the worker's answer took to decode: it builds the request header by header and
parses every answer's headers with the ``email`` package. Here a call is one ``sendall`` of the
request, written out at once, and the answer is read by ``httptools``' C parser (uvicorn's own),
which also decodes a chunked body and says whether the server keeps the connection. Each
connection serves one call at a time; a call takes an idle one (or opens one) and gives it back
once the answer is read. Several calls at once (``call_many``: a pass's writes to one worker)
are made from one thread, each on its own connection, their answers read as they come. It owns
sockets only: what is asked, and what an answer means, is
``remote``'s.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
from collections import deque
from collections.abc import Sequence
from urllib.parse import urlsplit

import httptools

_IDLE_MAX = 32  # kept-alive connections per worker (the controller's pool has 32 threads)
_RECV = 65536


class BadAnswer(OSError):
    """The server's bytes are not an HTTP answer (or it closed the connection mid-answer)."""


class Stale(ConnectionResetError):
    """A kept-alive connection the server closed while it was idle: the call is retried once on
    a new connection (a create that did happen answers 409 then, a delete 404: both fine)."""


class _Connection:
    """One socket and the parse of the answer it is reading (httptools' callbacks)."""

    __slots__ = ("_body", "_done", "_keep", "_parser", "_received", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._body: list[bytes] = []
        self._done = self._keep = self._received = False
        self._parser: httptools.HttpResponseParser | None = None

    def on_headers_complete(self) -> None:
        # Asked here: once the answer is complete the parser no longer says.
        self._keep = self._parser is not None and self._parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self._body.append(data)

    def on_message_complete(self) -> None:
        self._done = True

    def start(self, request: bytes) -> None:
        """Send ``request``; its answer is read by ``feed`` (or ``exchange``)."""
        self._body, self._done, self._keep, self._received = [], False, False, False
        self._parser = httptools.HttpResponseParser(self)
        self.sock.sendall(request)

    def feed(self) -> bool:
        """Read what the socket has of the answer (one ``recv``, and what TLS holds buffered);
        True once the answer is complete."""
        parser = self._parser
        assert parser is not None
        while True:
            data = self.sock.recv(_RECV)
            if not data:
                if self._received:
                    raise BadAnswer("the server closed the connection mid-answer")
                raise Stale("the server closed the connection")
            self._received = True
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise BadAnswer(f"bad answer: {exc}") from None
            pending = getattr(self.sock, "pending", None)
            if self._done or pending is None or not pending():
                return self._done

    def answer(self) -> tuple[int, bytes, bool]:
        """The complete answer: (status, body, whether to keep the connection open)."""
        assert self._parser is not None
        return self._parser.get_status_code(), b"".join(self._body), self._keep

    def exchange(self, request: bytes) -> tuple[int, bytes, bool]:
        """Send ``request``, read the whole answer: (status, body, whether to keep it open)."""
        self.start(request)
        while not self.feed():
            pass
        return self.answer()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Connections:
    """Kept-alive connections to one server (``http`` or ``https``)."""

    def __init__(self, server: str, context: ssl.SSLContext | None, connect_s: float,
                 read_s: float) -> None:  # fmt: skip
        url = urlsplit(server)
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")  # a server URL with a path (a proxy's) keeps it
        self.context = context or (ssl.create_default_context() if self.https else None)
        self._connect_s, self._read_s = connect_s, read_s
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.https else 80
        self._host_header = host if self.port == default else f"{host}:{self.port}"
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> _Connection:
        sock = socket.create_connection((self.host, self.port), timeout=self._connect_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(self._read_s)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def open_stream(self, read_s: float) -> socket.socket:
        """A connection of its own, never pooled (a watch's stream), reading with ``read_s``."""
        sock = self._open().sock
        sock.settimeout(read_s)
        return sock

    def request(self, method: str, path: str, headers: str, body: bytes | None) -> bytes:
        """The request's bytes; ``headers`` already written out (``Name: value\\r\\n`` each)."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n{headers}"
        if body is None:
            return f"{head}\r\n".encode("latin-1")
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body

    def call(self, request: bytes) -> tuple[int, bytes]:
        """(1) take a connection, (2) send and read the whole answer, (3) keep the connection
        unless the server closes it; a kept one found closed is retried once on a new one
        (never another kept one: it may have been closed as well).
        A failure is an ``OSError`` (a timeout, a refused connection, a bad answer)."""
        for attempt in (0, 1):
            conn, reused = self._take() if attempt == 0 else (None, False)
            try:
                if conn is None:
                    conn = self._open()
                status, data, keep = conn.exchange(request)
            except OSError as exc:
                if conn is not None:
                    conn.close()
                stale = isinstance(exc, (Stale, ConnectionResetError, BrokenPipeError))
                if reused and attempt == 0 and stale:
                    continue
                raise
            self._give_back(conn, keep)
            return status, data
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _take(self) -> tuple[_Connection | None, bool]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        return conn, conn is not None

    def _give_back(self, conn: _Connection, keep: bool) -> None:
        with self._lock:
            if not keep or self._closed or len(self._idle) >= _IDLE_MAX:
                conn.close()
            else:
                self._idle.append(conn)

    def call_many(self, requests: Sequence[bytes]) -> list[tuple[int, bytes] | OSError]:
        """``call`` for each of ``requests`` from one thread, each on a connection of its own
        (up to ``_IDLE_MAX`` at once, then on those answered): all are sent before any answer
        is read, and the answers are read as they come (``selectors``). The server sees them
        arrive together, as from that many callers (a gpuaas worker batches the creates that
        arrive in one step of its event loop), while the hub pays no thread hand-off per call.
        Each result is ``call``'s answer or the ``OSError`` it would have raised; a kept
        connection found closed is retried once on a new one, as ``call`` does. Once a new
        connection cannot be opened, the calls that need one fail as it did, untried: a
        worker that drops connections costs the batch one connect timeout, not one each."""
        if len(requests) == 1:
            try:
                return [self.call(requests[0])]
            except OSError as exc:
                return [exc]
        results: list[tuple[int, bytes] | OSError | None] = [None] * len(requests)
        waiting = deque(range(len(requests)))
        retried: set[int] = set()
        active: dict[_Connection, tuple[int, bool]] = {}  # -> (request, whether reused)
        unreachable: OSError | None = None  # a new connection failed: the rest fail alike
        sel = selectors.DefaultSelector()

        def failed(i: int, conn: _Connection | None, reused: bool, exc: OSError) -> None:
            if conn is not None:
                conn.close()
            stale = isinstance(exc, (Stale, ConnectionResetError, BrokenPipeError))
            if reused and stale and i not in retried:
                retried.add(i)
                waiting.appendleft(i)
            else:
                results[i] = exc

        try:
            while waiting or active:
                while waiting and len(active) < _IDLE_MAX:
                    i = waiting.popleft()
                    conn, reused = (None, False) if i in retried else self._take()
                    if conn is None and unreachable is not None:
                        results[i] = unreachable  # not tried again: a connect may take seconds
                        continue
                    try:
                        if conn is None:
                            try:
                                conn = self._open()
                            except OSError as exc:
                                unreachable = exc
                                raise
                        conn.start(requests[i])
                    except OSError as exc:
                        failed(i, conn, reused, exc)
                        continue
                    active[conn] = (i, reused)
                    sel.register(conn.sock, selectors.EVENT_READ, conn)
                if not active:
                    continue
                ready = sel.select(self._read_s)
                if not ready:  # nothing answered for the read timeout: none will be waited for
                    for i in [*waiting, *(i for i, _ in active.values())]:
                        results[i] = TimeoutError("timed out")
                    for conn in active:
                        conn.close()
                    active.clear()
                    waiting.clear()
                    break
                for key, _ in ready:
                    conn = key.data
                    i, reused = active[conn]
                    try:
                        if not conn.feed():
                            continue
                    except OSError as exc:
                        sel.unregister(conn.sock)
                        del active[conn]
                        failed(i, conn, reused, exc)
                        continue
                    sel.unregister(conn.sock)
                    del active[conn]
                    status, data, keep = conn.answer()
                    results[i] = (status, data)
                    self._give_back(conn, keep)
        finally:
            for conn in active:  # an unexpected error: nothing half-read goes back to the pool
                conn.close()
            sel.close()
        return [r if r is not None else BadAnswer("no answer") for r in results]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


__all__ = ["BadAnswer", "Connections", "Stale"]
