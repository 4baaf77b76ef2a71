"""Kueue-derived scenario cases (tests/scenarios/kueue), one test per file, run in-process.

Each file transcribes a case from Kueue's own unit tests (TestPreemption, TestHierarchicalPreemptions,
TestSchedule) into the settled-state scenario format, so gpuaas is measured against Kueue's decisions
rather than against its own. Cases gpuaas gets wrong are listed in ``KNOWN_FAILURES`` with the
diagnosis; the markers are strict so that a fix that makes one pass forces its removal here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.sim.files import expand_paths
from gpuaas.sim.runner import run_file

CASES_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "kueue"
FILES = expand_paths([CASES_DIR])

# file name -> why gpuaas disagrees with Kueue (remove an entry once the engine is fixed).
KNOWN_FAILURES: dict[str, str] = {}


def _param(path: Path) -> object:
    reason = KNOWN_FAILURES.get(path.name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.name, marks=marks)


def test_cases_are_present() -> None:
    assert len(FILES) >= 40, f"expected the Kueue-derived cases under {CASES_DIR}"
    stale = set(KNOWN_FAILURES) - {p.name for p in FILES}
    assert not stale, f"KNOWN_FAILURES names files that do not exist: {sorted(stale)}"


@pytest.mark.parametrize("path", [_param(p) for p in FILES])
def test_kueue_case(path: Path) -> None:
    outcomes = run_file(path)
    assert outcomes
    for o in outcomes:
        assert o.error is None, o.error
        assert o.passed, [m for c in o.checks for m in c.mismatches]
