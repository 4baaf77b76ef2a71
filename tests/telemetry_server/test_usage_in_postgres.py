"""With ``--db postgresql://...`` a real server keeps its usage ledger in PostgreSQL, not DATA_DIR.

A low-priority workload is admitted and preempted by a high-priority one; the usage totals up to
a fixed instant are read, the server is stopped, the rows are found in the URL's schema (and no
``usage.db`` in the data dir), and a server started on the same database with an empty data dir
reports the same totals.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from telemetry_docs import cluster_queue, flavor, local_queue, namespace, priority_class, workload

from gpuaas.api.testing import ServerProcess, object_path
from gpuaas.store.testing import drop_schema, postgres_schema_url, postgres_unavailable
from gpuaas.telemetry.usage_store_postgres import split_schema

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

EXTRA = ("--runtime", "none", "--fake-gpus", "4", "--telemetry-interval", "0.2", "--tick", "0.1")
USAGE = "/apis/gpuaas.dev/v1alpha1/usage"


@pytest.fixture
def pg_url(require_service: Callable[[str, bool, str], None]) -> Iterator[str]:
    reason = postgres_unavailable()
    require_service("PostgreSQL", reason is None, reason or "")
    url = postgres_schema_url()
    try:
        yield url
    finally:
        drop_schema(url)


def post(c: httpx.Client, doc: dict[str, Any]) -> None:
    r = c.post(object_path(doc), json=doc)
    assert r.status_code == 201, (doc["metadata"], r.text)


def event_time(c: httpx.Client, ns: str, name: str, reason: str) -> float:
    deadline = time.monotonic() + 20.0
    while True:
        items = c.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
        times = [
            dt.datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
            for e in items
            if e["reason"] == reason and e["involvedObject"]["name"] == name
        ]
        if times:
            return times[0]
        assert time.monotonic() < deadline, f"no {reason} event for {ns}/{name}"
        time.sleep(0.1)


def totals(c: httpx.Client, until: float) -> dict[str, float]:
    r = c.get(USAGE, params={"until": repr(until), "by": "namespace"})
    assert r.status_code == 200, r.text
    return {row["group"]: row["gpuHours"] for row in r.json()["rows"]}


def test_usage_totals_survive_a_restart_in_postgres(pg_url: str, tmp_path: Path) -> None:
    # 1. dev (low) is admitted on all 4 GPUs; prod (high) preempts it
    first = ServerProcess(tmp_path / "first", pg_url, extra=EXTRA)
    with first, first.client() as c:
        for doc in (
            namespace("team-a"),
            namespace("team-b"),
            flavor(),
            priority_class("low", 1),
            priority_class("high", 100),
            cluster_queue("shared-cq", 4, preempt=True),
            local_queue("team-a", "lq", "shared-cq"),
            local_queue("team-b", "lq", "shared-cq"),
            workload("team-b", "dev", queue="lq", gpus=4, priority=("low", 1)),
        ):
            post(c, doc)
        t_admit = event_time(c, "team-b", "dev", "QuotaReserved")
        post(c, workload("team-a", "prod", queue="lq", gpus=4, priority=("high", 100)))
        t_preempt = event_time(c, "team-b", "dev", "EvictedDueToPreempted")
        assert event_time(c, "team-a", "prod", "QuotaReserved") == t_preempt
        until = t_preempt + 100.0
        want = {"team-b": 4 * (t_preempt - t_admit) / 3600, "team-a": 4 * 100.0 / 3600}
        assert totals(c, until) == pytest.approx(want, rel=1e-4)  # eventTime: MicroTime (µs)

    # 2. the ledger is in the URL's schema, not in the data dir
    assert not (tmp_path / "first" / "usage.db").exists()
    conninfo, schema = split_schema(pg_url)
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            f'SELECT workload_key, "end" IS NULL FROM "{schema}".usage_intervals '
            "ORDER BY workload_key"
        ).fetchall()
    assert rows == [("team-a/prod", True), ("team-b/dev", False)]

    # 3. a new server on the same database, with an empty data dir, reports the same totals
    second = ServerProcess(tmp_path / "second", pg_url, extra=EXTRA)
    with second, second.client() as c:
        assert totals(c, until) == pytest.approx(want, rel=1e-4)  # eventTime: MicroTime (µs)
    assert not (tmp_path / "second" / "usage.db").exists()
