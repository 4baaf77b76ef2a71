"""Objects made from the runtime (v1 Pods, v1 Nodes), given resourceVersions and watchable.

The runtime is not the store: its pods and nodes change without a change-log entry. A ``Book``
reads them (``read``: key -> document) at most every ``interval`` seconds, compares each
document with the one it read before and gives every change a resourceVersion of its own, so a
list carries a resourceVersion and a watch from it (``kubectl get pods -w``, a client-go
reflector) replays what changed after it, then follows, as kube-apiserver does. Its versions
start at the server's start time in milliseconds, so a version handed out by an earlier server
reads as older, never as a future one; a version older than the changes it keeps (``history``)
is answered 410 Expired. Reads run in worker threads; nothing here decides anything.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool

from gpuaas.api.status import status_doc

JsonDoc = dict[str, Any]
POLL_SECONDS = 0.25  # how often an open watch reads the runtime again
BOOKMARK_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Entry:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: str
    doc: JsonDoc


def _sort_key(doc: JsonDoc) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Book:
    """The last read of the runtime's objects of one kind, and the changes between reads."""

    def __init__(
        self,
        read: Callable[[], dict[str, JsonDoc]],
        *,
        interval: float = 0.2,
        history: int = 2000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._read = read
        self._interval = interval
        self._clock = clock
        self._rv = int(clock() * 1000)
        self._oldest = self._rv  # the first version a watch may start from
        self._docs: dict[str, JsonDoc] = {}
        self._log: deque[Entry] = deque(maxlen=history)
        self._lock = threading.Lock()
        self._read_at = float("-inf")

    @property
    def rv(self) -> int:
        return self._rv

    def refresh(self, *, force: bool = False) -> int:
        """Read the runtime again (unless it was read less than ``interval`` ago) and record
        what changed; returns the resourceVersion now."""
        with self._lock:
            now = self._clock()
            if not force and now - self._read_at < self._interval:
                return self._rv
            self._read_at = now
            fresh = self._read()
            for key in sorted(set(self._docs) - set(fresh)):
                self._record("DELETED", key, self._docs.pop(key))
            for key in sorted(fresh):
                old = self._docs.get(key)
                if old is not None and _plain(old) == fresh[key]:
                    continue
                self._record("ADDED" if old is None else "MODIFIED", key, fresh[key])
            return self._rv

    def _record(self, type_: str, key: str, doc: JsonDoc) -> None:
        self._rv += 1
        stamped = {**doc, "metadata": {**doc.get("metadata", {}), "resourceVersion": str(self._rv)}}
        if type_ != "DELETED":
            self._docs[key] = stamped
        if len(self._log) == self._log.maxlen:
            self._oldest = self._log[0].rv
        self._log.append(Entry(self._rv, type_, key, stamped))

    def items(self) -> tuple[list[JsonDoc], int]:
        """Every object (by namespace and name) and the resourceVersion they reflect."""
        self.refresh()
        with self._lock:
            return sorted(self._docs.values(), key=_sort_key), self._rv

    def get(self, key: str) -> JsonDoc | None:
        self.refresh()
        with self._lock:
            return self._docs.get(key)

    def since(self, rv: int) -> list[Entry] | None:
        """The changes after ``rv``, oldest first; None when they are no longer kept."""
        with self._lock:
            if rv < self._oldest:
                return None
            return [e for e in self._log if e.rv > rv]

    @property
    def oldest(self) -> int:
        return self._oldest


def _plain(doc: JsonDoc) -> JsonDoc:
    """``doc`` without the resourceVersion the book stamped on it (to compare with a fresh read)."""
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**doc, "metadata": meta}


def _event(type_: str, obj: JsonDoc) -> bytes:
    return (json.dumps({"type": type_, "object": obj}) + "\n").encode()


async def stream(
    book: Book,
    match: Callable[[JsonDoc], bool],
    resource_version: int | None,
    timeout: float | None,
    shape: Callable[[JsonDoc], JsonDoc],
    *,
    kind: str,
    api_version: str,
    bookmarks: bool = False,
) -> AsyncIterator[bytes]:
    """A watch of ``book``'s objects that ``match``, as newline-delimited JSON events."""
    rv = await run_in_threadpool(book.refresh, force=True)
    if resource_version is None or resource_version == 0:
        docs, last = await run_in_threadpool(book.items)
        initial = [Entry(last, "ADDED", "", d) for d in docs]
    else:
        if resource_version > rv:
            message = f"Too large resource version: {resource_version}, current: {rv}"
            yield _event("ERROR", status_doc(504, message, "Timeout"))
            return
        changes = book.since(resource_version)
        if changes is None:
            message = f"too old resource version: {resource_version} ({book.oldest})"
            yield _event("ERROR", status_doc(410, message, "Expired"))
            return
        initial, last = changes, resource_version
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    idle_since = loop.time()
    for e in initial:
        if match(e.doc):
            yield _event(e.type, shape(e.doc))
        last = max(last, e.rv)
    if bookmarks:
        yield _bookmark(kind, api_version, last)
    while deadline is None or loop.time() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        await run_in_threadpool(book.refresh)
        changes = book.since(last)
        if changes is None:  # fell further behind than the book keeps: start again
            yield _event("ERROR", status_doc(410, f"too old resource version: {last}", "Expired"))
            return
        for e in changes:
            last = e.rv
            if match(e.doc):
                idle_since = loop.time()
                yield _event(e.type, shape(e.doc))
        if bookmarks and loop.time() - idle_since >= BOOKMARK_SECONDS:
            idle_since = loop.time()
            yield _bookmark(kind, api_version, last)


def _bookmark(kind: str, api_version: str, rv: int) -> bytes:
    meta = {"resourceVersion": str(rv)}
    return _event("BOOKMARK", {"kind": kind, "apiVersion": api_version, "metadata": meta})
