"""A watch read off its own socket (``streams.Stream`` under ``RemoteClient.watch``): events
split anywhere by the chunked encoding and by the socket's reads come out whole and in order,
a stream the server ends or leaves silent past the read timeout just ends (the caller watches
again), and an error answer, an ERROR event or a refused connection is a ``RemoteError``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gpuaas.engine.multikueue import remote
from gpuaas.engine.multikueue.remote import WORKLOADS, RemoteClient, RemoteError, Target
from gpuaas.testing.ports import refusing_port

ORIGIN = "kueue.x-k8s.io/multikueue-origin"
EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
    {"type": "MODIFIED", "object": {"metadata": {"name": "a"}, "status": {"x": "é" * 50}}},
    {"type": "DELETED", "object": {"metadata": {"name": "a", "resourceVersion": "4"}}},
]


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    """``body`` in chunks of these sizes (the last size repeats), then the closing chunk."""
    out, i, k = b"", 0, 0
    while i < len(body):
        piece = body[i : i + sizes[min(k, len(sizes) - 1)]]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        i, k = i + len(piece), k + 1
    return out + b"0\r\n\r\n"


class _Once:
    """A server that answers one connection with ``answer`` written in pieces of ``piece``
    bytes, then keeps it open for ``linger`` seconds; what it was asked is in ``asked``."""

    def __init__(self, answer: bytes, piece: int = 7, linger: float = 0.0) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.asked = b""
        self._answer, self._piece, self._linger = answer, piece, linger
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            while b"\r\n\r\n" not in self.asked:
                self.asked += conn.recv(4096)
            for i in range(0, len(self._answer), self._piece):
                conn.sendall(self._answer[i : i + self._piece])
                time.sleep(0.001)
            time.sleep(self._linger)

    def close(self) -> None:
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def client() -> Iterator[list[RemoteClient]]:
    made: list[RemoteClient] = []
    yield made
    for c in made:
        c.close()


def _client(made: list[RemoteClient], port: int) -> RemoteClient:
    c = RemoteClient(Target(f"http://127.0.0.1:{port}", "secret", None))
    made.append(c)
    return c


def _watch(c: RemoteClient) -> list[tuple[str, dict[str, object]]]:
    return list(c.watch(WORKLOADS, "workloads", ORIGIN, "hub", "1"))


def test_events_split_anywhere_come_out_whole(client: list[RemoteClient]) -> None:
    body = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS) + b"\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    server = _Once(head + _chunked(body, [5, 33, 1, 200]))
    try:
        got = _watch(_client(client, server.port))
    finally:
        server.close()
    assert got == [(e["type"], e["object"]) for e in EVENTS]
    request = server.asked.decode()
    assert request.startswith(f"GET {WORKLOADS}/workloads?watch=true&labelSelector=")
    assert "Authorization: Bearer secret\r\n" in request


def test_a_silent_stream_just_ends(
    client: list[RemoteClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "_WATCH_READ", 0.2)
    first = json.dumps(EVENTS[0]).encode() + b"\n"
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = _Once(head + f"{len(first):x}\r\n".encode() + first + b"\r\n", linger=2.0)
    try:
        got = _watch(_client(client, server.port))  # ends after 0.2 s of silence
    finally:
        server.close()
    assert got == [("ADDED", EVENTS[0]["object"])]


def test_an_error_answer_and_an_error_event_are_remote_errors(
    client: list[RemoteClient],
) -> None:
    gone = b'{"kind":"Status","code":410,"message":"too old resource version"}'
    answer = b"HTTP/1.1 410 Gone\r\nContent-Length: %d\r\n\r\n" % len(gone) + gone
    server = _Once(answer)
    try:
        with pytest.raises(RemoteError, match="410: too old resource version"):
            _watch(_client(client, server.port))
    finally:
        server.close()
    error = json.dumps({"type": "ERROR", "object": {"message": "expired"}}).encode() + b"\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(error)
    server = _Once(head + error)
    try:
        with pytest.raises(RemoteError, match="expired"):
            _watch(_client(client, server.port))
    finally:
        server.close()


def test_a_refused_connection_is_a_remote_error(client: list[RemoteClient]) -> None:
    with refusing_port() as port:
        want = f"watch http://127.0.0.1:{port}{WORKLOADS}/workloads"
        with pytest.raises(RemoteError, match=want):
            _watch(_client(client, port))


FULL = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                 "generation": 2, "creationTimestamp": "2026-12-07T00:00:00Z",
                 "deletionTimestamp": None, "labels": {ORIGIN: "hub"},
                 "annotations": {"a": "b"}, "ownerReferences": [{"kind": "Workload"}],
                 "finalizers": ["f"], "managedFields": [{"manager": "m", "fieldsV1": {"f:x": {}}}]},
    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x" * 500}]}}},
    "status": {"active": 1, "conditions": []},
}  # fmt: skip
KEPT = {  # what the manager keeps: metadata less managedFields (and nulls), and the status
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {k: v for k, v in FULL["metadata"].items()  # type: ignore[attr-defined]
                 if k != "managedFields" and v is not None},
    "status": {"active": 1, "conditions": []},
}  # fmt: skip


@pytest.mark.parametrize(
    ("event", "kept"),
    [
        ({"type": "MODIFIED", "object": FULL}, KEPT),
        (
            {"type": "ADDED", "object": {"metadata": {"name": "x"}, "spec": {}}},
            {"metadata": {"name": "x"}},
        ),
        (
            {"type": "DELETED", "object": {"metadata": {"name": "x"}, "status": {}}},
            {"metadata": {"name": "x"}, "status": {}},
        ),
        (
            {"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "12"}}},
            {"kind": "Job", "metadata": {"resourceVersion": "12"}},
        ),
    ],
)
def test_a_watched_object_is_kept_as_its_metadata_and_status(
    client: list[RemoteClient], event: dict[str, object], kept: dict[str, object]
) -> None:
    """The spec (a whole pod template) and managedFields are skipped, not decoded: the
    manager's caches hold what its controller reads, nothing more."""
    line = json.dumps(event).encode() + b"\n"
    server = _Once(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(line) + line)
    try:
        got = _watch(_client(client, server.port))
    finally:
        server.close()
    assert got == [(event["type"], kept)]


def test_an_error_event_with_kubernetes_status_fields_is_a_remote_error(
    client: list[RemoteClient],
) -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "too old resource version: 5 (9)", "reason": "Expired", "code": 410}  # fmt: skip
    line = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
    server = _Once(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(line) + line)
    try:
        with pytest.raises(RemoteError, match=r"too old resource version: 5 \(9\)"):
            _watch(_client(client, server.port))
    finally:
        server.close()
