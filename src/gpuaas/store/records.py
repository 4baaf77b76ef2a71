"""The rows the store keeps and the writes it accepts: plain data shared by every adapter.

This module owns the shapes that cross the store boundary (objects as JSON documents, the change
log, events, tokens) and the write operations a transaction is made of. It does no I/O and knows
nothing about Kueue's semantics: the engine decides what to write, the store only keeps it.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gpuaas.store import compact

JsonDoc = dict[str, Any]


@dataclass(slots=True, frozen=True)
class ObjectKey:
    """Identity of a stored object: ``group/Kind`` (``batch/Job``), namespace ("" if none), name."""

    gk: str
    namespace: str
    name: str


class ObjectRecord:
    """One object: its document as served, and engine-private state the API never shows.

    Both are kept encoded (``store.compact``: JSON in the document's own key order, deflated
    against a dictionary per kind) and decoded on every read of ``doc`` or ``internal``: decoded,
    a Workload with its status and managedFields took about 9 KB of Python dicts, lists and
    strings, encoded about 0.1 KB, and the engine holds every object for as long as it exists.
    Each read returns a fresh copy, which the caller may change; a record never changes its
    document (``replace`` makes a new record).

    A new record (``ObjectRecord(...)``, ``replace``) holds plain JSON until ``compact`` deflates
    it: the engine builds records under its lock, and zlib releases the GIL while it deflates, so
    every deflate there let the request threads waiting for the GIL run into the lock and queue
    on it. The group committer's thread compacts the records the engine still holds once their
    batch is stored (``compact_held``), and a Workload's first record, replaced by its status a
    few milliseconds later, is never deflated at all."""

    __slots__ = ("_doc", "_internal", "created", "key", "rv", "seq")

    def __init__(
        self,
        key: ObjectKey,
        rv: int,  # resourceVersion of the last change
        seq: int,  # creation order (resourceVersion at creation); restart replays in this order
        created: float,  # creation time, seconds since the epoch
        doc: JsonDoc,
        internal: JsonDoc | None = None,
    ) -> None:
        self.key, self.rv, self.seq, self.created = _interned(key), rv, seq, created
        self._doc = compact.plain(doc)
        self._internal = compact.plain(internal) if internal else _EMPTY

    @classmethod
    def encoded(
        cls, key: ObjectKey, rv: int, seq: int, created: float, doc: bytes, internal: bytes
    ) -> ObjectRecord:
        """A record from the JSON text the store read back (not checked here: ``doc_json``
        gives it back as it was)."""
        rec = cls.__new__(cls)
        rec.key, rec.rv, rec.seq, rec.created = _interned(key), rv, seq, created
        rec._doc = compact.pack(key.gk, doc)
        rec._internal = compact.pack(_private(key), internal) if internal != _EMPTY else _EMPTY
        return rec

    @property
    def doc(self) -> JsonDoc:
        """The document, decoded anew (a copy of its own)."""
        return cast(JsonDoc, compact.decode(self.key.gk, self._doc))

    @property
    def doc_json(self) -> bytes:
        """The document's JSON text, keys in the document's order."""
        return compact.plain_json(self.key.gk, self._doc)

    @property
    def internal(self) -> JsonDoc:
        """The engine-private state, decoded anew (a copy of its own)."""
        if self._internal is _EMPTY:
            return {}
        return cast(JsonDoc, compact.decode(_private(self.key), self._internal))

    @property
    def internal_json(self) -> bytes:
        return compact.plain_json(_private(self.key), self._internal)

    def replace(
        self, *, rv: int | None = None, doc: JsonDoc | None = None, internal: JsonDoc | None = None
    ) -> ObjectRecord:
        """A new record with these parts changed; the others are shared, not encoded again."""
        rec = ObjectRecord.__new__(ObjectRecord)
        rec.key, rec.seq, rec.created = self.key, self.seq, self.created
        rec.rv = self.rv if rv is None else rv
        rec._doc = self._doc if doc is None else compact.plain(doc)
        if internal is None:
            rec._internal = self._internal
        else:
            rec._internal = compact.plain(internal) if internal else _EMPTY
        return rec

    @property
    def size(self) -> int:
        """Bytes held for the document and the private state, as encoded now."""
        return len(self._doc) + len(self._internal)

    def compact(self) -> None:
        """Deflate the parts still held as plain JSON (``store.compact.pack``), in place.

        Safe beside readers on other threads: each part is one bytes object, replaced by one
        assignment with another encoding of the same value; every read decodes either."""
        doc, internal = self._doc, self._internal
        if not compact.is_packed(doc):
            self._doc = compact.pack(self.key.gk, doc)
        if internal is not _EMPTY and not compact.is_packed(internal):
            self._internal = compact.pack(_private(self.key), internal)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ObjectRecord):
            return NotImplemented
        mine = (self.key, self.rv, self.seq, self.created, self.doc, self.internal)
        return mine == (other.key, other.rv, other.seq, other.created, other.doc, other.internal)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ObjectRecord(key={self.key!r}, rv={self.rv}, seq={self.seq}, "
            f"created={self.created!r}, doc={self.doc!r}, internal={self.internal!r})"
        )


_EMPTY = b"{}"  # no private state (most kinds): one shared value


def _interned(key: ObjectKey) -> ObjectKey:
    """``key`` with its kind and namespace shared with every other record's (not a copy each)."""
    return ObjectKey(sys.intern(key.gk), sys.intern(key.namespace), key.name)


def _private(key: ObjectKey) -> str:
    """The table (``store.compact``) of a kind's private state: not its documents' dictionary."""
    return key.gk + "#internal"


@dataclass(slots=True, frozen=True)
class Change:
    """One entry of the change log that ``?watch=true`` replays: ADDED, MODIFIED or DELETED."""

    rv: int
    type: str
    key: ObjectKey
    doc: JsonDoc


@dataclass(slots=True, frozen=True)
class EventRecord:
    """A Kubernetes-style event, kept for the audit trail (``describe``)."""

    id: int
    time: float
    namespace: str  # "" for cluster-scoped objects
    type: str  # Normal / Warning
    reason: str
    object: str  # "Kind namespace/name" or "Kind name"
    message: str
    workload: str | None = None
    related: str | None = None


@dataclass(slots=True, frozen=True)
class TokenRecord:
    """An API token; only its SHA-256 is kept, never the token itself."""

    hash: str
    name: str
    namespaces: tuple[str, ...]
    admin: bool
    created: float


@dataclass(slots=True, frozen=True)
class PutObject:
    record: ObjectRecord
    # ``record.doc`` as the engine built it, when it has it: the store encodes it once for the
    # object and for a change that carries the same dict, instead of decoding the record's.
    doc: JsonDoc | None = None


@dataclass(slots=True, frozen=True)
class DeleteObject:
    key: ObjectKey


@dataclass(slots=True, frozen=True)
class AppendChange:
    change: Change


@dataclass(slots=True, frozen=True)
class AppendEvent:
    event: EventRecord


@dataclass(slots=True, frozen=True)
class PutToken:
    token: TokenRecord


@dataclass(slots=True, frozen=True)
class DeleteToken:
    hash: str


Write = PutObject | DeleteObject | AppendChange | AppendEvent | PutToken | DeleteToken


@dataclass(slots=True)
class Loaded:
    """Everything a restart needs: objects in creation order and the counters to continue."""

    objects: list[ObjectRecord]
    max_rv: int
    max_event_id: int


def compact_held(
    writes: Sequence[Write],
    held: Mapping[ObjectKey, ObjectRecord],
    replacing: Collection[ObjectKey] = (),
) -> None:
    """Deflate the records ``writes`` stored that ``held`` (the engine's objects) still maps
    their keys to, but those whose keys are in ``replacing`` (created Workloads, which their
    first status replaces within milliseconds); a record replaced meanwhile is garbage and stays
    as it is. For the group committer's ``stored`` hook: off the engine's lock, and each
    record changes only its own encoding (``ObjectRecord.compact``)."""
    for w in writes:
        if isinstance(w, PutObject):
            key = w.record.key
            if held.get(key) is w.record and key not in replacing:
                w.record.compact()
