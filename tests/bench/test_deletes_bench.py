"""``bench/deletes.py`` deletes every workload it made, in waves, and prints its figures."""

from __future__ import annotations

import re

from bench_run import run_bench


def test_deletes_bench_prints_its_figures() -> None:
    out = run_bench("deletes.py", "--workloads", "40", "--clients", "8")
    lines = out.splitlines()
    assert lines[0] == "Deletes: 40 admitted Workloads deleted from 8 connections at once", out
    assert lines[1].strip().startswith("machine speed:")
    assert re.fullmatch(r"  \d+ deletes/s; a wave of 8 answered in p50 [\d.]+ ms, p99 [\d.]+ ms",
                        lines[2]), out  # fmt: skip
    assert re.fullmatch(r"  server CPU per delete: [\d.]+ ms \(user [\d.]+, system [\d.]+\)",
                        lines[3]), out  # fmt: skip
