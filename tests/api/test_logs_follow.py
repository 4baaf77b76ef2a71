"""Following quiet pods' logs holds no worker thread (issue 17, item 3).

Each open ``.../logs?follow=true`` used to block a worker thread in ``time.sleep`` between reads,
so 45 follows of a quiet pod took all 40 of them and every other call that needs one (lists,
creates) waited until the follows ended. A runtime whose pod never writes is registered by name;
with 60 follows open, a list still answers, and the follows still stream what the pod writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from gpuaas.api.testing import serve_in_thread
from gpuaas.runtimes import RuntimeOptions, registry
from gpuaas.runtimes.logs import LogFollower
from gpuaas.server import Server, ServerOptions, build
from gpuaas.testing.fake_runtime import FakeRuntime

LOGS = "/apis/gpuaas.dev/v1alpha1/namespaces/team-a/workloads/quiet/logs"


class QuietRuntime(FakeRuntime):
    """A fake whose every workload has one pod that writes only when the test writes its log."""

    log: Path
    alive: threading.Event

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        return LogFollower({"p": self.log}, self.alive.is_set)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, QuietRuntime]]:
    made: list[QuietRuntime] = []

    def create(options: RuntimeOptions) -> QuietRuntime:
        rt = QuietRuntime(options.state_dir, options.node.gpus)
        rt.log, rt.alive = tmp_path / "pod.log", threading.Event()
        rt.log.write_bytes(b"")
        rt.alive.set()
        made.append(rt)
        return rt

    registry.register("quiet", create, "a test runtime whose pods never write")
    try:
        srv = build(ServerOptions(tmp_path / "data", runtime="quiet"), say=lambda _: None)
        try:
            yield srv, made[0]
        finally:
            made[0].alive.clear()
            srv.close()
    finally:
        registry.unregister("quiet")


def test_open_follows_leave_threads_for_everyone_else(
    server: tuple[Server, QuietRuntime],
) -> None:
    srv, runtime = server
    web = serve_in_thread(
        lambda port: uvicorn.Config(srv.app, host="127.0.0.1", port=port, log_level="error")
    )
    token = srv.admin_token_path.read_text().strip()
    auth = {"Authorization": f"Bearer {token}"}
    base = f"http://127.0.0.1:{web.port}"
    follows: list[httpx.Response] = []
    clients = [httpx.Client(base_url=base, headers=auth, timeout=30) for _ in range(60)]
    try:
        for c in clients:
            resp = c.send(c.build_request("GET", LOGS, params={"follow": "true"}), stream=True)
            assert resp.status_code == 200
            follows.append(resp)
        with httpx.Client(base_url=base, headers=auth, timeout=20) as admin:
            # Before the fix this waited for a worker thread that never came back (timeout).
            r = admin.get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
            assert r.status_code == 200
        with runtime.log.open("ab") as fh:
            fh.write(b"hello\n")
        lines = follows[0].iter_lines()
        assert next(lines) == "hello"
        runtime.alive.clear()
        assert list(lines) == []  # the pod ended: the follow ends
    finally:
        for resp in follows:
            resp.close()
        for c in clients:
            c.close()
        web.stop()
