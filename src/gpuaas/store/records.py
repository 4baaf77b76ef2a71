"""The rows the store keeps and the writes it accepts: plain data shared by every adapter.

This module owns the shapes that cross the store boundary (objects as JSON documents, the change
log, events, tokens) and the write operations a transaction is made of. It does no I/O and knows
nothing about Kueue's semantics: the engine decides what to write, the store only keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonDoc = dict[str, Any]


@dataclass(slots=True, frozen=True)
class ObjectKey:
    """Identity of a stored object: ``group/Kind`` (``batch/Job``), namespace ("" if none), name."""

    gk: str
    namespace: str
    name: str


@dataclass(slots=True)
class ObjectRecord:
    """One object: its document as served, and engine-private state the API never shows."""

    key: ObjectKey
    rv: int  # resourceVersion of the last change
    seq: int  # creation order (resourceVersion at creation); restart replays in this order
    created: float  # creation time, seconds since the epoch
    doc: JsonDoc
    internal: JsonDoc = field(default_factory=dict)


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
