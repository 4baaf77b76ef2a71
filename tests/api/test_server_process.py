"""The test harness's own promise: ``ServerProcess.start`` returns only when the server that
answers is the one it started. Under xdist a free port picked by one test can be bound by
another test's server first; ``/healthz`` alone then answered for the wrong server, and CI
failed reading an admin token that was never written."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.api.testing import ServerProcess


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
