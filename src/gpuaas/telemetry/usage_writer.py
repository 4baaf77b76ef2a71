"""Usage intervals written behind: off the engine's lock, many per transaction.

The telemetry bridge opens an interval at every reservation and closes it at every release, under
the engine lock. Writing each one through (one SQLite fsync or one PostgreSQL round trip apiece)
made every admission wait on the disk while every other request waited on the lock.
``WriteBehindUsageStore`` wraps any ``UsageStore``: ``put`` queues the interval and returns; a
thread writes what queued up with one ``put_many`` (one transaction), in order. Reads flush first,
so a usage report always includes every interval put before it was asked for.

Once a put wakes it, the thread lets further puts gather for ``GATHER_S`` before it writes, unless
a read (or ``close``) is waiting for them: a MultiKueue worker opens and closes an interval for
every copy the hub sends it, and writing each as it came took one SQLite transaction and fsync,
and a wake-up of this thread, per interval (a tenth of the worker's CPU in
``bench/multicluster.py``, 12,000 context switches of this thread per 1,000 workloads).

What a crash can lose is the last ``GATHER_S`` of puts. The ledger is rebuilt from the
engine at start: an open interval is opened again under the same key (the workload and its
reservation time), and one whose close was lost is closed at the restart, as a restart closes the
interval of a workload that stopped holding quota while the server was down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from gpuaas.telemetry.accounting import UsageInterval
from gpuaas.telemetry.usage_store import UsageStore

log = logging.getLogger(__name__)

GATHER_S = 0.05  # how long puts gather into one transaction when no read waits for them


class WriteBehindUsageStore:
    def __init__(self, inner: UsageStore, gather: float = GATHER_S) -> None:
        self.inner = inner
        self.gather = gather
        self._cond = threading.Condition()
        self._flushing = 0  # flushes waiting: the thread writes at once, without gathering
        self._queue: list[UsageInterval] = []
        self._queued = 0  # puts accepted so far
        self._written = 0  # puts written (or given up on) so far
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="gpuaas-usage-writer", daemon=True)
        self._thread.start()

    def put(self, interval: UsageInterval) -> None:
        with self._cond:
            if self._closed:
                self.inner.put(interval)
                return
            if not self._queue:  # the thread waits for a first put (later ones wait for it)
                self._cond.notify_all()
            self._queue.append(interval)
            self._queued += 1

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        for interval in intervals:
            self.put(interval)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every interval put before this call is written."""
        with self._cond:
            target = self._queued
            self._flushing += 1
            self._cond.notify_all()  # ends the thread's gathering
            try:
                self._cond.wait_for(lambda: self._written >= target or self._closed, timeout)
            finally:
                self._flushing -= 1

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        self.flush()
        return self.inner.intervals(since, until)

    def open_intervals(self) -> list[UsageInterval]:
        self.flush()
        return self.inner.open_intervals()

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._closed)
                if self.gather > 0:  # more puts join this write, unless a flush waits for them
                    self._cond.wait_for(lambda: self._flushing > 0 or self._closed, self.gather)
                if not self._queue and self._closed:
                    return
                batch, self._queue = self._queue, []
            try:
                self.inner.put_many(batch)
            except Exception:  # a failing store must not stop the ledger; say so and go on
                log.exception("usage store: %d interval(s) not written", len(batch))
            with self._cond:
                self._written += len(batch)
                self._cond.notify_all()
