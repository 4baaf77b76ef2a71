"""Rendering of the chargeback and hoarding tables for ``gpuaas report usage`` / ``get hoarding``.

This module owns the output formats (a rich table, CSV, JSON) and the parsing of ``--since`` /
``--until``. It computes nothing (``accounting.usage_report`` and ``HoardingDetector.offenders``
do) and writes nowhere: every renderer returns a string for the CLI to print.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from gpuaas.telemetry.accounting import GroupBy, UsageRow
from gpuaas.telemetry.collectors import TelemetryInputError
from gpuaas.telemetry.hoarding import HoardingRow

FORMATS = ("table", "csv", "json")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_time(text: str, now: float, flag: str = "--since") -> float:
    """Seconds since the epoch from ``1714000000``, an ISO 8601 time, or ``24h``/``7d`` ago."""
    value = text.strip()
    match = _DURATION.match(value)
    if match:
        return now - float(match.group(1)) * _UNIT[match.group(2)]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TelemetryInputError(
            f"report usage: {flag}: not a time: {text!r} "
            "(examples: 1714000000, 2024-05-01T00:00:00Z, 24h, 7d)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _round(value: float) -> float:
    return round(value, 4)


def render_usage(rows: Sequence[UsageRow], by: GroupBy, fmt: str, currency: str = "USD") -> str:
    if fmt == "json":
        return json.dumps(
            {
                "by": by.value,
                "currency": currency,
                "rows": [
                    {k: _round(v) if isinstance(v, float) else v for k, v in r.to_dict(by).items()}
                    for r in rows
                ],
            },
            indent=2,
        )
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [
                by.value,
                "gpu_hours",
                "cpu_core_hours",
                "memory_gb_hours",
                f"cost_{currency}",
                "wasted_gpu_hours",
            ]
        )
        for r in rows:
            values = (r.gpu_hours, r.cpu_core_hours, r.memory_gb_hours, r.cost, r.wasted_gpu_hours)
            writer.writerow([r.group, *(f"{_round(v)}" for v in values)])
        return out.getvalue()
    if fmt != "table":
        raise TelemetryInputError(
            f"report usage: -o: unknown format {fmt!r} (allowed: {'|'.join(FORMATS)})"
        )
    table = Table(box=None, pad_edge=False)
    for name in (
        by.value.upper(),
        "GPU-HOURS",
        "CPU-CORE-HOURS",
        "MEMORY-GB-HOURS",
        f"COST ({currency})",
        "WASTED-GPU-HOURS",
    ):
        table.add_column(name, justify="left" if name == by.value.upper() else "right")
    for r in rows:
        table.add_row(
            r.group,
            f"{r.gpu_hours:.2f}",
            f"{r.cpu_core_hours:.2f}",
            f"{r.memory_gb_hours:.2f}",
            f"{r.cost:.2f}",
            f"{r.wasted_gpu_hours:.2f}",
        )
    if rows:
        table.add_row(
            "TOTAL",
            f"{sum(r.gpu_hours for r in rows):.2f}",
            f"{sum(r.cpu_core_hours for r in rows):.2f}",
            f"{sum(r.memory_gb_hours for r in rows):.2f}",
            f"{sum(r.cost for r in rows):.2f}",
            f"{sum(r.wasted_gpu_hours for r in rows):.2f}",
        )
    return _print(table)


def render_hoarding(rows: Sequence[HoardingRow], fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps({"items": [r.to_dict() for r in rows]}, indent=2)
    if fmt != "table":
        raise TelemetryInputError(f"get hoarding: -o: unknown format {fmt!r} (allowed: table|json)")
    if not rows:
        return "No hoarding workloads.\n"
    table = Table(box=None, pad_edge=False)
    for name in (
        "NAMESPACE",
        "WORKLOAD",
        "CLUSTERQUEUE",
        "GPUS",
        "IDLE",
        "WASTED-GPU-HOURS",
        "ACTION",
        "IDLE-EVICTIONS",
        "STATE",
    ):
        table.add_column(name)
    for r in rows:
        table.add_row(
            r.namespace,
            r.workload,
            r.cluster_queue,
            str(r.gpus),
            f"{r.idle_seconds / 60:.0f}m",
            f"{r.wasted_gpu_hours:.2f}",
            r.action.value,
            str(r.idle_evictions),
            r.state,
        )
    return _print(table)


def _print(table: Table) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None, force_terminal=False)
    console.print(table)
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()
