"""A watch stream's queue is bounded: a client that reads too slowly has its stream ended (it
watches again from the last resourceVersion it saw, as Kubernetes clients do) instead of making
the server hold an ever longer backlog for it."""

from __future__ import annotations

import asyncio

from gpuaas.api.watch import MAX_QUEUED, StreamQueue
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
