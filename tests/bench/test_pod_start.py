"""``bench/pod_start.py`` runs both ways a pod's leader starts and prints a line for each."""

from __future__ import annotations

from pathlib import Path

from bench_run import run_bench


def test_pod_start_bench_prints_both_modes(tmp_path: Path) -> None:
    out = run_bench(
        "pod_start.py", "--pods", "3", "--repeat", "1", "--dir", str(tmp_path), timeout=120
    )
    lines = out.splitlines()
    assert lines[1].strip().startswith("machine speed:")
    assert lines[2].strip().startswith(f"disk: a new file in {tmp_path} costs "), out
    assert lines[3].strip().startswith("launcher: ") and "pods/s" in lines[3]
    assert lines[4].strip().startswith("a Python per pod: ")
    assert list(tmp_path.iterdir()) == []  # its runtime directories are gone
