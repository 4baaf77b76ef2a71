"""``api.write_workers.offload``: a call's result or exception where it is awaited, and as many
calls at once as are awaited (up to ``MAX_WORKERS``), as the group commit needs to batch them."""

from __future__ import annotations

import asyncio
import threading

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
    parties = 24
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
