"""Durable usage intervals: the ``UsageStore`` port, its in-memory fake and SQLite.

This module owns how usage intervals survive a restart. The port is three methods; an interval
is identified by (workload key, start), so writing it again when it closes is an upsert. It
computes no totals (``telemetry.accounting`` does) and opens no network connection; the
PostgreSQL adapter belongs with the store package.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from pathlib import Path
from typing import Protocol

from gpuaas.telemetry.accounting import UsageInterval


class UsageStore(Protocol):
    def put(self, interval: UsageInterval) -> None:
        """Insert, or replace the interval with the same (workload_key, start)."""

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

_COLUMNS = 'workload_key, start, "end", namespace, local_queue, cluster_queue, usage'


class SqliteUsageStore:
    """One table in a SQLite file (``":memory:"`` for tests); safe across threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def put(self, interval: UsageInterval) -> None:
        usage = json.dumps([list(u) for u in interval.usage])
        with self._lock:
            self._db.execute(
                f"INSERT INTO usage_intervals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                'ON CONFLICT (workload_key, start) DO UPDATE SET "end" = excluded."end", '
                "namespace = excluded.namespace, local_queue = excluded.local_queue, "
                "cluster_queue = excluded.cluster_queue, usage = excluded.usage",
                (
                    interval.workload_key,
                    interval.start,
                    interval.end,
                    interval.namespace,
                    interval.local_queue,
                    interval.cluster_queue,
                    usage,
                ),
            )

    def intervals(self, since: float | None, until: float | None) -> list[UsageInterval]:
        lo = -math.inf if since is None else since
        hi = math.inf if until is None else until
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM usage_intervals "
                'WHERE start < ? AND ("end" IS NULL OR "end" > ?) ORDER BY start, workload_key',
                (hi, lo),
            ).fetchall()
        return [_row(r) for r in rows]

    def open_intervals(self) -> list[UsageInterval]:
        with self._lock:
            rows = self._db.execute(
                f'SELECT {_COLUMNS} FROM usage_intervals WHERE "end" IS NULL '
                "ORDER BY start, workload_key"
            ).fetchall()
        return [_row(r) for r in rows]


def _row(r: tuple[str, float, float | None, str, str, str, str]) -> UsageInterval:
    usage = tuple((str(f), str(res), int(q)) for f, res, q in json.loads(r[6]))
    return UsageInterval(
        r[0], r[3], r[4], r[5], float(r[1]), None if r[2] is None else float(r[2]), usage
    )
