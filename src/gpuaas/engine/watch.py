"""Fan-out of committed changes to watchers (``?watch=true``, dashboard streams).

The group committer calls ``publish`` after each commit, in commit order; ``publish`` only queues
the changes, so acknowledging writes never waits on watchers. A dispatcher thread of the hub's own
hands them on in the same order, so every watcher sees changes in resourceVersion order and only
once they are durable. While watchers are many it gathers what committed during a short interval
(``interval_for``) into one hand-off, so each watcher wakes a bounded number of times a second
whatever the write rate.

Two kinds of subscriber:

- ``subscribe(deliver, match)``: ``deliver(change)`` for every matching change (a dashboard's
  "something changed" flag).
- ``subscribe_encoded(match, encoding, deliver_lines, filter_key)``: the change as the wire shows
  it. Each change is encoded once per distinct ``Encoding.key`` (API version, format) for all the
  subscribers that share it, whatever their filters, and ``deliver_lines`` gets every matching
  change of a hand-off with its bytes in one call. Subscribers that also share a ``filter_key``
  (the same tenant's namespaces and selectors: the same ``match``) share one match per change
  and one list of lines, so a thousand identical watches cost one filter pass per change.

A subscriber's hooks must not block (the API hands them to its event loop, where each stream has
a bounded queue and a stream that falls behind ends); one that raises is dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from gpuaas.store import Change

log = logging.getLogger(__name__)

MAX_INTERVAL_S = 0.5  # the most a change waits for the watchers' next hand-off
# Every hand-off wakes every watcher's stream (a turn each on the API's event loop, and a send
# each by the API's stream writer), so the interval grows with the watchers: 10 -> 5 ms,
# 100 -> 50 ms, 1,000 -> 0.5 s; writers first.
PER_SUBSCRIBER_S = 0.0005


def interval_for(subscribers: int) -> float:
    """How long the dispatcher gathers changes before handing them on to ``subscribers``."""
    return min(MAX_INTERVAL_S, PER_SUBSCRIBER_S * subscribers)


@dataclass(frozen=True, slots=True)
class Encoding:
    """How a change reads on one kind of stream; equal ``key``s encode equally."""

    key: Hashable
    encode: Callable[[Change], bytes]


Lines = Sequence[tuple[Change, bytes]]


class Subscription:
    def __init__(
        self,
        hub: WatchHub,
        match: Callable[[Change], bool],
        deliver: Callable[[Change], None] | None = None,
        encoding: Encoding | None = None,
        deliver_lines: Callable[[Lines], None] | None = None,
        filter_key: Hashable | None = None,
    ) -> None:
        self._hub = hub
        self.match = match
        self.deliver = deliver
        self.encoding = encoding
        self.deliver_lines = deliver_lines
        self.filter_key = filter_key

    def close(self) -> None:
        self._hub.unsubscribe(self)


_STOP = object()


class WatchHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._queue: queue.SimpleQueue[list[Change] | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def subscribe(
        self, deliver: Callable[[Change], None], match: Callable[[Change], bool]
    ) -> Subscription:
        return self._add(Subscription(self, match, deliver=deliver))

    def subscribe_encoded(
        self,
        match: Callable[[Change], bool],
        encoding: Encoding,
        deliver_lines: Callable[[Lines], None],
        filter_key: Hashable | None = None,
    ) -> Subscription:
        """``filter_key``: equal for subscribers whose ``match`` is the same function of a change
        (None: this subscriber's own)."""
        sub = Subscription(
            self, match, encoding=encoding, deliver_lines=deliver_lines, filter_key=filter_key
        )
        return self._add(sub)

    def _add(self, sub: Subscription) -> Subscription:
        with self._lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def __len__(self) -> int:
        with self._lock:
            return len(self._subs)

    def publish(self, changes: Iterable[Change]) -> None:
        """Queue committed changes for the dispatcher (called in commit order)."""
        with self._lock:
            if not self._subs:
                return  # nobody listens: nothing to keep (a new watcher reads the store)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="gpuaas-watch-fanout", daemon=True
                )
                self._thread.start()
        self._queue.put(list(changes))

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout=10)

    def _run(self) -> None:
        last = 0.0
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            with self._lock:
                subs = list(self._subs)
            # Many watchers: wait out the interval since the last hand-off, gathering.
            wait = last + interval_for(len(subs)) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            changes: list[Change] = list(item) if isinstance(item, list) else []
            stop = False
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                if isinstance(more, list):
                    changes += more
            last = time.monotonic()
            try:
                self.dispatch(changes)
            except Exception:  # never let one hand-off stop the fan-out
                log.exception("watch fan-out failed")
            if stop:
                return

    def dispatch(self, changes: Sequence[Change]) -> None:
        """Hand ``changes`` to every subscriber now, each encoding built once."""
        with self._lock:
            subs = list(self._subs)
        encoded: dict[tuple[Hashable, int], bytes] = {}
        shared: dict[tuple[Hashable, Hashable], list[tuple[Change, bytes]]] = {}
        for sub in subs:
            try:
                if sub.encoding is None:
                    if sub.deliver is not None:
                        for change in changes:
                            if sub.match(change):
                                sub.deliver(change)
                    continue
                key = sub.encoding.key
                group = None if sub.filter_key is None else (key, sub.filter_key)
                if group is not None and group in shared:
                    if shared[group] and sub.deliver_lines is not None:
                        sub.deliver_lines(shared[group])
                    continue
                lines: list[tuple[Change, bytes]] = []
                for i, change in enumerate(changes):
                    if not sub.match(change):
                        continue
                    data = encoded.get((key, i))
                    if data is None:
                        data = encoded[(key, i)] = sub.encoding.encode(change)
                    lines.append((change, data))
                if group is not None:
                    shared[group] = lines
                if lines and sub.deliver_lines is not None:
                    sub.deliver_lines(lines)
            except Exception:  # a broken watcher is dropped, the others carry on
                self.unsubscribe(sub)
