"""Usage accounting against hand-computed totals across a preemption, and its report formats."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Admission, PodSetAssignment, WorkloadState
from gpuaas.telemetry import (
    FlavorPrice,
    GroupBy,
    SqliteUsageStore,
    TelemetryInputError,
    UsageLedger,
    parse_time,
    render_usage,
    usage_report,
)

GIB = 2**30
PRICES = {
    "h100": FlavorPrice(gpu_hour=2.5),
    "default": FlavorPrice(cpu_core_hour=0.04, memory_gb_hour=0.005),
}
VICTIM_USAGE = {
    ("h100", "nvidia.com/gpu"): 2,
    ("default", "cpu"): 8000,
    ("default", "memory"): 64 * GIB,
}
PREEMPTOR_USAGE = {("h100", "nvidia.com/gpu"): 2, ("default", "cpu"): 4000}


def preemption_story(ledger: UsageLedger) -> None:
    """team-b/train admitted at 0, preempted by team-a/serve at 1800 (which runs to 3600),
    readmitted at 3600, finished at 7200."""
    victim = {"namespace": "team-b", "local_queue": "lq-b", "cluster_queue": "team-b-cq"}
    ledger.reserve("team-b/train", usage=VICTIM_USAGE, now=0.0, **victim)
    assert ledger.release("team-b/train", 1800.0) is not None
    ledger.reserve(
        "team-a/serve",
        namespace="team-a",
        local_queue="lq-a",
        cluster_queue="team-a-cq",
        usage=PREEMPTOR_USAGE,
        now=1800.0,
    )
    ledger.release("team-a/serve", 3600.0)
    ledger.reserve("team-b/train", usage=VICTIM_USAGE, now=3600.0, **victim)
    ledger.release("team-b/train", 7200.0)


def totals(
    ledger: UsageLedger, by: str, **kw: float
) -> dict[str, tuple[float, float, float, float]]:
    rows = usage_report(
        ledger.intervals(), until=kw.pop("until", 7200.0), by=by, prices=PRICES, **kw
    )
    return {r.group: (r.gpu_hours, r.cpu_core_hours, r.memory_gb_hours, r.cost) for r in rows}


def test_totals_across_a_preemption_are_exact() -> None:
    ledger = UsageLedger()
    preemption_story(ledger)
    # victim: held 1800 s + 3600 s = 1.5 h; preemptor: 0.5 h
    assert totals(ledger, "namespace") == {
        "team-a": pytest.approx((1.0, 2.0, 0.0, 2.5 + 0.08)),
        "team-b": pytest.approx((3.0, 12.0, 96.0, 7.5 + 0.48 + 0.48)),
    }
    assert totals(ledger, "clusterqueue").keys() == {"team-a-cq", "team-b-cq"}
    assert totals(ledger, "localqueue").keys() == {"team-a/lq-a", "team-b/lq-b"}
    assert totals(ledger, "flavor") == {
        "default": pytest.approx((0.0, 14.0, 96.0, 0.56 + 0.48)),
        "h100": pytest.approx((4.0, 0.0, 0.0, 10.0)),
    }


def test_since_until_clip_the_intervals() -> None:
    ledger = UsageLedger()
    preemption_story(ledger)
    # team-b: [1000, 1800] + [3600, 4000] = 1200 s = 1/3 h
    got = totals(ledger, "namespace", since=1000.0, until=4000.0)
    assert got["team-b"][0] == pytest.approx(2 / 3)
    assert got["team-a"][0] == pytest.approx(1.0)
    h = 1000 / 3600  # [5000, 6000] lies inside the second admission
    assert totals(ledger, "namespace", since=5000.0, until=6000.0) == {
        "team-b": pytest.approx((2 * h, 8 * h, 64 * h, 2 * h * 2.5 + 8 * h * 0.04 + 64 * h * 0.005))
    }


def test_open_interval_is_charged_up_to_until() -> None:
    ledger = UsageLedger()
    ledger.reserve(
        "ns/w",
        namespace="ns",
        local_queue="lq",
        cluster_queue="cq",
        usage={("f", "gpu"): 4},
        now=0.0,
    )
    assert totals(ledger, "namespace", until=900.0)["ns"][0] == pytest.approx(1.0)


def test_sqlite_totals_survive_a_restart_mid_run(tmp_path: Path) -> None:
    path = tmp_path / "usage.db"
    store = SqliteUsageStore(path)
    ledger = UsageLedger(store)
    victim = {"namespace": "team-b", "local_queue": "lq-b", "cluster_queue": "team-b-cq"}
    ledger.reserve("team-b/train", usage=VICTIM_USAGE, now=0.0, **victim)
    ledger.release("team-b/train", 1800.0)
    ledger.reserve("team-b/train", usage=VICTIM_USAGE, now=3600.0, **victim)
    store.close()  # the server stops while the workload runs

    store = SqliteUsageStore(path)
    ledger = UsageLedger(store)  # reloads the open interval
    ledger.reserve("team-b/train", usage=VICTIM_USAGE, now=3600.0, **victim)  # restore: no-op
    ledger.release("team-b/train", 7200.0)
    store.close()

    ledger = UsageLedger(SqliteUsageStore(path))
    assert totals(ledger, "namespace") == {"team-b": pytest.approx((3.0, 12.0, 96.0, 8.46))}


def test_reserve_admission_reads_the_engine_record() -> None:
    wl = Workload(
        "team-b", "train", "lq-b", [PodSet("main", 2, {"nvidia.com/gpu": 1, "cpu": 4000})]
    )
    state = WorkloadState(wl, uid=1, created_at=0.0, priority=0, cluster_queue="team-b-cq")
    state.admission = Admission(
        "team-b-cq",
        [
            PodSetAssignment(
                "main",
                {"nvidia.com/gpu": "h100", "cpu": "default"},
                2,
                {"nvidia.com/gpu": 2, "cpu": 8000},
            )
        ],
    )
    state.admitted_at = 100.0
    ledger = UsageLedger()
    interval = ledger.reserve_admission(state, now=150.0)
    assert interval.start == 100.0 and interval.local_queue == "lq-b"
    assert interval.usage == (("default", "cpu", 8000), ("h100", "nvidia.com/gpu", 2))
    state.admission = None
    with pytest.raises(TelemetryInputError, match=r"Workload team-b/train: status\.admission"):
        ledger.reserve_admission(state, now=150.0)


def test_renderers() -> None:
    ledger = UsageLedger()
    preemption_story(ledger)
    rows = usage_report(ledger.intervals(), until=7200.0, by="namespace", prices=PRICES)
    table = render_usage(rows, GroupBy.NAMESPACE, "table", "EUR")
    assert "NAMESPACE" in table and "COST (EUR)" in table
    assert "team-b" in table and "3.00" in table and "8.46" in table and "TOTAL" in table
    parsed = list(csv.DictReader(io.StringIO(render_usage(rows, GroupBy.NAMESPACE, "csv"))))
    assert parsed[1] == {
        "namespace": "team-b",
        "gpu_hours": "3.0",
        "cpu_core_hours": "12.0",
        "memory_gb_hours": "96.0",
        "cost_USD": "8.46",
        "wasted_gpu_hours": "0.0",
    }
    data = json.loads(render_usage(rows, GroupBy.NAMESPACE, "json"))
    assert data["by"] == "namespace" and data["rows"][0]["gpuHours"] == 1.0
    with pytest.raises(TelemetryInputError, match="-o: unknown format 'yaml'"):
        render_usage(rows, GroupBy.NAMESPACE, "yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1714000000", 1714000000.0),
        ("24h", 100_000.0 - 86400),
        ("30m", 100_000.0 - 1800),
        ("2024-05-01T00:00:00Z", 1714521600.0),
        ("2024-05-01T00:00:00", 1714521600.0),
    ],
)
def test_parse_time(text: str, expected: float) -> None:
    assert parse_time(text, now=100_000.0) == expected


def test_bad_report_arguments() -> None:
    with pytest.raises(TelemetryInputError, match="--since: not a time: 'yesterday'"):
        parse_time("yesterday", 0.0)
    with pytest.raises(TelemetryInputError, match="--by: unknown 'team'"):
        usage_report([], until=1.0, by="team")
    with pytest.raises(TelemetryInputError, match="is after --until"):
        usage_report([], since=10.0, until=1.0)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.floats(0, 10_000),
            st.floats(1, 5_000),
            st.integers(1, 8),
            st.sampled_from(["h100", "l4"]),
        ),
        max_size=12,
    )
)
def test_every_grouping_sums_to_the_same_total(
    spans: list[tuple[str, float, float, int, str]],
) -> None:
    ledger = UsageLedger()
    for i, (ns, start, length, gpus, flavor) in enumerate(spans):
        key = f"{ns}/w{i}"
        usage = {(flavor, "nvidia.com/gpu"): gpus, ("default", "cpu"): 1000 * gpus}
        ledger.reserve(
            key, namespace=ns, local_queue="lq", cluster_queue=f"{ns}-cq", usage=usage, now=start
        )
        ledger.release(key, start + length)
    expected = sum(length * gpus for _, _, length, gpus, _ in spans) / 3600
    for by in GroupBy:
        rows = usage_report(ledger.intervals(), until=20_000.0, by=by)
        assert sum(r.gpu_hours for r in rows) == pytest.approx(expected)
        assert sum(r.cpu_core_hours for r in rows) == pytest.approx(expected)
