"""The ``Store`` port: what the engine and the API need from durable storage, and nothing more.

Adapters (SQLite, PostgreSQL) implement this Protocol and are checked by one contract suite. The
port has no notion of Kueue objects beyond JSON documents and performs no network call while a
transaction is open: callers hand in a finished list of writes, the adapter commits it atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpuaas.store.records import Change, EventRecord, Loaded, TokenRecord, Write


class StoreError(Exception):
    """A write or read failed in the database; the message says which and why."""


class Store(Protocol):
    url: str

    def load(self) -> Loaded:
        """Every object in creation order, plus the highest resourceVersion and event id."""
        ...

    def commit(self, writes: Sequence[Write]) -> None:
        """Apply ``writes`` in one durable transaction: all of them or none (raises StoreError)."""
        ...

    def changes_since(self, rv: int, limit: int = 10_000) -> list[Change]:
        """Change-log entries with resourceVersion above ``rv``, oldest first."""
        ...

    def events(
        self, namespace: str | None = None, obj: str | None = None, limit: int = 1000
    ) -> list[EventRecord]:
        """Newest ``limit`` events (optionally of one namespace / one object), oldest first."""
        ...

    def token(self, token_hash: str) -> TokenRecord | None: ...

    def tokens(self) -> list[TokenRecord]: ...

    def close(self) -> None: ...
