"""A watch's stream from a worker, read as lines straight off its socket.

The hub watches two resources on every worker and reads some ten events per workload it
dispatches. Through httpx each event went through httpcore's and h11's pure-Python parse of the
chunked body, then a text decoder and a line splitter: a seventh of the hub's CPU at 1,000
workloads, more than decoding the events themselves. Here the request is one ``sendall`` on a
connection of its own (``connections``), the answer is parsed by ``httptools``' C parser (which
undoes the chunked encoding), and the body is split into lines as bytes. It owns the one
socket and its parse; what a line means is ``remote``'s.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import httptools

_RECV = 65536


class _Parse:
    """httptools' callbacks: the headers' end, the body's pieces, the answer's end."""

    __slots__ = ("body", "done", "headers")

    def __init__(self) -> None:
        self.headers = self.done = False
        self.body: list[bytes] = []

    def on_headers_complete(self) -> None:
        self.headers = True

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.done = True


class Stream:
    """An answer being read: its status once its headers are in, then its body's lines.

    Errors are ``OSError``: ``TimeoutError`` when the socket stays silent for its read timeout,
    ``ConnectionError`` when the server closes it before its headers, ``BadStream`` when its
    bytes are not HTTP."""

    def __init__(self, sock: socket.socket, request: bytes) -> None:
        self._sock = sock
        self._parse = _Parse()
        self._parser = httptools.HttpResponseParser(self._parse)
        try:
            sock.sendall(request)
            while not self._parse.headers:
                if not self._feed():
                    raise ConnectionError("the server closed the connection")
        except BaseException:
            self.close()
            raise
        self.status: int = self._parser.get_status_code()

    def _feed(self) -> bool:
        """Read what came; False when the server closed the connection."""
        data = self._sock.recv(_RECV)
        if not data:
            return False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise BadStream(f"bad answer: {exc}") from None
        return True

    def body(self) -> bytes:
        """The whole body (an error's answer, which ends)."""
        while not self._parse.done and self._feed():
            pass
        out = b"".join(self._parse.body)
        self._parse.body.clear()
        return out

    def lines(self) -> Iterator[bytes]:
        """The body's non-empty lines as they come, until the answer ends or the server
        closes the connection."""
        rest = b""
        parse = self._parse
        while True:
            if parse.body:
                rest += b"".join(parse.body)
                parse.body.clear()
                *complete, rest = rest.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield line
            if parse.done or not self._feed():
                break
        if rest.strip():
            yield rest

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class BadStream(OSError):
    """The server's bytes are not an HTTP answer."""


__all__ = ["BadStream", "Stream"]
