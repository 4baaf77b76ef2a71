"""Dashboard fixtures: a real server process and headless Chromium.

The browser is Debian's chromium driven by Playwright; without either the browser tests skip
(or fail under GPUAAS_REQUIRE_SERVICES=1) through the shared ``require_service`` policy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_helpers import ARTIFACTS, CHROMIUM

from gpuaas.api.testing import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server on this node posing with four fake GPUs, so the GPU panel has telemetry."""
    srv = ServerProcess(tmp_path / "data", extra=("--runtime", "local", "--fake-gpus", "4"))
    try:
        yield srv.start()
    finally:
        srv.stop()  # graceful: the server stops its pods (a SIGKILL would orphan them)


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server with no GPU at all: the GPU panel falls back to quota."""
    srv = ServerProcess(tmp_path / "plain")
    try:
        yield srv.start()
    finally:
        srv.kill()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def browser(require_service: Callable[[str, bool, str], None]) -> Iterator[Any]:
    """A headless Chromium (one per test, closed after it)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        require_service("playwright", False, f"cannot import playwright: {exc}")
        raise AssertionError("unreachable") from exc
    require_service(
        "Chromium",
        CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK),
        f"{CHROMIUM} not found (apt-get install -y chromium)",
    )
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            b.close()
