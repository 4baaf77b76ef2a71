"""Durable usage intervals: the ``UsageStore`` port, its in-memory fake and SQLite.

This module owns how usage intervals survive a restart. The port is three methods; an interval
is identified by (workload key, start), so writing it again when it closes is an upsert.
``open_usage_store`` picks the adapter: PostgreSQL (``telemetry.usage_store_postgres``, the only
module here that opens a network connection) for a ``postgresql://`` URL, else a SQLite file. It
computes no totals (``telemetry.accounting`` does).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from gpuaas.telemetry.accounting import UsageInterval


class UsageStoreError(Exception):
    """The usage store cannot be opened, read or written; the message names it."""


class UsageStore(Protocol):
    def put(self, interval: UsageInterval) -> None:
        """Insert, or replace the interval with the same (workload_key, start)."""

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        """``put`` each, in order, as one transaction (one fsync for a whole batch)."""

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        """Intervals overlapping [since, until], open ones included, ordered by start."""

    def open_intervals(self) -> list[UsageInterval]:
        """Intervals not closed yet (``end is None``)."""


def _overlaps(i: UsageInterval, since: float | None, until: float | None) -> bool:
    lo = -math.inf if since is None else since
    hi = math.inf if until is None else until
    return i.start < hi and (i.end is None or i.end > lo)


class MemoryUsageStore:
    """The fake: same contract, no durability."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, float], UsageInterval] = {}

    def put(self, interval: UsageInterval) -> None:
        self._rows[(interval.workload_key, interval.start)] = interval

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        for interval in intervals:
            self.put(interval)

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        rows = [i for i in self._rows.values() if _overlaps(i, since, until)]
        return sorted(rows, key=lambda i: (i.start, i.workload_key))

    def open_intervals(self) -> list[UsageInterval]:
        return sorted(
            (i for i in self._rows.values() if i.end is None),
            key=lambda i: (i.start, i.workload_key),
        )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage_intervals (
    workload_key  TEXT NOT NULL,
    start         REAL NOT NULL,
    "end"         REAL,
    namespace     TEXT NOT NULL,
    local_queue   TEXT NOT NULL,
    cluster_queue TEXT NOT NULL,
    usage         TEXT NOT NULL,
    PRIMARY KEY (workload_key, start)
);
CREATE INDEX IF NOT EXISTS usage_intervals_open ON usage_intervals ("end");
"""

COLUMNS = 'workload_key, start, "end", namespace, local_queue, cluster_queue, usage'
_SQLITE_UPSERT = (
    f"INSERT INTO usage_intervals ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
    'ON CONFLICT (workload_key, start) DO UPDATE SET "end" = excluded."end", '
    "namespace = excluded.namespace, local_queue = excluded.local_queue, "
    "cluster_queue = excluded.cluster_queue, usage = excluded.usage"
)


def open_usage_store(target: str | Path) -> UsageStore:
    """PostgreSQL for a ``postgresql://`` URL (``?schema=`` honoured), else a SQLite file."""
    from gpuaas.telemetry.usage_store_postgres import PostgresUsageStore, is_postgres_url

    if isinstance(target, str) and is_postgres_url(target):
        return PostgresUsageStore(target)
    return SqliteUsageStore(target)


class SqliteUsageStore:
    """One table in a SQLite file (``":memory:"`` for tests); safe across threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        if self.path != ":memory:":  # private from the start (SQLite copies its mode to -wal)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def put(self, interval: UsageInterval) -> None:
        self.put_many([interval])

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        rows = [interval_to_row(i) for i in intervals]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(_SQLITE_UPSERT, rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        lo = -math.inf if since is None else since
        hi = math.inf if until is None else until
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM usage_intervals "
                'WHERE start < ? AND ("end" IS NULL OR "end" > ?) ORDER BY start, workload_key',
                (hi, lo),
            ).fetchall()
        return [interval_from_row(r) for r in rows]

    def open_intervals(self) -> list[UsageInterval]:
        with self._lock:
            rows = self._db.execute(
                f'SELECT {COLUMNS} FROM usage_intervals WHERE "end" IS NULL '
                "ORDER BY start, workload_key"
            ).fetchall()
        return [interval_from_row(r) for r in rows]


def interval_to_row(interval: UsageInterval) -> tuple[object, ...]:
    """The row stored as ``COLUMNS`` (both SQL adapters); ``usage`` is JSON
    ``[[flavor, resource, quantity], ...]``."""
    return (
        interval.workload_key,
        interval.start,
        interval.end,
        interval.namespace,
        interval.local_queue,
        interval.cluster_queue,
        json.dumps([list(u) for u in interval.usage]),
    )


def interval_from_row(r: Sequence[object]) -> UsageInterval:
    """A row selected as ``COLUMNS`` (both SQL adapters)."""
    usage = tuple((str(f), str(res), int(q)) for f, res, q in json.loads(str(r[6])))
    end = r[2]
    return UsageInterval(
        str(r[0]), str(r[3]), str(r[4]), str(r[5]), _float(r[1]),
        None if end is None else _float(end), usage,
    )  # fmt: skip


def _float(value: object) -> float:
    if not isinstance(value, int | float):
        raise UsageStoreError(f"usage store: expected a number, got {value!r}")
    return float(value)
