"""Group commit: many callers' write batches share one transaction and one fsync.

Callers ``submit`` a finished list of writes and get an ``Ack``; one writer thread drains
everything queued, commits it as one transaction, then resolves every future of that batch (and
runs the ``on_commit`` hook, which publishes watch events) in submission order. A caller is
therefore acknowledged only after its writes are durable, and throughput is not capped at one
fsync per request. If a commit fails, that batch and everything queued behind it fails too, since
later writes were decided on top of the lost ones; the engine then reloads from the store.
Work that must follow a commit (the engine compacts the records just stored) runs in the
``stored`` hook, before the batch's callers are answered.

A batch lingers (waits up to ``linger`` for more writes) while it wants company: while it holds
no write somebody waits for (``submit(..., waiting=False)``: the statuses the scheduler thread
decided, a tick's), or while ``siblings`` (the server's count of write calls its workers are
running) says more writers are at work than the batch holds waited writes, so one of them is
about to submit. A
lone client's write is committed at once; concurrent writes share one transaction and one fsync.
On a MultiKueue worker the copies' creates, admissions and deletes were committed apart: 2,400
commits per 1,000 workloads, each a wake-up of this thread, an fsync and a watch hand-off.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuaas.store.base import Store, StoreError
from gpuaas.store.records import Write


class Ack:
    """The answer to one submitted batch, given once by the writer thread: what the engine used
    of ``concurrent.futures.Future`` (``result``, ``exception``, ``done``) on one plain lock.

    A Future built a Condition (an RLock and a deque of waiters) for every write and woke its
    waiter through Python code, on the commit thread; the server makes one per request."""

    __slots__ = ("_error", "_finished", "_given")

    def __init__(self) -> None:
        self._error: BaseException | None = None
        self._finished = False
        self._given = threading.Lock()
        self._given.acquire()  # released once the answer is given

    def set_result(self, result: None = None) -> None:
        self._finished = True
        self._given.release()

    def set_exception(self, exc: BaseException) -> None:
        self._error = exc
        self._finished = True
        self._given.release()

    def done(self) -> bool:
        return self._finished

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the answer (raises ``TimeoutError`` after ``timeout`` seconds): the error of
        a failed commit, or None."""
        if not self._given.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            raise TimeoutError("the store did not answer in time")
        self._given.release()  # any other waiter gets the answer too
        return self._error

    def result(self, timeout: float | None = None) -> None:
        """Wait until the writes are stored; raises what failed the commit."""
        error = self.exception(timeout)
        if error is not None:
            raise error


@dataclass(slots=True)
class _Item:
    writes: Sequence[Write]
    future: Ack
    after: Callable[[], None] | None
    waiting: bool  # somebody waits for these writes: their batch does not linger


_STOP = object()
LINGER_S = 0.002  # how long writes nobody waits for wait for company (see the module docstring)

log = logging.getLogger(__name__)


class GroupCommitter:
    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 5000,
        stored: Callable[[Sequence[Write]], None] | None = None,
        linger: float = LINGER_S,
    ) -> None:
        self.store = store
        self.max_batch = max_batch
        self.linger = linger
        # How many writers are at work (write calls being run), or None: not known.
        self.siblings: Callable[[], int] | None = None
        # Runs on the writer thread with each batch's writes once they are stored, before its
        # callers are answered: answered first, they would wait for the GIL behind it.
        self._stored = stored
        self._queue: queue.SimpleQueue[_Item | object] = queue.SimpleQueue()
        self._failed = threading.Event()
        self.batches = 0  # commits made: tests use it to see that batching happened
        self.items = 0
        self._thread = threading.Thread(target=self._run, name="gpuaas-group-commit", daemon=True)
        self._thread.start()

    def submit(
        self,
        writes: Sequence[Write],
        after: Callable[[], None] | None = None,
        *,
        waiting: bool = True,
    ) -> Ack:
        """Queue ``writes``; ``after`` runs on the writer thread once they are committed.
        ``waiting=False``: nobody waits for them, so they may linger for company."""
        fut = Ack()
        if not self._thread.is_alive():
            fut.set_exception(StoreError("the store's writer has stopped"))
            return fut
        self._queue.put(_Item(writes, fut, after, waiting))
        return fut

    @property
    def failed(self) -> bool:
        """True once a commit failed; cleared by ``reset`` after the engine has reloaded."""
        return self._failed.is_set()

    def reset(self) -> None:
        self._failed.clear()

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if not isinstance(first, _Item):  # _STOP
                return
            batch = [first]
            stop = self._drain(batch)
            if not stop and self.linger > 0:
                stop = self._linger(batch)
            self._commit(batch)
            if stop:
                return

    def _drain(self, batch: list[_Item]) -> bool:
        """Add what is queued now to ``batch``; True if ``close`` was asked for."""
        while len(batch) < self.max_batch:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                return False
            if not isinstance(nxt, _Item):
                return True
            batch.append(nxt)
        return False

    def _linger(self, batch: list[_Item]) -> bool:
        """Wait up to ``linger`` for more writes while ``batch`` wants company (see the module
        docstring); True if ``close`` was asked for."""
        deadline = time.monotonic() + self.linger
        while len(batch) < self.max_batch and self._wants_company(batch):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                nxt = self._queue.get(timeout=left)
            except queue.Empty:
                return False
            if not isinstance(nxt, _Item):
                return True
            batch.append(nxt)
            if self._drain(batch):
                return True
        return False

    def _wants_company(self, batch: list[_Item]) -> bool:
        waited = sum(1 for item in batch if item.waiting)
        return waited == 0 or (self.siblings is not None and self.siblings() > waited)

    def _commit(self, batch: list[_Item]) -> None:
        if self._failed.is_set():
            err = StoreError("an earlier commit failed; the server is reloading from the store")
            for item in batch:
                item.future.set_exception(err)
            return
        writes: list[Write] = [w for item in batch for w in item.writes]
        try:
            if writes:
                self.store.commit(writes)
        except Exception as exc:
            self._failed.set()
            err = exc if isinstance(exc, StoreError) else StoreError(str(exc))
            for item in batch:
                item.future.set_exception(err)
            return
        self.batches += 1
        self.items += len(batch)
        if self._stored is not None:
            try:
                self._stored(writes)
            except Exception:  # what is stored stays so, and is answered
                log.exception("after a commit of %d writes", len(writes))
        for item in batch:
            if item.after is not None:
                # a failing watcher hook must not lose other acknowledgements
                with contextlib.suppress(Exception):
                    item.after()
            item.future.set_result(None)
