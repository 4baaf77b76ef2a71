"""``api.http_writes``: what one event-loop step writes leaves as one write, in order.

The whole API suite runs over it (``server.run`` serves with ``HttpProtocol``); here the
transport's own promises: one write per step, nothing held past the step, close and write_eof
send what is kept first, abort drops it, and everything else is the real transport's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gpuaas.api.http_writes import StepTransport


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.events: list[str] = []

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.events.append("close")
        self.closed = True

    def write_eof(self) -> None:
        self.events.append("eof")

    def abort(self) -> None:
        self.events.append("abort")
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return f"info {name}"


def _run(steps: Any) -> FakeTransport:
    async def main() -> FakeTransport:
        fake = FakeTransport()
        await steps(StepTransport(fake, asyncio.get_running_loop()), fake)  # type: ignore[arg-type]
        return fake

    return asyncio.run(main())


def test_one_step_writes_once_in_order_and_holds_nothing_past_it() -> None:
    async def steps(t: StepTransport, fake: FakeTransport) -> None:
        t.write(b"HTTP/1.1 201 Created\r\n\r\n")
        t.write(b"")
        t.write(b'{"a":1}')
        assert fake.writes == [] and t.get_write_buffer_size() == 7 + 31
        await asyncio.sleep(0)  # the step ends
        assert fake.writes == [b'HTTP/1.1 201 Created\r\n\r\n{"a":1}']
        t.writelines([b"chunk 1", b"chunk 2"])
        await asyncio.sleep(0)
        t.write(b"chunk 3")
        await asyncio.sleep(0)

    assert _run(steps).writes[1:] == [b"chunk 1chunk 2", b"chunk 3"]


def test_close_and_eof_send_what_is_kept_first_abort_drops_it() -> None:
    async def closing(t: StepTransport, fake: FakeTransport) -> None:
        t.write(b"last")
        t.write_eof()
        t.write(b"after eof")
        t.close()
        await asyncio.sleep(0)

    fake = _run(closing)
    assert fake.writes == [b"last", b"after eof"] and fake.events == ["eof", "close"]

    async def aborting(t: StepTransport, fake: FakeTransport) -> None:
        t.write(b"dropped")
        t.abort()
        await asyncio.sleep(0)

    fake = _run(aborting)
    assert fake.writes == [] and fake.events == ["abort"]


def test_a_transport_closed_within_the_step_gets_no_write() -> None:
    async def steps(t: StepTransport, fake: FakeTransport) -> None:
        t.write(b"to a peer that left")
        fake.closed = True  # the connection was lost before the step ended
        await asyncio.sleep(0)

    assert _run(steps).writes == []


def test_everything_else_is_the_transports_own() -> None:
    async def steps(t: StepTransport, fake: FakeTransport) -> None:
        assert t.get_extra_info("peername") == "info peername"
        assert t.is_closing() is False

    _run(steps)
