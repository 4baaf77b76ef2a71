"""Usage intervals written behind: a put returns at once, reads see every earlier put, and a
close writes what is queued, on SQLite as on the in-memory store."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpuaas.telemetry import MemoryUsageStore, SqliteUsageStore, UsageLedger
from gpuaas.telemetry.accounting import UsageInterval
from gpuaas.telemetry.usage_store import UsageStore
from gpuaas.telemetry.usage_writer import WriteBehindUsageStore


def interval(i: int, end: float | None = None) -> UsageInterval:
    return UsageInterval(f"t/w{i}", "t", "lq", "cq", float(i), end, (("a", "cpu", 1000),))


@pytest.fixture(params=["memory", "sqlite"])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> UsageStore:
    if request.param == "memory":
        return MemoryUsageStore()
    return SqliteUsageStore(tmp_path / "usage.db")


def test_reads_see_every_earlier_put(inner: UsageStore) -> None:
    store = WriteBehindUsageStore(inner)
    try:
        for i in range(200):
            store.put(interval(i))
        for i in range(0, 200, 2):
            store.put(interval(i, end=i + 5.0))
        opened = store.open_intervals()
        assert [i.workload_key for i in opened] == [f"t/w{i}" for i in range(1, 200, 2)]
        assert len(store.intervals(None, None)) == 200
    finally:
        store.close()


def test_close_writes_what_is_queued(tmp_path: Path) -> None:
    path = tmp_path / "usage.db"
    store = WriteBehindUsageStore(SqliteUsageStore(path))
    for i in range(50):
        store.put(interval(i))
    store.close()
    again = SqliteUsageStore(path)
    try:
        assert len(again.open_intervals()) == 50
    finally:
        again.close()


def test_a_ledger_over_it_charges_as_over_the_store_itself(tmp_path: Path) -> None:
    ledgers = [
        UsageLedger(WriteBehindUsageStore(SqliteUsageStore(tmp_path / "a.db"))),
        UsageLedger(SqliteUsageStore(tmp_path / "b.db")),
    ]
    for ledger in ledgers:
        for i in range(20):
            ledger.reserve(f"t/w{i}", namespace="t", local_queue="lq", cluster_queue="cq",
                           usage={("a", "cpu"): 1000}, now=float(i))  # fmt: skip
        for i in range(0, 20, 3):
            ledger.release(f"t/w{i}", float(i + 10))
    a, b = (ledger.intervals() for ledger in ledgers)
    assert a == b


class _Counting(MemoryUsageStore):
    """An in-memory store that records the size of each write it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def put_many(self, intervals: Sequence[UsageInterval]) -> None:
        self.writes.append(len(intervals))
        super().put_many(intervals)


def test_puts_gather_into_one_write_and_a_read_does_not_wait_for_the_gathering() -> None:
    inner = _Counting()
    store = WriteBehindUsageStore(inner, gather=600.0)  # never over unless a read ends it
    try:
        store.put(interval(0))
        time.sleep(0.05)  # the writer wakes for the first put: it waits for more, writes none
        for i in range(1, 50):
            store.put(interval(i))
        assert len(store.open_intervals()) == 50  # the read's flush ends the gathering at once
        assert inner.writes == [50]
    finally:
        store.close()
