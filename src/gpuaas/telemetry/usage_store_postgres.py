"""The ``UsageStore`` port on PostgreSQL (psycopg 3): usage intervals in the server's own database.

When the control plane's store is PostgreSQL, usage goes to the same database, in its own table
``usage_intervals`` (created if missing), so a server's data lives in one place and survives the
loss of its data dir. A ``schema=NAME`` query parameter on the URL (not a libpq parameter, so it is
removed before connecting) puts the table in that schema, as ``gpuaas.store.postgres`` does (both
parse it with ``gpuaas.pgurl``, since adapters must not import each other). Every
statement commits on its own (autocommit): no transaction is held open between calls. This module
computes no totals and must not import the object store.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import psycopg

from gpuaas.pgurl import is_plain_identifier, is_postgres_url, split_schema
from gpuaas.telemetry.accounting import UsageInterval
from gpuaas.telemetry.usage_store import (
    COLUMNS,
    UsageStoreError,
    interval_from_row,
    interval_to_row,
)

__all__ = ["PostgresUsageStore", "is_postgres_url", "split_schema"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS usage_intervals (
    workload_key  TEXT NOT NULL,
    start         DOUBLE PRECISION NOT NULL,
    "end"         DOUBLE PRECISION,
    namespace     TEXT NOT NULL,
    local_queue   TEXT NOT NULL,
    cluster_queue TEXT NOT NULL,
    usage         TEXT NOT NULL,
    PRIMARY KEY (workload_key, start)
)""",
    'CREATE INDEX IF NOT EXISTS usage_intervals_open ON usage_intervals ("end")',
)

_UPSERT = (
    f"INSERT INTO usage_intervals ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    'ON CONFLICT (workload_key, start) DO UPDATE SET "end" = excluded."end", '
    "namespace = excluded.namespace, local_queue = excluded.local_queue, "
    "cluster_queue = excluded.cluster_queue, usage = excluded.usage"
)


class PostgresUsageStore:
    """One table in PostgreSQL; one autocommit connection, reopened if it breaks; thread-safe."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo, self._schema = split_schema(url)
        if self._schema is not None and not is_plain_identifier(self._schema):
            raise UsageStoreError(f"--db {url}: schema {self._schema!r} is not a plain identifier")
        self._lock = threading.Lock()
        self._db: psycopg.Connection[tuple[object, ...]] | None = None
        with self._lock:
            self._conn()

    def _conn(self) -> psycopg.Connection[tuple[object, ...]]:
        """The open connection (caller holds the lock); the first one creates the table."""
        if self._db is not None and not self._db.closed and not self._db.broken:
            return self._db
        try:
            conn = psycopg.connect(self._conninfo, connect_timeout=10, autocommit=True)
            if self._schema is not None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
                conn.execute(f'SET search_path TO "{self._schema}"')
            for stmt in _SCHEMA:
                conn.execute(stmt)
        except psycopg.Error as exc:
            raise UsageStoreError(
                f"usage store: cannot open PostgreSQL at {self.url}: {exc}"
            ) from exc
        self._db = conn
        return conn

    def _execute(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        cur = self._conn().execute(sql, params)
        return cur.fetchall() if cur.description is not None else []

    def _run(self, what: str, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        """One statement; once more on a fresh connection if the old one broke (a restarted
        PostgreSQL): every statement here is a read or an idempotent upsert."""
        with self._lock:
            try:
                try:
                    return self._execute(sql, params)
                except psycopg.OperationalError:
                    if self._db is None or not self._db.broken:
                        raise
                    return self._execute(sql, params)  # _conn() reconnects
            except psycopg.Error as exc:
                raise UsageStoreError(f"usage store {self.url}: {what}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def put(self, interval: UsageInterval) -> None:
        self._run(
            f"writing the interval of {interval.workload_key}", _UPSERT, interval_to_row(interval)
        )

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        rows = [interval_to_row(i) for i in intervals]
        with self._lock:
            try:
                for attempt in (0, 1):  # once more on a fresh connection, as ``_run``
                    try:
                        conn = self._conn()
                        with conn.transaction(), conn.cursor() as cur:
                            cur.executemany(_UPSERT, rows)
                        return
                    except psycopg.OperationalError:
                        if attempt or self._db is None or not self._db.broken:
                            raise
            except psycopg.Error as exc:
                raise UsageStoreError(
                    f"usage store {self.url}: writing {len(rows)} intervals: {exc}"
                ) from exc

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        lo = -math.inf if since is None else since
        hi = math.inf if until is None else until
        rows = self._run(
            "reading intervals",
            f"SELECT {COLUMNS} FROM usage_intervals "
            'WHERE start < %s AND ("end" IS NULL OR "end" > %s) '
            'ORDER BY start, workload_key COLLATE "C"',
            (hi, lo),
        )
        return [interval_from_row(r) for r in rows]

    def open_intervals(self) -> list[UsageInterval]:
        rows = self._run(
            "reading open intervals",
            f'SELECT {COLUMNS} FROM usage_intervals WHERE "end" IS NULL '
            'ORDER BY start, workload_key COLLATE "C"',
            (),
        )
        return [interval_from_row(r) for r in rows]
