"""SQLite adapter: the default store, one file in the data dir, WAL with synchronous=FULL.

WAL lets readers (watch replay, token look-ups, event lists) run beside the single writer, and
synchronous=FULL fsyncs the WAL on every commit, so a commit that returned survives power loss.
Group commit (``store.groupcommit``) is what keeps one fsync per batch instead of per request.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from gpuaas.store.sql import SqlStore


class SqliteStore(SqlStore):
    placeholder = "?"
    real_type = "REAL"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Token hashes live here: only the owner may read it (SQLite gives its -wal and -shm files
        # the database file's mode).
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        super().__init__(f"sqlite:///{self.path}", connect)
