"""The engine's lock, which settles what arrived before anyone reads or changes the cluster.

A Workload create is acknowledged once it is stored; its admission is decided later, in arrival
order, by whoever takes the engine lock next: the engine's scheduler thread, a read, a tick or
another write. ``SettlingLock`` is a re-entrant lock whose outermost ``with`` first runs the
engine's ``catch_up`` when arrivals are pending, so every path that reads or changes the core sees
it exactly as if each create had been scheduled at its own instant (the decisions do not change;
only when they are made). ``quick()`` takes the lock without settling: the create path holds it
only to check the request against what is stored, reserve a resourceVersion and queue the writes.

This module holds no scheduling logic: ``catch_up`` and ``pending`` are the engine's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType


class SettlingLock:
    def __init__(self, catch_up: Callable[[], None], pending: Callable[[], bool]) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # only the owner changes it, while holding the lock
        self._catch_up = catch_up
        self._pending = pending

    def __enter__(self) -> SettlingLock:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1 and self._pending():
            try:
                self._catch_up()
            except BaseException:
                self._depth -= 1
                self._lock.release()
                raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        self._lock.release()

    @contextmanager
    def quick(self) -> Iterator[None]:
        """Hold the lock without settling first (the create path's queueing step)."""
        self._lock.acquire()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self._lock.release()
