"""A list's documents as the engine hands them out: decoded when read, not when listed.

Records keep their documents encoded (``store.compact``), so a list of 10,000 Workloads decoded
at once is 10,000 new trees of dicts (about 9 KB each), and a paged list (``kubectl get`` reads
500 at a time) is kept by ``api.list_pages`` for minutes. ``ListedDocs`` holds the records
instead (a record never changes: a write replaces it, so the list stays the one read at its
resourceVersion) and decodes an item when it is read: a page costs its own 500 decodes, and a
kept list costs a reference per item, as it did when records held decoded documents. Kinds shown
with live status (queues, Jobs, Notebooks, RayClusters) are listed as built documents.

Reading many items at once pauses Python's cyclic collector (``collector_paused``; the API also
holds it paused while it builds the answer of a list): the new dicts hold no cycles and are
freed by reference counting, while collections triggered by so many new containers scanned the
whole heap again and again (a list of 10,000 took 4-5 times the CPU of its decoding).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import overload

from gpuaas.store import JsonDoc, ObjectRecord

_PAUSE_FROM = 256  # items read at once from which the collector is paused


@contextmanager
def collector_paused(items: int) -> Iterator[None]:
    """Python's cyclic collector off while ``items`` (from ``_PAUSE_FROM`` on) new documents
    are decoded or answered; as it was afterwards. For code that makes no reference cycles."""
    if items < _PAUSE_FROM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _doc(item: ObjectRecord | JsonDoc) -> JsonDoc:
    return item.doc if isinstance(item, ObjectRecord) else item


def _key(item: ObjectRecord | JsonDoc) -> tuple[str, str]:
    if isinstance(item, ObjectRecord):
        return item.key.namespace, item.key.name
    meta = item.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class ListedDocs(Sequence[JsonDoc]):
    """Documents in list order; each read of an item is a new copy of its own."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[ObjectRecord | JsonDoc]) -> None:
        self._items = list(items)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> JsonDoc: ...
    @overload
    def __getitem__(self, index: slice) -> list[JsonDoc]: ...
    def __getitem__(self, index: int | slice) -> JsonDoc | list[JsonDoc]:
        if isinstance(index, slice):
            chosen = self._items[index]
            with collector_paused(len(chosen)):
                return [_doc(x) for x in chosen]
        return _doc(self._items[index])

    def __iter__(self) -> Iterator[JsonDoc]:
        for item in self._items:
            yield _doc(item)

    def item_keys(self) -> list[tuple[str, str]]:
        """(namespace, name) of every item, in order, without decoding any."""
        return [_key(x) for x in self._items]

    def where(self, keep: Callable[[JsonDoc], bool]) -> ListedDocs:
        """The items ``keep`` accepts (each decoded once to ask it, then let go)."""
        with collector_paused(len(self._items)):
            return ListedDocs([x for x in self._items if keep(_doc(x))])
