"""The hub's request/response calls to a worker (``remote.RemoteClient`` on kept-alive
``connections``): a real ``gpuaas server`` answers creates, gets, lists and deletes
as before; a connection the worker closed while it was idle is replaced without the caller
seeing it; a worker that refuses the connection or answers an error is a ``RemoteError`` that
says which call, where and why."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuaas.api.testing import ServerProcess, self_signed_cert
from gpuaas.engine.multikueue.remote import (
    JOBS,
    WORKLOADS,
    Answer,
    Call,
    RemoteClient,
    RemoteError,
    Target,
)
from gpuaas.testing.ports import refusing_port

ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def _copy(name: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "labels": {ORIGIN: "hub-a"}},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    }  # fmt: skip


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("w")).start()
    try:
        yield srv
    finally:
        srv.kill()


def test_writes_and_reads_on_a_gpuaas_worker(worker: ServerProcess) -> None:
    c = RemoteClient(Target(worker.url, worker.admin_token, None))
    try:
        c.create(WORKLOADS, "workloads", _copy("a"))
        c.create(WORKLOADS, "workloads", _copy("a"))  # a retried create: 409, taken as done
        got = c.get(WORKLOADS, "workloads", "default", "a")
        assert got is not None and got["metadata"]["labels"][ORIGIN] == "hub-a"
        items, rv = c.list_with_version(WORKLOADS, "workloads", ORIGIN, "hub-a")
        assert [i["metadata"]["name"] for i in items] == ["a"] and int(rv) > 0
        assert c.list_labelled(WORKLOADS, "workloads", ORIGIN, "hub-b") == []
        c.delete(WORKLOADS, "workloads", "default", "a")
        c.delete(WORKLOADS, "workloads", "default", "a")  # gone already: 404, taken as done
        assert c.get(WORKLOADS, "workloads", "default", "a") is None
        c.probe()
    finally:
        c.close()


def test_an_error_answer_names_the_call_and_the_reason(worker: ServerProcess) -> None:
    c = RemoteClient(Target(worker.url, "not-a-token", None))
    try:
        with pytest.raises(RemoteError) as exc:
            c.get(JOBS, "jobs", "default", "x")
        assert "GET /apis/batch/v1/namespaces/default/jobs/x: 401" in str(exc.value)
    finally:
        c.close()


def test_a_refused_connection_names_the_worker() -> None:
    with refusing_port() as port:
        c = RemoteClient(Target(f"http://127.0.0.1:{port}", "t", None))
        try:
            with pytest.raises(RemoteError) as exc:
                c.delete(WORKLOADS, "workloads", "default", "x")
            want = f"DELETE http://127.0.0.1:{port}{WORKLOADS}/namespaces/default/workloads/x"
            assert want in str(exc.value)
        finally:
            c.close()


class _ClosesIdle(BaseHTTPRequestHandler):
    """Answers 404 with keep-alive, then closes the connection once the answer is sent, as a
    server does with a connection idle past its keep-alive timeout."""

    protocol_version = "HTTP/1.1"
    seen: list[int] = []

    def do_DELETE(self) -> None:
        _ClosesIdle.seen.append(self.client_address[1])
        body = b'{"kind":"Status","message":"not found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def closes_idle() -> Iterator[RemoteClient]:
    """A client of a worker that closes every connection after its answer."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosesIdle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _ClosesIdle.seen = []
    c = RemoteClient(Target(f"http://127.0.0.1:{server.server_address[1]}", "t", None))
    try:
        yield c
    finally:
        c.close()
        server.shutdown()
        server.server_close()


def test_a_kept_connection_the_worker_closed_is_replaced(closes_idle: RemoteClient) -> None:
    for _ in range(3):  # each call after the first finds its kept connection closed
        closes_idle.delete(WORKLOADS, "workloads", "default", "x")
    assert len(_ClosesIdle.seen) == 3 and len(set(_ClosesIdle.seen)) == 3


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
def test_a_tls_worker_with_its_ca_inline_and_a_wrong_ca_refused(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path, "worker")
    other, _ = self_signed_cert(tmp_path, "other")
    srv = ServerProcess(
        tmp_path / "w", extra=("--tls-cert", str(cert), "--tls-key", str(key)), tls=True
    )
    good = bad = None
    try:
        srv.start()
        good = RemoteClient(Target(srv.url, srv.admin_token, cert.read_bytes()))
        good.create(WORKLOADS, "workloads", _copy("tls"))
        assert good.get(WORKLOADS, "workloads", "default", "tls") is not None
        bad = RemoteClient(Target(srv.url, srv.admin_token, other.read_bytes()))
        with pytest.raises(RemoteError) as exc:
            bad.get(WORKLOADS, "workloads", "default", "tls")
        assert srv.url in str(exc.value) and "CERTIFICATE_VERIFY_FAILED" in str(exc.value)
    finally:
        for c in (good, bad):
            if c is not None:
                c.close()
        srv.kill()


class _Chunked(BaseHTTPRequestHandler):
    """Answers a GET with a chunked body in three pieces, then one with ``Connection: close``."""

    protocol_version = "HTTP/1.1"
    seen: list[int] = []

    def do_GET(self) -> None:
        _Chunked.seen.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if len(_Chunked.seen) == 1:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b'{"metadata":', b'{"name":"x"},', b'"kind":"Workload"}'):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            body = b'{"metadata":{"name":"y"}}'
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_chunked_answer_is_read_whole_and_a_closing_one_not_kept() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chunked)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Chunked.seen = []
    c = RemoteClient(Target(f"http://127.0.0.1:{server.server_address[1]}", "t", None))
    try:
        first = c.get(WORKLOADS, "workloads", "default", "x")
        assert first == {"metadata": {"name": "x"}, "kind": "Workload"}
        names = [c.get(WORKLOADS, "workloads", "default", "y") for _ in range(2)]
        assert names == [{"metadata": {"name": "y"}}] * 2
        # The chunked answer's connection was kept for the second call; the third needed a new
        # one, since the second answer said it closes.
        assert len(_Chunked.seen) == 3 and _Chunked.seen[0] == _Chunked.seen[1]
        assert _Chunked.seen[2] != _Chunked.seen[1]
    finally:
        c.close()
        server.shutdown()
        server.server_close()


def test_many_calls_at_once_each_answered_or_failed_apart(worker: ServerProcess) -> None:
    """``calls``: more calls than kept connections (32), some refused by the worker; each
    answer is its own call's, and the connections go back to the pool."""
    c = RemoteClient(Target(worker.url, worker.admin_token, None))
    try:
        names = [f"many-{i}" for i in range(40)]
        creates = [Call("POST", f"{WORKLOADS}/namespaces/default/workloads", _copy(n), (409,))
                   for n in names]  # fmt: skip
        missing = Call("GET", f"{WORKLOADS}/namespaces/default/workloads/none")
        again = creates[0]  # a retried create in the same batch: 409, taken as done
        got = c.calls([*creates, missing, again])
        assert all(isinstance(a, Answer) and a.status == 201 for a in got[:40])
        assert isinstance(got[40], RemoteError) and ": 404" in str(got[40])
        assert isinstance(got[41], Answer) and got[41].status in (201, 409)
        gets = c.calls([Call("GET", f"{WORKLOADS}/namespaces/default/workloads/{n}")
                        for n in names])  # fmt: skip
        assert [a.json()["metadata"]["name"] for a in gets if isinstance(a, Answer)] == names
        deletes = [Call("DELETE", f"{WORKLOADS}/namespaces/default/workloads/{n}", None, (404,))
                   for n in names]  # fmt: skip
        assert not [a for a in c.calls(deletes * 2) if isinstance(a, RemoteError)]
        assert c.get(WORKLOADS, "workloads", "default", names[-1]) is None
    finally:
        c.close()


def test_many_calls_on_kept_connections_the_worker_closed_are_replaced(
    closes_idle: RemoteClient,
) -> None:
    delete = Call("DELETE", f"{WORKLOADS}/namespaces/default/workloads/x", None, (404,))
    for _ in range(3):  # each batch after the first finds its kept connections closed
        assert [type(a) for a in closes_idle.calls([delete] * 4)] == [Answer] * 4
    assert len(_ClosesIdle.seen) == 12 and len(set(_ClosesIdle.seen)) == 12


def test_many_calls_to_a_worker_that_does_not_answer_time_out() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    port = listener.getsockname()[1]
    c = RemoteClient(Target(f"http://127.0.0.1:{port}", "t", None))
    c._conns._read_s = 0.2
    try:
        got = c.calls([Call("GET", f"{WORKLOADS}/workloads")] * 3)
        assert all(isinstance(a, RemoteError) and "timed out" in str(a) for a in got)
    finally:
        c.close()
        listener.close()


def test_many_calls_to_a_worker_that_takes_no_connection_try_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch to a worker whose connections fail (here refused) opens one, not one per call
    (a dropped connect waits its whole timeout), and every call fails with its reason."""
    with refusing_port() as port:
        c = RemoteClient(Target(f"http://127.0.0.1:{port}", "t", None))
        opened: list[int] = []
        real = c._conns._open
        monkeypatch.setattr(c._conns, "_open", lambda: opened.append(1) or real())
        try:
            got = c.calls([Call("DELETE", f"{WORKLOADS}/namespaces/default/workloads/x")] * 5)
            assert len(opened) == 1
            assert all(isinstance(a, RemoteError) and f"127.0.0.1:{port}" in str(a) for a in got)
        finally:
            c.close()
