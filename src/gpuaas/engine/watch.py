"""Fan-out of committed changes to watchers (``?watch=true``).

The group committer calls ``publish`` after each commit, in commit order, so every watcher sees
changes in resourceVersion order and only once they are durable. A watcher's ``deliver`` must not
block (the API hands changes to its event loop); one that raises is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from gpuaas.store import Change


class Subscription:
    def __init__(
        self, hub: WatchHub, deliver: Callable[[Change], None], match: Callable[[Change], bool]
    ) -> None:
        self._hub = hub
        self.deliver = deliver
        self.match = match

    def close(self) -> None:
        self._hub.unsubscribe(self)


class WatchHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []

    def subscribe(
        self, deliver: Callable[[Change], None], match: Callable[[Change], bool]
    ) -> Subscription:
        sub = Subscription(self, deliver, match)
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
        with self._lock:
            subs = list(self._subs)
        for change in changes:
            for sub in subs:
                try:
                    if sub.match(change):
                        sub.deliver(change)
                except Exception:  # a broken watcher is dropped, the others carry on
                    self.unsubscribe(sub)
