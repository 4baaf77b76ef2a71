"""The UsageStore contract, run against every adapter: memory, SQLite and PostgreSQL.

PostgreSQL cases (marked ``postgres``) each get a throw-away schema and follow the service policy
of ``tests/conftest.py``: skipped with the reason when PostgreSQL is unreachable, failed instead
under ``GPUAAS_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from gpuaas.store.testing import drop_schema, postgres_schema_url, postgres_unavailable
from gpuaas.telemetry import MemoryUsageStore, SqliteUsageStore, UsageInterval, UsageStore
from gpuaas.telemetry.usage_store import UsageStoreError, open_usage_store
from gpuaas.telemetry.usage_store_postgres import PostgresUsageStore, split_schema

RequireService = Callable[[str, bool, str], None]
POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


def interval(key: str, start: float, end: float | None) -> UsageInterval:
    ns = key.split("/")[0]
    return UsageInterval(
        key, ns, "lq", "cq", start, end, (("h100", "nvidia.com/gpu", 2), ("default", "cpu", 500))
    )


@pytest.fixture
def pg_url(require_service: RequireService) -> Iterator[str]:
    """A URL with a fresh schema, dropped after the test."""
    reason = postgres_unavailable()
    require_service("PostgreSQL", reason is None, reason or "")
    url = postgres_schema_url()
    try:
        yield url
    finally:
        drop_schema(url)


@pytest.fixture(params=["memory", "sqlite-memory", "sqlite-file", POSTGRES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UsageStore]:
    factories: dict[str, Callable[[], UsageStore]] = {
        "memory": MemoryUsageStore,
        "sqlite-memory": lambda: SqliteUsageStore(":memory:"),
        "sqlite-file": lambda: SqliteUsageStore(tmp_path / "u.db"),
        "postgres": lambda: PostgresUsageStore(request.getfixturevalue("pg_url")),
    }
    made = factories[request.param]()
    yield made
    if isinstance(made, SqliteUsageStore | PostgresUsageStore):
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


def test_order_is_start_then_key_by_code_point(store: UsageStore) -> None:
    # Same start: ordered by key as Python compares strings (PostgreSQL: COLLATE "C").
    keys = ["ns/b", "NS/a", "ns-a/x", "ns/a", "ns_a/x"]
    for k in keys:
        store.put(interval(k, 5.0, None))
    store.put(interval("zz/first", 1.0, 2.0))
    got = [i.workload_key for i in store.intervals(None, None)]
    assert got == ["zz/first", *sorted(keys)]


def test_times_and_quantities_round_trip_exactly(store: UsageStore) -> None:
    start, end = 1_700_000_000.123456789, 1_700_003_600.987654321
    big = UsageInterval("team/x", "team", "lq", "cq", start, end, (("a100", "memory", 2**40 + 3),))
    store.put(big)
    assert store.intervals(None, None) == [big]
    assert store.intervals(end, None) == []  # the stored end is exactly ``end``


@pytest.mark.parametrize("kind", ["sqlite-file", POSTGRES])
def test_intervals_survive_reopening(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target: str | Path = (
        request.getfixturevalue("pg_url") if kind == "postgres" else tmp_path / "p.db"
    )
    first = open_usage_store(target)
    assert isinstance(first, SqliteUsageStore | PostgresUsageStore)
    first.put(interval("ns/a", 1.5, None))
    first.put(interval("ns/b", 0.5, 9.0))
    first.close()
    second = open_usage_store(target)
    assert isinstance(second, SqliteUsageStore | PostgresUsageStore)
    try:
        assert second.open_intervals() == [interval("ns/a", 1.5, None)]
        assert second.intervals(None, None) == [
            interval("ns/b", 0.5, 9.0),
            interval("ns/a", 1.5, None),
        ]
    finally:
        second.close()


def test_open_usage_store_picks_the_adapter(tmp_path: Path) -> None:
    s = open_usage_store(tmp_path / "u.db")
    assert isinstance(s, SqliteUsageStore)
    s.close()
    with pytest.raises(UsageStoreError, match="schema 'x-y' is not a plain identifier"):
        open_usage_store("postgresql://postgres@127.0.0.1:5432/test?schema=x-y")


def test_unreachable_postgres_is_a_clear_error() -> None:
    url = "postgresql://postgres@127.0.0.1:1/test?schema=s"
    with pytest.raises(UsageStoreError, match=r"cannot open PostgreSQL at postgresql://.*:1/test"):
        PostgresUsageStore(url)


@pytest.mark.postgres
def test_postgres_table_lives_in_the_urls_schema(pg_url: str) -> None:
    a = PostgresUsageStore(pg_url)
    other = postgres_schema_url()
    b = PostgresUsageStore(other)
    try:
        a.put(interval("ns/a", 1.0, None))
        assert b.intervals(None, None) == []
        conninfo, schema = split_schema(pg_url)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name = 'usage_intervals'",
                (schema,),
            ).fetchone()
        assert row == (1,)
    finally:
        a.close()
        b.close()
        drop_schema(other)


@pytest.mark.postgres
def test_postgres_reconnects_after_its_connection_is_killed(pg_url: str) -> None:
    s = PostgresUsageStore(pg_url)
    try:
        s.put(interval("ns/a", 1.0, None))
        conninfo, _ = split_schema(pg_url)
        with psycopg.connect(conninfo, autocommit=True) as admin:
            pids = [r[0] for r in s._run("pid", "SELECT pg_backend_pid()", ())]
            admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
        s.put(interval("ns/a", 1.0, 4.0))  # on a fresh connection
        assert s.intervals(None, None) == [interval("ns/a", 1.0, 4.0)]
    finally:
        s.close()
