"""Running a bench script as a user does (a plain module: the tests directories are not packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def run_bench(script: str, *args: str, timeout: float = 180) -> str:
    """``python bench/SCRIPT ARGS...``'s standard output; it must exit 0 within ``timeout``."""
    return subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout
