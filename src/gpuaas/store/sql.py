"""The SQL both adapters share: schema, the commit of a write batch, and the read queries.

``SqlStore`` is written once against DB-API connections with ``?`` placeholders; an adapter
supplies the connections, the placeholder style and its column types. It keeps one connection for
writes (used by one writer thread at a time) and one for reads, each behind its own lock, so a
slow reader never holds a write transaction open. It must not know about HTTP or Kueue objects.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from gpuaas.store.base import StoreError
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
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects (gk TEXT NOT NULL, namespace TEXT NOT NULL,"
    " name TEXT NOT NULL, rv BIGINT NOT NULL, seq BIGINT NOT NULL, created {real} NOT NULL,"
    " doc TEXT NOT NULL, internal TEXT NOT NULL, PRIMARY KEY (gk, namespace, name))",
    "CREATE TABLE IF NOT EXISTS changes (rv BIGINT PRIMARY KEY, type TEXT NOT NULL,"
    " gk TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (id BIGINT PRIMARY KEY, time {real} NOT NULL,"
    " namespace TEXT NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, object TEXT NOT NULL,"
    " message TEXT NOT NULL, workload TEXT, related TEXT)",
    "CREATE INDEX IF NOT EXISTS events_namespace ON events (namespace, id)",
    "CREATE INDEX IF NOT EXISTS events_object ON events (object, id)",
    "CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " namespaces TEXT NOT NULL, admin INTEGER NOT NULL, created {real} NOT NULL)",
)

_PUT_OBJECT = (
    "INSERT INTO objects (gk, namespace, name, rv, seq, created, doc, internal)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (gk, namespace, name) DO UPDATE SET"
    " rv = excluded.rv, seq = excluded.seq, created = excluded.created, doc = excluded.doc,"
    " internal = excluded.internal"
)
_DELETE_OBJECT = "DELETE FROM objects WHERE gk = ? AND namespace = ? AND name = ?"
_PUT_CHANGE = "INSERT INTO changes (rv, type, gk, namespace, name, doc) VALUES (?, ?, ?, ?, ?, ?)"
_PUT_EVENT = (
    "INSERT INTO events (id, time, namespace, type, reason, object, message, workload, related)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PUT_TOKEN = (
    "INSERT INTO tokens (hash, name, namespaces, admin, created) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (hash) DO UPDATE SET name = excluded.name, namespaces = excluded.namespaces,"
    " admin = excluded.admin"
)
_DELETE_TOKEN = "DELETE FROM tokens WHERE hash = ?"
_EVENT_COLUMNS = "id, time, namespace, type, reason, object, message, workload, related"


def _dumps(doc: Any) -> str:
    # msgspec: the same JSON value as json.dumps(sort_keys=True), several times faster (every
    # create writes its document twice, the object and its change, in the commit thread)
    return msgspec.json.encode(doc, order="sorted").decode()


def _sorted(encoded: bytes) -> str:
    """A record's JSON (kept in its document's key order) as the store writes it: sorted."""
    return _dumps(msgspec.json.decode(encoded))


def _text_bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def _strict_json(raw: bytes) -> bytes:
    """``raw`` if msgspec reads it, else re-encoded from ``json``'s reading (which accepts the
    NaN an older version may have written: msgspec writes it as null)."""
    try:
        msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return msgspec.json.encode(json.loads(raw))
    return raw


class SqlStore:
    """A ``Store`` over two DB-API connections; subclasses say how to open them."""

    url: str
    placeholder = "?"
    real_type = "REAL"

    def __init__(self, url: str, connect: Callable[[], Any]) -> None:
        self.url = url
        self._connect = connect
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer = connect()
        self._reader = connect()
        self._closed = False
        self._create_schema()

    # -- helpers -------------------------------------------------------------------------------
    def _sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def _create_schema(self) -> None:
        with self._write_lock:
            cur = self._writer.cursor()
            for stmt in _SCHEMA:
                cur.execute(stmt.format(real=self.real_type))
            self._writer.commit()

    def _query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._read_lock:
            if self._closed:
                raise StoreError(f"store {self.url} is closed")
            try:
                cur = self._reader.cursor()
                cur.execute(self._sql(text), tuple(params))
                rows = list(cur.fetchall())
                self._reader.commit()  # end the read snapshot so the next read sees new commits
            except Exception as exc:
                self._reader.rollback()
                raise StoreError(f"reading from {self.url}: {exc}") from exc
            return rows

    # -- Store ---------------------------------------------------------------------------------
    def load(self) -> Loaded:
        rows = self._query(
            "SELECT gk, namespace, name, rv, seq, created, doc, internal FROM objects"
            " ORDER BY seq, gk, namespace, name"
        )
        objects = [
            ObjectRecord.encoded(
                ObjectKey(r[0], r[1], r[2]),
                int(r[3]),
                int(r[4]),
                float(r[5]),
                _text_bytes(r[6]),  # kept encoded: the engine decodes (and checks) on read
                _strict_json(_text_bytes(r[7])),
            )
            for r in rows
        ]
        max_rv = self._query("SELECT COALESCE(MAX(rv), 0) FROM changes")[0][0]
        max_obj_rv = max((o.rv for o in objects), default=0)
        max_event = self._query("SELECT COALESCE(MAX(id), 0) FROM events")[0][0]
        return Loaded(objects, max(int(max_rv), max_obj_rv), int(max_event))

    def commit(self, writes: Sequence[Write]) -> None:
        """One transaction. Object writes collapse to the last one per key, as a replay would."""
        last: dict[ObjectKey, PutObject | DeleteObject] = {}
        changes: list[tuple[Any, ...]] = []
        events: list[tuple[Any, ...]] = []
        token_ops: list[PutToken | DeleteToken] = []
        texts: dict[int, tuple[JsonDoc, str]] = {}  # id(doc) -> (doc, its JSON): one encoding

        def text(doc: JsonDoc) -> str:
            found = texts.get(id(doc))
            if found is None:
                found = texts[id(doc)] = (doc, _dumps(doc))
            return found[1]

        for w in writes:
            if isinstance(w, PutObject):
                last[w.record.key] = w
            elif isinstance(w, DeleteObject):
                last[w.key] = w
            elif isinstance(w, AppendChange):
                c = w.change
                changes.append((c.rv, c.type, c.key.gk, c.key.namespace, c.key.name, text(c.doc)))
            elif isinstance(w, AppendEvent):
                e = w.event
                events.append(
                    (
                        e.id,
                        e.time,
                        e.namespace,
                        e.type,
                        e.reason,
                        e.object,
                        e.message,
                        e.workload,
                        e.related,
                    )
                )
            else:
                token_ops.append(w)
        puts = [
            (
                k.gk,
                k.namespace,
                k.name,
                w.record.rv,
                w.record.seq,
                w.record.created,
                text(w.doc) if w.doc is not None else _sorted(w.record.doc_json),
                _sorted(w.record.internal_json),
            )
            for k, w in last.items()
            if isinstance(w, PutObject)
        ]
        deletes = [
            (k.gk, k.namespace, k.name) for k, w in last.items() if isinstance(w, DeleteObject)
        ]
        with self._write_lock:
            if self._closed:
                raise StoreError(f"store {self.url} is closed")
            try:
                cur = self._writer.cursor()
                if deletes:
                    cur.executemany(self._sql(_DELETE_OBJECT), deletes)
                if puts:
                    cur.executemany(self._sql(_PUT_OBJECT), puts)
                if changes:
                    cur.executemany(self._sql(_PUT_CHANGE), changes)
                if events:
                    cur.executemany(self._sql(_PUT_EVENT), events)
                for op in token_ops:
                    if isinstance(op, PutToken):
                        t = op.token
                        row = (t.hash, t.name, _dumps(list(t.namespaces)), int(t.admin), t.created)
                        cur.execute(self._sql(_PUT_TOKEN), row)
                    else:
                        cur.execute(self._sql(_DELETE_TOKEN), (op.hash,))
                self._writer.commit()
            except Exception as exc:
                with contextlib.suppress(Exception):  # the connection itself may be gone
                    self._writer.rollback()
                raise StoreError(f"committing {len(writes)} writes to {self.url}: {exc}") from exc

    def changes_since(self, rv: int, limit: int = 10_000) -> list[Change]:
        rows = self._query(
            "SELECT rv, type, gk, namespace, name, doc FROM changes WHERE rv > ? ORDER BY rv"
            " LIMIT ?",
            (rv, limit),
        )
        return [
            Change(int(r[0]), r[1], ObjectKey(r[2], r[3], r[4]), json.loads(r[5])) for r in rows
        ]

    def events(
        self, namespace: str | None = None, obj: str | None = None, limit: int = 1000
    ) -> list[EventRecord]:
        where, params = [], []
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        if obj is not None:
            where.append("(object = ? OR workload = ?)")
            params += [obj, obj.split(" ", 1)[-1]]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events{clause} ORDER BY id DESC LIMIT ?",
            [*params, limit],
        )
        return [
            EventRecord(int(r[0]), float(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8])
            for r in reversed(rows)
        ]

    def token(self, token_hash: str) -> TokenRecord | None:
        rows = self._query(
            "SELECT hash, name, namespaces, admin, created FROM tokens WHERE hash = ?",
            (token_hash,),
        )
        return _token(rows[0]) if rows else None

    def tokens(self) -> list[TokenRecord]:
        rows = self._query(
            "SELECT hash, name, namespaces, admin, created FROM tokens ORDER BY created"
        )
        return [_token(r) for r in rows]

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            if self._closed:
                return
            self._closed = True
            for conn in (self._writer, self._reader):
                with contextlib.suppress(Exception):  # a broken connection has nothing to say
                    conn.close()


def _token(r: tuple[Any, ...]) -> TokenRecord:
    return TokenRecord(r[0], r[1], tuple(json.loads(r[2])), bool(r[3]), float(r[4]))
