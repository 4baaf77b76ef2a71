"""GPU-hours wasted by idle holders (``telemetry.waste``): flagged stretches, clipped to the
report's window, summed per group, and merged into the usage rows."""

from __future__ import annotations

import pytest

from gpuaas.telemetry import GroupBy, UsageRow
from gpuaas.telemetry.waste import IdleStretch, WasteLog, wasted_gpu_hours, with_waste


def stretch(key: str, start: float, end: float, gpus: int = 1, **kw: str) -> IdleStretch:
    ns, _, _ = key.partition("/")
    fields = {"local_queue": "lq", "cluster_queue": "cq", "flavor": "h100"} | kw
    return IdleStretch(key, ns, gpus=gpus, start=start, end=end, **fields)


@pytest.mark.parametrize(
    ("stretches", "since", "until", "by", "expected"),
    [
        pytest.param([], None, 10_000, GroupBy.NAMESPACE, {}, id="nothing-idle"),
        pytest.param(
            [stretch("a/x", 0, 3600, gpus=2)],
            None,
            10_000,
            GroupBy.NAMESPACE,
            {"a": 2.0},
            id="two-gpus-one-hour",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600)],
            1800,
            10_000,
            GroupBy.NAMESPACE,
            {"a": 0.5},
            id="clipped-by-since",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600)],
            None,
            900,
            GroupBy.NAMESPACE,
            {"a": 0.25},
            id="clipped-by-until",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600)], 4000, 5000, GroupBy.NAMESPACE, {}, id="outside-window"
        ),
        pytest.param(
            [stretch("a/x", 0, 3600), stretch("a/y", 0, 1800), stretch("b/z", 0, 3600, gpus=4)],
            None,
            10_000,
            GroupBy.NAMESPACE,
            {"a": 1.5, "b": 4.0},
            id="summed-per-namespace",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600, cluster_queue="cq1"), stretch("b/z", 0, 3600)],
            None,
            10_000,
            GroupBy.CLUSTER_QUEUE,
            {"cq1": 1.0, "cq": 1.0},
            id="by-clusterqueue",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600)],
            None,
            10_000,
            GroupBy.LOCAL_QUEUE,
            {"a/lq": 1.0},
            id="by-localqueue",
        ),
        pytest.param(
            [stretch("a/x", 0, 3600, flavor="l4")],
            None,
            10_000,
            GroupBy.FLAVOR,
            {"l4": 1.0},
            id="by-flavor",
        ),
    ],
)
def test_wasted_gpu_hours(
    stretches: list[IdleStretch],
    since: float | None,
    until: float,
    by: GroupBy,
    expected: dict[str, float],
) -> None:
    got = wasted_gpu_hours(stretches, since=since, until=until, by=by)
    assert got == pytest.approx(expected)


def test_log_extends_open_stretches_and_closes_those_no_longer_flagged() -> None:
    log = WasteLog()
    log.observe([stretch("a/x", 0, 600)])
    log.observe([stretch("a/x", 0, 615), stretch("b/y", 100, 615)])
    log.observe([stretch("b/y", 100, 630)])  # a/x cleared (busy again, released or evicted)
    log.observe([stretch("a/x", 900, 1500), stretch("b/y", 100, 1500)])  # a/x flagged again
    by_key: dict[str, list[tuple[float, float]]] = {}
    for s in log.stretches():
        by_key.setdefault(s.workload_key, []).append((s.start, s.end))
    assert sorted(by_key["a/x"]) == [(0, 615), (900, 1500)]
    assert by_key["b/y"] == [(100, 1500)]


def test_with_waste_fills_rows_and_adds_groups_with_waste_only() -> None:
    rows = [UsageRow("a", 3.0, 1.0, 2.0, 7.5), UsageRow("c", 1.0, 0.0, 0.0, 0.0)]
    merged = with_waste(rows, {"a": 1.25, "b": 0.5})
    assert [(r.group, r.gpu_hours, r.wasted_gpu_hours) for r in merged] == [
        ("a", 3.0, 1.25),
        ("b", 0.0, 0.5),
        ("c", 1.0, 0.0),
    ]
