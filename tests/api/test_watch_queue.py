"""A watch stream's queue is bounded: a client that reads too slowly has its stream ended (it
watches again from the last resourceVersion it saw, as Kubernetes clients do) instead of making
the server hold an ever longer backlog for it."""

from __future__ import annotations

import asyncio

from gpuaas.api.watch import MAX_QUEUED, SLICE, Joined, StreamQueue, paced
from gpuaas.store import Change, ObjectKey


def lines(start: int, n: int) -> list[tuple[Change, bytes]]:
    key = ObjectKey("kueue.x-k8s.io/Workload", "t", "w")
    return [(Change(rv, "MODIFIED", key, {}), b"x\n") for rv in range(start, start + n)]


def test_a_stream_within_its_bound_keeps_every_line_in_order() -> None:
    async def run() -> None:
        q = StreamQueue()
        q.receive(lines(1, MAX_QUEUED // 2))
        q.receive(lines(1 + MAX_QUEUED // 2, MAX_QUEUED // 2))
        assert not q.dropped
        assert q.ready.is_set()
        assert [rv for rv, _ in q.take()] == list(range(1, 1 + 2 * (MAX_QUEUED // 2)))
        assert q.size == 0 and not list(q.take())

    asyncio.run(run())


def test_a_stream_past_its_bound_is_dropped_and_keeps_nothing() -> None:
    async def run() -> None:
        q = StreamQueue()
        q.receive(lines(1, MAX_QUEUED))
        q.receive(lines(MAX_QUEUED + 1, 1))
        assert q.dropped
        assert q.size == 0
        q.receive(lines(MAX_QUEUED + 2, 5))  # nothing more is kept for it
        assert not list(q.take())

    asyncio.run(run())


def test_take_after_skips_what_was_sent_and_shares_a_whole_hand_off() -> None:
    async def run() -> None:
        a, b = StreamQueue(), StreamQueue()
        first, second = lines(1, 3), lines(4, 2)
        shared = Joined(second)
        for q in (a, b):
            q.receive(first)
            q.receive(shared)
        parts, last = a.take_after(2)  # rv 1 and 2 went out with the snapshot
        assert (b"".join(parts), last) == (b"x\n" * 3, 5)
        assert a.size == 0 and a.take_after(last) == ([], 5)
        b.take()  # b's first hand-off read: its second alone is the shared bytes themselves
        b.receive(shared)
        parts_b, last_b = b.take_after(3)
        assert len(parts_b) == 1 and parts_b[0] is shared.data() and last_b == 5
        b.receive(second)
        assert b.take_after(5) == ([], 5)  # nothing after what was sent: nothing again

    asyncio.run(run())


def test_a_large_send_goes_out_in_slices() -> None:
    """The slices are the data, in order, each at most ``SLICE`` bytes, so the server's flow
    control can hold a stream back between them; a small send stays one piece."""

    async def run() -> None:
        data = bytes(range(256)) * (3 * SLICE // 256 + 7)
        pieces = [bytes(p) async for p in paced(data)]
        assert b"".join(pieces) == data
        assert [len(p) for p in pieces] == [SLICE, SLICE, SLICE, len(data) - 3 * SLICE]
        assert [p async for p in paced(b"small")] == [b"small"]

    asyncio.run(run())
