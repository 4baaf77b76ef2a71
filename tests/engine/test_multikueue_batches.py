"""A pass's writes to one worker go as one batch (``operations.run_batch`` on one pool thread):
each write's calls keep their order (a Job, or a RayCluster, is deleted at its own path before
the copy it owns, and a copy whose Job's delete failed is not deleted), a failed write fails alone, and the in-flight set wakes or
marks each write's workload as a write on its own did. Against a real HTTP server that records
what it was asked."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpuaas.engine.multikueue.operations import (
    CREATE_COPY,
    REMOVE,
    InFlight,
    Operation,
    run_batch,
)
from gpuaas.engine.multikueue.remote import JOBS, WORKLOADS, RemoteClient, Target

RAY = "/apis/ray.io/v1"


class _Records(BaseHTTPRequestHandler):
    """Answers every call but the delete of Job ``broken`` (500), and records each."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def _answer(self) -> None:
        with _Records.lock:
            _Records.seen.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status = 500 if self.path.endswith("/jobs/broken") else 200
        body = b'{"kind":"Status","message":"boom"}' if status == 500 else b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


def _ops(client: RemoteClient) -> list[Operation]:
    body = {"metadata": {"name": "new", "namespace": "ns"}}
    return [
        Operation(CREATE_COPY, "w1", "ns/new", client, body=body),
        Operation(REMOVE, "w1", "ns/broken", client, job=(JOBS, "jobs")),
        Operation(REMOVE, "w1", "ns/ok", client, job=(RAY, "rayclusters")),
        Operation(REMOVE, "w1", "ns/bare", client),
        Operation(REMOVE, "w1", "ns/quiet", client, wake=False),
    ]


def _serve() -> tuple[ThreadingHTTPServer, RemoteClient]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Records)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Records.seen = []
    return server, RemoteClient(Target(f"http://127.0.0.1:{server.server_address[1]}", "t", None))


def test_a_batch_keeps_each_writes_order_and_fails_each_apart() -> None:
    server, client = _serve()
    try:
        outcome = run_batch(_ops(client))
        assert [e is None for e in outcome] == [True, False, True, True, True]
        assert "500" in str(outcome[1])
        seen = _Records.seen
        job, copy = f"{JOBS}/namespaces/ns/jobs", f"{WORKLOADS}/namespaces/ns/workloads"
        ray = f"{RAY}/namespaces/ns/rayclusters"
        assert sorted(seen) == sorted([
            ("POST", f"{WORKLOADS}/namespaces/ns/workloads"),
            ("DELETE", f"{job}/broken"), ("DELETE", f"{ray}/ok"), ("DELETE", f"{copy}/ok"),
            ("DELETE", f"{copy}/bare"), ("DELETE", f"{copy}/quiet"),
        ])  # fmt: skip
        assert seen.index(("DELETE", f"{ray}/ok")) < seen.index(("DELETE", f"{copy}/ok"))
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def test_in_flight_wakes_and_marks_each_write_of_a_batch() -> None:
    server, client = _serve()
    pool = ThreadPoolExecutor(max_workers=2)
    woken: list[str] = []
    failed: list[str] = []
    flight = InFlight(pool, {}, woken.append, failed.append)
    try:
        ops = _ops(client)
        started = flight.submit_many([*ops, ops[0]])  # the same write twice: started once
        assert started == ops
        pool.shutdown(wait=True)
        # A created copy wakes nothing, nor a removal asked not to; a failed one is marked.
        assert sorted(woken) == ["ns/bare", "ns/ok"] and failed == ["ns/broken"]
        assert not any(flight.busy(op.verb, "w1", op.key) for op in ops)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
