"""The Kueue-derived conformance sample (../shared/conformance-sample), one test per file.

The folder lives outside the repository. ``GPUAAS_CONFORMANCE_DIR`` names it explicitly and then
it is required (CI sets it where the folder exists); otherwise ``../shared/conformance-sample`` is
used when present, and the tests skip with the reason when it is not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuaas.sim.files import expand_paths
from gpuaas.sim.runner import run_file

REPO = Path(__file__).resolve().parent.parent
_EXPLICIT = os.environ.get("GPUAAS_CONFORMANCE_DIR")
SAMPLE_DIR = Path(_EXPLICIT) if _EXPLICIT else REPO.parent / "shared" / "conformance-sample"
FILES = expand_paths([SAMPLE_DIR]) if SAMPLE_DIR.is_dir() else []


def test_sample_folder_is_available() -> None:
    if _EXPLICIT and not SAMPLE_DIR.is_dir():
        pytest.fail(f"GPUAAS_CONFORMANCE_DIR={_EXPLICIT} is not a directory")
    if not SAMPLE_DIR.is_dir():
        pytest.skip(f"conformance sample not present at {SAMPLE_DIR} (set GPUAAS_CONFORMANCE_DIR)")
    assert FILES, f"no scenario file under {SAMPLE_DIR}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_conformance_case(path: Path) -> None:
    outcomes = run_file(path)
    assert outcomes
    for o in outcomes:
        assert o.error is None, o.error
        assert o.passed, [m for c in o.checks for m in c.mismatches]
