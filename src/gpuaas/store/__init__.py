"""Durable storage for the control plane: a ``Store`` port, SQLite and PostgreSQL adapters.

``open_store(url)`` picks the adapter from the URL (``sqlite:///path`` or a bare path for SQLite,
``postgresql://...`` for PostgreSQL). Nothing here interprets Kueue objects.
"""

from __future__ import annotations

from pathlib import Path

from gpuaas.pgurl import is_postgres_url
from gpuaas.store.base import Store, StoreError
from gpuaas.store.groupcommit import Ack, GroupCommitter
from gpuaas.store.records import (
    AppendChange,
    AppendEvent,
    Change,
    DeleteObject,
    DeleteToken,
    EventRecord,
    JsonDoc,
    Loaded,
    ObjectKey,
    ObjectRecord,
    PutObject,
    PutToken,
    TokenRecord,
    Write,
    compact_held,
)


def open_store(url: str) -> Store:
    """Open (and create the tables of) the store at ``url``."""
    if is_postgres_url(url):
        from gpuaas.store.postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") :]
        if not url.startswith("/"):
            url = "/" + url
    elif "://" in url:
        raise StoreError(f"--db {url}: use sqlite:///PATH or postgresql://...")
    from gpuaas.store.sqlite import SqliteStore

    return SqliteStore(Path(url))


__all__ = [
    "Ack",
    "AppendChange",
    "AppendEvent",
    "Change",
    "DeleteObject",
    "DeleteToken",
    "EventRecord",
    "GroupCommitter",
    "JsonDoc",
    "Loaded",
    "ObjectKey",
    "ObjectRecord",
    "PutObject",
    "PutToken",
    "Store",
    "StoreError",
    "TokenRecord",
    "Write",
    "compact_held",
    "open_store",
]
