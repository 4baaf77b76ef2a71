"""Talking to a live ``gpuaas server`` process in the telemetry wiring tests: create any kind,
wait for a condition, run the CLI against it (a plain module: ``from live_server import post``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from gpuaas.api.testing import ServerProcess, object_path


def post(c: httpx.Client, doc: dict[str, Any]) -> httpx.Response:
    """Create ``doc`` at its kind's collection path (namespaced or cluster-scoped)."""
    return c.post(object_path(doc), json=doc)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy; a timeout names what never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def cli(srv: ServerProcess, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``gpuaas`` CLI as the admin, with a config file of its own under ``tmp``."""
    env = {
        **os.environ,
        "GPUAAS_SERVER": srv.url,
        "GPUAAS_TOKEN": srv.admin_token,
        "GPUAAS_CONFIG": str(tmp / "cli-config.json"),
    }
    code = "from gpuaas.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
