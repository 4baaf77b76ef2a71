"""``api.stream_writes``: a stream's body leaves through the writer thread, not the event loop.

A real uvicorn server (uvloop, ``http_writes.HttpProtocol``) runs in a thread here, serving one
``StreamResponse`` whose chunks the test chooses; its transport counts what the event loop wrote.
Checked: every byte arrives in order with HTTP/1.1 chunked framing (httpx parses it), while the
event loop writes only the headers and the last chunk; a client that stops reading holds the
stream back (its iterator is not drained into memory); a client that goes away ends the stream;
and the cases the thread must not take (TLS, a body that is not chunked, bytes still queued on
the transport) fall back to uvicorn's writes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn

from gpuaas.api import stream_writes
from gpuaas.api.http_writes import CYCLE, HttpProtocol
from gpuaas.api.stream_writes import HIGH, NICE, DirectBody, StreamResponse
from gpuaas.api.testing import ThreadedUvicorn, self_signed_cert, serve_in_thread

MB = 1 << 20


class CountingTransport:
    """A transport that counts the bytes the event loop wrote through it."""

    written = 0

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: Any) -> None:
        CountingTransport.written += len(data)
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CountingProtocol(HttpProtocol):
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(CountingTransport(transport))  # type: ignore[arg-type]


def _part(i: int, size: int) -> bytes:
    return (b"%08d" % i) * (size // 8)


class App:
    """One stream: ``chunks`` (lists of parts) and then, while ``endless``, more forever."""

    def __init__(self) -> None:
        self.chunks: list[list[bytes]] = []
        self.endless = False
        self.pulled = 0  # bytes the response took from the iterator
        self.ended = threading.Event()
        self.response: StreamResponse | None = None

    async def body(self) -> AsyncIterator[list[bytes]]:
        try:
            for chunk in self.chunks:
                self.pulled += sum(map(len, chunk))
                yield chunk
            i = 0
            while self.endless:
                i += 1
                self.pulled += 256 << 10
                yield [_part(i, 256 << 10)]
        finally:
            self.ended.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.response = StreamResponse(self.body(), media_type="application/octet-stream")
        await self.response(scope, receive, send)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadedUvicorn] = []

    def start(app: App, tls: tuple[Path, Path] | None = None) -> str:
        web = serve_in_thread(
            lambda port: uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                loop="uvloop",
                http=CountingProtocol,
                log_level="warning",
                timeout_graceful_shutdown=1,
                ssl_certfile=str(tls[0]) if tls else None,
                ssl_keyfile=str(tls[1]) if tls else None,
            )
        )
        servers.append(web)
        return f"{'https' if tls else 'http'}://127.0.0.1:{web.port}"

    try:
        yield start
    finally:
        for web in servers:
            web.stop()


@pytest.mark.parametrize(
    "sizes",
    [
        [[5]],  # one tiny chunk
        [[1000, 2000, 3], [7]],  # parts of one chunk, sent as they are
        [[3 * MB], [64 << 10] * 20, [1]],  # larger than the socket takes at once
    ],
    ids=["tiny", "parts", "megabytes"],
)
def test_every_byte_in_order_and_the_loop_writes_only_headers_and_end(
    serve: Any, sizes: list[list[int]]
) -> None:
    app = App()
    app.chunks = [[_part(10 * i + j, n) for j, n in enumerate(c)] for i, c in enumerate(sizes)]
    url = serve(app)
    CountingTransport.written = 0
    with httpx.Client(timeout=30) as client:
        r = client.get(url)
    assert r.status_code == 200 and r.headers["transfer-encoding"] == "chunked"
    assert r.content == b"".join(b"".join(c) for c in app.chunks)
    assert app.response is not None and app.response.direct
    # the headers and "0\r\n\r\n": none of the body went through the event loop's transport
    assert CountingTransport.written < 400


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
def test_tls_is_written_by_uvicorn_as_before(serve: Any, tmp_path: Path) -> None:
    app = App()
    app.chunks = [[_part(1, 3 * MB)], [b"end"]]
    cert, key = self_signed_cert(tmp_path, "stream")
    url = serve(app, (cert, key))
    with httpx.Client(timeout=30, verify=False) as client:
        r = client.get(url)
    assert r.content == _part(1, 3 * MB) + b"end"
    assert app.response is not None and not app.response.direct


def test_a_client_that_stops_reading_holds_the_stream_back(serve: Any) -> None:
    app = App()
    app.endless = True
    url = serve(app).removeprefix("http://")
    host, port = url.split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        last = -1
        while last != app.pulled:  # until the stream stops pulling: it waits for the client
            last = app.pulled
            time.sleep(0.5)
        # the unsent bound, the kernel's buffers (a few MB on loopback) and one chunk: not the
        # hundreds of MB an unbounded stream would have taken from its iterator by now
        assert app.pulled <= HIGH + 16 * MB
        sock.setblocking(True)
        got = sock.recv(1 << 20)
        while app.pulled == last:  # reading again lets it go on (an endless stream: never EOF)
            got += sock.recv(1 << 20)
        body = got.split(b"\r\n\r\n", 1)[1]
        size, _, rest = body.partition(b"\r\n")
        assert rest[: int(size, 16)] == _part(1, 256 << 10)
        assert app.response is not None and app.response.direct


def test_a_client_that_goes_away_ends_the_stream(serve: Any) -> None:
    app = App()
    app.endless = True
    url = serve(app)
    with httpx.Client(timeout=30) as client, client.stream("GET", url) as r:
        first = next(r.iter_raw())
        assert first.startswith(b"00000001")
    assert app.ended.wait(30), "the stream went on after its client left"


class FakeCycle(SimpleNamespace):
    """uvicorn's RequestResponseCycle as ``DirectBody.open`` reads it (weakly referenced)."""


def _cycle(**over: Any) -> Any:
    a, b = socket.socketpair()
    info = {"socket": a, "sslcontext": None, "ssl_object": None}
    info.update(over.get("info", {}))
    buffered = over.get("buffered", 0)
    transport = SimpleNamespace(
        get_extra_info=lambda name, default=None: info.get(name, default),
        is_closing=lambda: False,
        get_write_buffer_size=lambda: buffered,
    )
    cycle = FakeCycle(
        chunked_encoding=over.get("chunked", True),
        disconnected=False,
        transport=transport,
        flow=SimpleNamespace(write_paused=False),
    )
    return cycle, (a, b)


@pytest.mark.parametrize(
    ("over", "direct"),
    [
        ({}, True),
        ({"info": {"sslcontext": object()}}, False),  # TLS: the bytes must be encrypted
        ({"chunked": False}, False),  # Content-Length or HEAD: uvicorn's own
        ({"buffered": 10}, False),  # bytes still queued: writing past them would reorder
    ],
    ids=["plain", "tls", "not-chunked", "buffered"],
)
def test_only_a_plain_chunked_idle_connection_is_taken(over: dict[str, Any], direct: bool) -> None:
    cycle, socks = _cycle(**over)

    async def main() -> DirectBody | None:
        body = DirectBody.open({"extensions": {CYCLE: weakref.ref(cycle)}})
        if body is not None:
            await body.write([b"hello", b" ", b"world"])
            await body.finish()
        return body

    try:
        body = asyncio.run(main())
        assert (body is not None) == direct
        if direct:
            socks[1].settimeout(10)
            assert socks[1].recv(100) == b"b\r\nhello world\r\n"
        assert DirectBody.open({}) is None  # not uvicorn's httptools protocol
    finally:
        for s in socks:
            s.close()


def test_the_writer_thread_yields_the_cores_to_requests() -> None:
    writer = stream_writes._writer()
    assert writer is stream_writes._writer()
    tid = next(t.native_id for t in threading.enumerate() if t.name == "gpuaas-stream-writes")
    assert tid is not None
    assert os.getpriority(os.PRIO_PROCESS, tid) == min(
        19, os.getpriority(os.PRIO_PROCESS, 0) + NICE
    )
