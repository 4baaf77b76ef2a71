"""``bench/dashboard_push.py`` sees every create reach an open dashboard stream and prints how
soon (the figure, not asserted: no wall-clock assertions)."""

from __future__ import annotations

import re

from bench_run import run_bench


def test_dashboard_push_bench_prints_its_figures() -> None:
    out = run_bench("dashboard_push.py", "--changes", "5", "--streams", "2", "--gap", "0.05")
    lines = out.splitlines()
    assert lines[0] == "dashboard push: 5 creates, 2 stream(s) open, up to 0.05 s apart", out
    assert lines[1].strip().startswith("machine speed:")
    assert re.fullmatch(
        r"  create -> patch with the row: p50 \d+ ms, p99 \d+ ms, max \d+ ms \(promise: well "
        r"inside 1 s; a refresh without a change comes every 5 s\)",
        lines[2],
    ), out
