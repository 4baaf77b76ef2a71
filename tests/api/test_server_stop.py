"""Stopping the server with streams open (issue 17, item 11): a watch and a dashboard feed that
are open when SIGTERM arrives end cleanly at once, the clients read a complete response, and the
server logs no CancelledError traceback (it used to wait out its graceful timeout, then cancel
them with one traceback each)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from gpuaas.api.testing import ServerProcess

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


def test_sigterm_ends_open_watches_cleanly(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", extra=("--runtime", "none")).start()
    ended: list[str] = []
    opened = threading.Barrier(3)

    def watch(path: str) -> None:
        with srv.client() as c, c.stream("GET", path, timeout=30) as r:
            opened.wait()
            try:
                for _ in r.iter_bytes():
                    pass
                ended.append("clean")
            except httpx.HTTPError as exc:
                ended.append(f"broken: {exc!r}")

    threads = [
        threading.Thread(target=watch, args=(f"{KUEUE}/workloads?watch=true",)),
        threading.Thread(target=watch, args=(f"{KUEUE}/clusterqueues?watch=true",)),
    ]
    try:
        for t in threads:
            t.start()
        opened.wait(timeout=30)
        srv.stop()
        for t in threads:
            t.join(timeout=30)
    finally:
        srv.kill()
    assert ended == ["clean", "clean"]
    log = srv.log_path.read_text()
    assert "Traceback" not in log and "CancelledError" not in log, log
    assert "ERROR" not in log, log
