"""Kept-alive HTTP/1.1 connections from the manager to one worker, for request/response calls.

The hub makes six writes to workers per workload it dispatches, and ``http.client`` spent more
CPU on each than the worker's answer took to decode: it builds the request header by header and
parses every answer's headers with the ``email`` package. Here a call is one ``sendall`` of the
request, written out at once, and the answer is read by ``httptools``' C parser (uvicorn's own),
which also decodes a chunked body and says whether the server keeps the connection. Each
connection serves one call at a time; a call takes an idle one (or opens one) and gives it back
once the answer is read. It owns sockets only: what is asked, and what an answer means, is
``remote``'s.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
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

    __slots__ = ("_body", "_done", "_keep", "_parser", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._body: list[bytes] = []
        self._done = self._keep = False
        self._parser: httptools.HttpResponseParser | None = None

    def on_headers_complete(self) -> None:
        # Asked here: once the answer is complete the parser no longer says.
        self._keep = self._parser is not None and self._parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self._body.append(data)

    def on_message_complete(self) -> None:
        self._done = True

    def exchange(self, request: bytes) -> tuple[int, bytes, bool]:
        """Send ``request``, read the whole answer: (status, body, whether to keep it open)."""
        self._body, self._done, self._keep = [], False, False
        parser = self._parser = httptools.HttpResponseParser(self)
        self.sock.sendall(request)
        received = False
        while not self._done:
            data = self.sock.recv(_RECV)
            if not data:
                if received:
                    raise BadAnswer("the server closed the connection mid-answer")
                raise Stale("the server closed the connection")
            received = True
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise BadAnswer(f"bad answer: {exc}") from None
        return parser.get_status_code(), b"".join(self._body), self._keep

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
        unless the server closes it; a kept one found closed is retried once on a new one.
        A failure is an ``OSError`` (a timeout, a refused connection, a bad answer)."""
        for attempt in (0, 1):
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            reused = conn is not None
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
            with self._lock:
                if not keep or self._closed or len(self._idle) >= _IDLE_MAX:
                    conn.close()
                else:
                    self._idle.append(conn)
            return status, data
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


__all__ = ["BadAnswer", "Connections", "Stale"]
