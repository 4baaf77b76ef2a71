"""Group commit: many callers' write batches share one transaction and one fsync.

Callers ``submit`` a finished list of writes and get a ``Future``; one writer thread drains
everything queued, commits it as one transaction, then resolves every future of that batch (and
runs the ``on_commit`` hook, which publishes watch events) in submission order. A caller is
therefore acknowledged only after its writes are durable, and throughput is not capped at one
fsync per request. If a commit fails, that batch and everything queued behind it fails too, since
later writes were decided on top of the lost ones; the engine then reloads from the store.
Work that must follow a commit but need not delay its answers (the engine compacts the records
just stored) runs in the ``acknowledged`` hook, after every future of the batch is resolved.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from gpuaas.store.base import Store, StoreError
from gpuaas.store.records import Write


@dataclass(slots=True)
class _Item:
    writes: Sequence[Write]
    future: Future[None]
    after: Callable[[], None] | None


_STOP = object()

log = logging.getLogger(__name__)


class GroupCommitter:
    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 5000,
        acknowledged: Callable[[Sequence[Write]], None] | None = None,
    ) -> None:
        self.store = store
        self.max_batch = max_batch
        # Runs on the writer thread with each stored batch's writes once all its callers are
        # answered (after their ``after`` hooks).
        self._acknowledged = acknowledged
        self._queue: queue.SimpleQueue[_Item | object] = queue.SimpleQueue()
        self._failed = threading.Event()
        self.batches = 0  # commits made: tests use it to see that batching happened
        self.items = 0
        self._thread = threading.Thread(target=self._run, name="gpuaas-group-commit", daemon=True)
        self._thread.start()

    def submit(
        self, writes: Sequence[Write], after: Callable[[], None] | None = None
    ) -> Future[None]:
        """Queue ``writes``; ``after`` runs on the writer thread once they are committed."""
        fut: Future[None] = Future()
        if not self._thread.is_alive():
            fut.set_exception(StoreError("the store's writer has stopped"))
            return fut
        self._queue.put(_Item(writes, fut, after))
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
            if first is _STOP:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._commit([b for b in batch if isinstance(b, _Item)])
            if stop:
                return

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
        for item in batch:
            if item.after is not None:
                # a failing watcher hook must not lose other acknowledgements
                with contextlib.suppress(Exception):
                    item.after()
            item.future.set_result(None)
        if self._acknowledged is not None:
            try:
                self._acknowledged(writes)
            except Exception:  # what is stored and answered stays so
                log.exception("after a commit of %d writes", len(writes))
