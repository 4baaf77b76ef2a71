"""The threads that make the engine's blocking write calls for the event loop (``offload``).

A create or delete on the fast paths (``api.fast_paths``) calls the engine, which returns once
the write is durable: it waits for its group commit, so it runs on a thread of its own, and
there are as many threads (``MAX_WORKERS``) as requests one commit should be able to batch.
asyncio's ``run_in_executor`` wraps each call in a ``concurrent.futures`` future chained to an
asyncio one (locks, a condition, callbacks both ways) and ``ThreadPoolExecutor.submit`` checks
an idle semaphore written in Python: together a few percent of the server's GIL time per create
in ``bench/api.py``'s profile. Here a call is one tuple on a queue, and its result one
``call_soon_threadsafe`` that sets the awaited future, with the same outcome: ``fn``'s result
or its exception, raised where it is awaited.

Nothing here knows what the calls do; a cancelled await does not stop a call already begun
(as with ``run_in_executor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

MAX_WORKERS = 64
_T = TypeVar("_T")
Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]

_calls: SimpleQueue[Call] = SimpleQueue()
_lock = threading.Lock()
_idle = 0  # workers waiting for a call that no queued call has claimed yet (under _lock)
_started = 0


async def offload(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a write worker thread, awaited without blocking the event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    _calls.put((fn, args, loop, future))
    _ensure_worker()
    return await future


def _ensure_worker() -> None:
    """Start a worker when none is idle, up to ``MAX_WORKERS`` (then a call waits its turn)."""
    global _idle, _started
    with _lock:
        if _idle > 0:  # that worker takes this call (as ThreadPoolExecutor's idle semaphore)
            _idle -= 1
            return
        if _started >= MAX_WORKERS:
            return
        _started += 1
        name = f"gpuaas-write_{_started}"
    threading.Thread(target=_work, name=name, daemon=True).start()


def _work() -> None:
    global _idle
    while True:
        _run(*_calls.get())  # its locals go with it: nothing is held while idle
        with _lock:
            _idle += 1


def _run(
    fn: Callable[..., Any], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop, future: Any
) -> None:
    try:
        result = fn(*args)
    except BaseException as exc:  # raised where the call is awaited
        _settle(loop, future, None, exc)
    else:
        _settle(loop, future, result, None)


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits the call
        loop.call_soon_threadsafe(_set, future, result, exc)


def _set(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
