"""``api.write_workers.offload``: a call's result or exception where it is awaited, and as many
calls at once as are awaited (up to ``MAX_WORKERS``), as the group commit needs to batch them."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from gpuaas.api import write_workers


def test_a_call_returns_its_result_and_raises_its_exception_where_awaited() -> None:
    async def main() -> None:
        assert await write_workers.offload(lambda a, b: a + b, 2, 3) == 5
        assert await write_workers.offload(threading.current_thread) is not threading.main_thread()
        with pytest.raises(KeyError, match="gone"):
            await write_workers.offload(dict().__getitem__, "gone")

    asyncio.run(main())


def test_calls_awaited_together_run_together() -> None:
    # Each call blocks until all of them run (as writes wait for one group commit): calls run
    # one after another would never pass the barrier.
    parties = write_workers.MAX_WORKERS
    barrier = threading.Barrier(parties, timeout=20)

    async def main() -> list[int]:
        for _ in range(2):  # and again, once the first workers are idle
            got = await asyncio.gather(
                *(write_workers.offload(lambda i=i: barrier.wait() * 0 + i) for i in range(parties))
            )
        return got

    assert asyncio.run(main()) == list(range(parties))


def test_a_cancelled_await_leaves_the_workers_serving() -> None:
    release = threading.Event()

    async def main() -> int:
        task = asyncio.ensure_future(write_workers.offload(release.wait, 20))
        await asyncio.sleep(0.05)
        task.cancel()
        release.set()
        return await write_workers.offload(lambda: 7)

    assert asyncio.run(main()) == 7


def test_items_offloaded_in_one_step_make_one_call_in_order() -> None:
    calls: list[list[int]] = []

    def double(items: list[int]) -> list[int | Exception]:
        calls.append(list(items))
        return [ValueError(f"odd {i}") if i % 2 else i * 2 for i in items]

    async def one(key: str, i: int) -> int | str:
        try:
            answer: int = await write_workers.offload_many(double, key, i)
        except ValueError as exc:
            return str(exc)
        return answer

    async def main() -> list[int | str]:
        first = await asyncio.gather(*(one("k", i) for i in range(6)), one("other", 10))
        return [*first, await one("k", 4)]  # a later step: a call of its own

    assert asyncio.run(main()) == [0, "odd 1", 4, "odd 3", 8, "odd 5", 20, 8]
    assert calls == [[0, 1, 2, 3, 4, 5], [10], [4]]


def test_a_failed_call_is_every_item_s_answer() -> None:
    def broken(items: list[int]) -> list[int]:
        return items[:1]  # an answer short

    def raising(items: list[int]) -> list[int]:
        raise KeyError("down")

    async def main() -> None:
        got = await asyncio.gather(
            *(write_workers.offload_many(broken, "b", i) for i in range(3)),
            *(write_workers.offload_many(raising, "r", i) for i in range(2)),
            return_exceptions=True,
        )
        assert [type(g) for g in got] == [RuntimeError] * 3 + [KeyError] * 2

    asyncio.run(main())


def test_in_flight_counts_the_calls_handed_over_and_not_yet_returned() -> None:
    # What the group commit reads to know whether another writer is about to submit.
    parties = 3
    barrier = threading.Barrier(parties + 1, timeout=20)
    seen: list[int] = []

    def call() -> None:
        barrier.wait()  # every call is running: the test thread reads the count meanwhile
        barrier.wait()

    async def settled() -> int:  # a worker counts its call done a moment after its answer
        deadline = time.monotonic() + 30
        while write_workers.in_flight() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        return write_workers.in_flight()

    async def main() -> None:
        before = await settled()  # earlier tests' calls
        calls = asyncio.gather(*(write_workers.offload(call) for _ in range(parties)))

        def look() -> None:
            barrier.wait()
            seen.append(write_workers.in_flight() - before)
            barrier.wait()

        looker = threading.Thread(target=look)
        looker.start()
        await calls
        looker.join()
        seen.append(await settled() - before)

    asyncio.run(main())
    assert seen == [parties, 0]


def test_in_flight_leaves_out_calls_that_wait_for_a_free_worker() -> None:
    # A call queued behind MAX_WORKERS busy ones cannot submit a write before one of them
    # returns: a group commit that counted it would linger for company that cannot come.
    workers, extra = write_workers.MAX_WORKERS, 3
    running = threading.Semaphore(0)
    release = threading.Event()

    def call() -> None:
        running.release()
        release.wait(20)

    def look() -> int:
        for _ in range(workers):
            assert running.acquire(timeout=20), "fewer calls ran than there are workers"
        assert not running.acquire(timeout=0.1)  # the extra ones wait for a worker
        count = write_workers.in_flight()
        release.set()
        return count

    async def main() -> int:
        deadline = time.monotonic() + 30  # earlier tests' calls done
        while write_workers.in_flight() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        calls = asyncio.gather(*(write_workers.offload(call) for _ in range(workers + extra)))
        seen = await asyncio.to_thread(look)
        await calls
        return seen

    assert asyncio.run(main()) == workers
