"""The test harness's own promise: ``ServerProcess.start`` returns only when the server that
answers is the one it started. Under xdist a free port picked by one test can be bound by
another test's server first; ``/healthz`` alone then answered for the wrong server, and CI
failed reading an admin token that was never written."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gpuaas.api import testing
from gpuaas.api.testing import ServerProcess, free_port, serve_in_thread


def test_a_picked_port_another_server_holds_is_replaced(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "a") as a:
        b = ServerProcess(tmp_path / "b")
        b.port = a.port  # as if another server bound b's free port between pick and start
        with b:
            assert b.port != a.port
            with b.client() as c:
                assert c.get("/api/v1/namespaces").status_code == 200
            assert b.admin_token != a.admin_token


def test_a_named_port_another_server_holds_is_an_error(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "a") as a:
        b = ServerProcess(tmp_path / "b", port=a.port)
        with pytest.raises(RuntimeError, match="exited"):
            b.start(timeout=30)
        b.kill()


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def test_serve_in_thread_replaces_a_port_taken_first(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = iter([port])  # the first pick is the taken port, as a race would make it
        monkeypatch.setattr(testing, "free_port", lambda: next(picks, None) or free_port())
        web = serve_in_thread(
            lambda p: uvicorn.Config(_hello, host="127.0.0.1", port=p, log_level="critical")
        )
        try:
            assert web.port != port
            assert httpx.get(f"http://127.0.0.1:{web.port}/").text == "hello"
        finally:
            web.stop()
