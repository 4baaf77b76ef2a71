"""The UsageStore contract, run against every adapter in this package.

A PostgreSQL adapter joins by adding a fixture to ``STORES`` (or subclassing ``UsageStoreContract``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuaas.telemetry import MemoryUsageStore, SqliteUsageStore, UsageInterval, UsageStore


def interval(key: str, start: float, end: float | None) -> UsageInterval:
    ns = key.split("/")[0]
    return UsageInterval(
        key, ns, "lq", "cq", start, end, (("h100", "nvidia.com/gpu", 2), ("default", "cpu", 500))
    )


@pytest.fixture(params=["memory", "sqlite-memory", "sqlite-file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UsageStore]:
    factories: dict[str, Callable[[], UsageStore]] = {
        "memory": MemoryUsageStore,
        "sqlite-memory": lambda: SqliteUsageStore(":memory:"),
        "sqlite-file": lambda: SqliteUsageStore(tmp_path / "u.db"),
    }
    made = factories[request.param]()
    yield made
    if isinstance(made, SqliteUsageStore):
        made.close()


def test_put_is_an_upsert_on_key_and_start(store: UsageStore) -> None:
    store.put(interval("ns/a", 0.0, None))
    assert store.open_intervals() == [interval("ns/a", 0.0, None)]
    store.put(interval("ns/a", 0.0, 100.0))
    assert store.open_intervals() == []
    assert store.intervals(None, None) == [interval("ns/a", 0.0, 100.0)]


def test_overlap_query(store: UsageStore) -> None:
    rows = [
        interval("ns/a", 0.0, 100.0),
        interval("ns/b", 50.0, None),
        interval("ns/a", 200.0, 300.0),
    ]
    for r in rows:
        store.put(r)
    assert store.intervals(None, None) == rows[:2] + rows[2:]
    assert store.intervals(100.0, 200.0) == [rows[1]]  # touching ends do not overlap
    assert store.intervals(250.0, None) == [rows[1], rows[2]]
    assert store.intervals(None, 10.0) == [rows[0]]
    assert store.open_intervals() == [rows[1]]


def test_sqlite_file_persists(tmp_path: Path) -> None:
    first = SqliteUsageStore(tmp_path / "p.db")
    first.put(interval("ns/a", 1.5, None))
    first.close()
    second = SqliteUsageStore(tmp_path / "p.db")
    assert second.open_intervals() == [interval("ns/a", 1.5, None)]
    second.close()
