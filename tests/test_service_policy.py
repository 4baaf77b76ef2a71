"""The outside-service policy of tests/conftest.py, checked by running pytest on it."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

INNER = """
def test_needs_db(require_service):
    require_service("PostgreSQL", False, "connection refused on 127.0.0.1:5432")

def test_has_db(require_service):
    require_service("PostgreSQL", True, "")
"""


@pytest.mark.parametrize(
    ("env", "outcome", "text"),
    [
        (None, {"skipped": 1, "passed": 1}, "PostgreSQL not available: connection refused"),
        ("0", {"skipped": 1, "passed": 1}, "PostgreSQL not available: connection refused"),
        ("1", {"failed": 1, "passed": 1}, "PostgreSQL is required (GPUAAS_REQUIRE_SERVICES=1)"),
    ],
)
def test_missing_service_skips_or_fails(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    env: str | None,
    outcome: dict[str, int],
    text: str,
) -> None:
    if env is None:
        monkeypatch.delenv("GPUAAS_REQUIRE_SERVICES", raising=False)
    else:
        monkeypatch.setenv("GPUAAS_REQUIRE_SERVICES", env)
    pytester.makeconftest(CONFTEST.read_text().replace('pytest_plugins = ["pytester"]', ""))
    pytester.makepyfile(INNER)
    result = pytester.runpytest_subprocess("-rsf")
    result.assert_outcomes(**outcome)
    assert text in result.stdout.str()


def test_leftover_child_process_fails_the_session(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text().replace('pytest_plugins = ["pytester"]', ""))
    pytester.makepyfile(
        """
import subprocess, sys

def test_leaks():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
"""
    )
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "tests left child processes running" in result.stdout.str()
