"""The threads that make the engine's blocking write calls for the event loop (``offload``).

A create or delete on the fast paths (``api.fast_paths``) calls the engine, which returns once
the write is durable: it waits for its group commit, so it runs on a thread of its own, and
as many calls as there are threads (``MAX_WORKERS``) share one commit (a call of
``offload_many`` carries every create, or every delete, of one kind in a loop step).
asyncio's ``run_in_executor`` wraps each call in a ``concurrent.futures`` future chained to an
asyncio one (locks, a condition, callbacks both ways) and ``ThreadPoolExecutor.submit`` checks
an idle semaphore written in Python: together a few percent of the server's GIL time per create
in ``bench/api.py``'s profile. Here a call is one tuple on a queue, and its result one
``call_soon_threadsafe`` that sets the awaited future, with the same outcome: ``fn``'s result
or its exception, raised where it is awaited.

``offload_many`` goes further for calls that come in numbers (creates, deletes): the items offloaded
under one key during one step of the event loop become one call of a function that takes them
all (``Engine.create_many``), made on one worker, whose answers come back in one
``call_soon_threadsafe``. A profile of ``bench/api.py`` at 32 clients put a third of the
server's GIL time in the hand-offs between the loop and one thread per create (waking a worker,
its wait for the commit, its wake-up, its call back to the loop).

``in_flight`` counts the calls a worker is running (handed over, taken, not yet returned): the
group commit lingers for the writes of the others while more are running than its batch holds
writes somebody waits for (``store.groupcommit``); a lone client's write never waits for company
that cannot come, and neither does a batch whose workers are all waiting for it while more
calls wait for a free worker (those cannot submit before this commit frees one: counting them
made such a batch linger its whole 2 ms).

Eight workers, not 64: creates come batched per loop step (``offload_many``), so a few calls
carry a commit's worth of writes, and every worker more is a thread that wakes, takes the GIL
and waits on the commit. With each server's threads on one CPU (``gpuaas server --cpus``),
``bench/multicluster.py`` ran 143-147 workloads/s with 8 (and 4 or 16) against 135-136 with 64;
``bench/api.py``'s 32 clients made 2,053-2,085 creates/s with 8 against 2,059-2,107 with 64.

Nothing here knows what the calls do; a cancelled await does not stop a call already begun
(as with ``run_in_executor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Hashable, Sequence
from queue import SimpleQueue
from typing import Any, TypeVar

MAX_WORKERS = 8
_T = TypeVar("_T")
Many = Callable[[list[Any]], Sequence[Any]]  # items -> one answer each (an exception: raised)
# per loop, the calls of ``offload_many`` made in its current step: key -> (fn, items, futures)
_Step = dict[Hashable, tuple[Many, list[Any], "list[asyncio.Future[Any]]"]]

_calls: SimpleQueue[Callable[[], None]] = SimpleQueue()
_lock = threading.Lock()
_idle = 0  # workers waiting for a call that no queued call has claimed yet (under _lock)
_started = 0
_in_flight = 0  # calls queued or running (under _lock)
_steps: dict[asyncio.AbstractEventLoop, _Step] = {}  # only the loop's own thread touches its entry


async def offload(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a write worker thread, awaited without blocking the event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    _calls.put(functools.partial(_run, fn, args, loop, future))
    _ensure_worker()
    return await future


async def offload_many(fn: Many, key: Hashable, item: Any) -> Any:
    """``item``'s answer from ``fn(items)``, called on a write worker with every item offloaded
    under ``key`` (with the same ``fn``) in this step of the event loop, in the order offloaded.
    ``fn`` returns one answer per item; an answer that is an exception is raised here."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    step = _steps.get(loop)
    if step is None:
        step = _steps[loop] = {}
        loop.call_soon(_flush, loop)  # after every callback already due in this step
    group = step.get(key)
    if group is None:
        group = step[key] = (fn, [], [])
    group[1].append(item)
    group[2].append(future)
    return await future


def _flush(loop: asyncio.AbstractEventLoop) -> None:
    for fn, items, futures in _steps.pop(loop, {}).values():
        _calls.put(functools.partial(_run_many, fn, items, loop, futures))
        _ensure_worker()


def in_flight() -> int:
    """How many calls workers are running now: those queued or running, but no more than there
    are workers (a call counts until its worker is free again, a moment after its answer was
    handed back)."""
    return min(_in_flight, _started)


def _ensure_worker() -> None:
    """Count a call just queued; start a worker when none is idle, up to ``MAX_WORKERS`` (then
    a call waits its turn)."""
    global _idle, _started, _in_flight
    with _lock:
        _in_flight += 1
        if _idle > 0:  # that worker takes this call (as ThreadPoolExecutor's idle semaphore)
            _idle -= 1
            return
        if _started >= MAX_WORKERS:
            return
        _started += 1
        name = f"gpuaas-write_{_started}"
    threading.Thread(target=_work, name=name, daemon=True).start()


def _work() -> None:
    global _idle, _in_flight
    while True:
        _calls.get()()  # its locals go with it: nothing is held while idle
        with _lock:
            _idle += 1
            _in_flight -= 1


def _run(
    fn: Callable[..., Any], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop, future: Any
) -> None:
    try:
        result = fn(*args)
    except BaseException as exc:  # raised where the call is awaited
        _settle(loop, future, None, exc)
    else:
        _settle(loop, future, result, None)


def _run_many(
    fn: Many, items: list[Any], loop: asyncio.AbstractEventLoop, futures: list[Any]
) -> None:
    try:
        answers: Sequence[Any] = fn(items)
        if len(answers) != len(items):
            raise RuntimeError(f"{len(answers)} answers to {len(items)} items")
    except BaseException as exc:  # every item's answer
        answers = [exc] * len(items)
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits the calls
        loop.call_soon_threadsafe(_set_all, futures, answers)


def _set_all(futures: list[asyncio.Future[Any]], answers: Sequence[Any]) -> None:
    for future, answer in zip(futures, answers, strict=True):
        if isinstance(answer, BaseException):
            _set(future, None, answer)
        else:
            _set(future, answer, None)


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
