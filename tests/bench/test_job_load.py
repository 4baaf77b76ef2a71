"""``bench/job_load.py``, the load generator of ``bench/multicluster.py``, against a stub server.

What the figures rest on: every Job is posted exactly once whatever the generator, its send time
is what comes back, and in open loop (``rate``) each send also says how far behind its due time it
went. How late is not asserted (no wall-clock assertions); that it is measured is.
"""

from __future__ import annotations

import json
import queue
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import job_load


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}


class _Stub(BaseHTTPRequestHandler):
    posted: Counter[str] = Counter()
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.posted[body["metadata"]["name"]] += 1
        self._answer(201)

    def do_GET(self) -> None:  # wrk's check of the script, or a reconnect
        self._answer(200)

    def _answer(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    _Stub.posted = Counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
@pytest.mark.parametrize("rate", [0.0, 400.0], ids=["burst", "open-loop"])
def test_wrk_posts_each_job_once_and_times_it(stub: str, rate: float) -> None:
    n = 13  # not a multiple of the connections or threads: shares differ in size
    load = job_load.run_wrk(stub, "token", _job, n, 4, lambda: True, 20.0, rate)
    names = job_load.names(n)
    assert dict(_Stub.posted) == dict.fromkeys(names, 1)
    assert sorted(load.sent) == names
    assert load.errors == 0
    assert len(load.late) == (n if rate else 0)


@pytest.mark.parametrize("rate", [0.0, 400.0], ids=["burst", "open-loop"])
def test_a_fallback_client_posts_its_share_once_and_times_it(stub: str, rate: float) -> None:
    """One of the fallback's client processes, run here (a spawned process would leave
    multiprocessing's resource tracker behind, a child the runtime tests count as an orphan)."""
    names = job_load.names(13)
    out: queue.Queue[Any] = queue.Queue()
    job_load._client_proc(stub, "token", _job, names, 3, out, rate, time.monotonic())
    sent, _, errors, late = out.get_nowait()
    assert dict(_Stub.posted) == dict.fromkeys(names, 1)
    assert sorted(sent) == names
    assert errors == 0
    assert len(late) == (len(names) if rate else 0)
