"""Test support: run a real ``gpuaas server`` process on a free port and always stop it.

``ServerProcess`` starts ``python -m gpuaas.cli.server`` in its own process group, waits until
it accepts its data dir's admin token (``gpuaas.server_child``: ``/healthz`` may be another
server's), and ``stop()``/``kill()`` end it (SIGTERM then SIGKILL, or SIGKILL at once for crash
tests). Tests use it as a context manager or from a fixture's finally, so no server outlives its
test. No production code imports this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import uvicorn

from gpuaas.datadir import ADMIN_TOKEN_FILE
from gpuaas.server_child import free_port, start_child
from gpuaas.vocab.kinds import BY_KIND

__all__ = [
    "ServerProcess",
    "ThreadedUvicorn",
    "create_all",
    "free_port",
    "object_path",
    "self_signed_cert",
    "serve_in_thread",
]


def object_path(doc: dict[str, Any], name: str | None = None) -> str:
    """The API path of a manifest's collection (or of the object ``name`` in it), at the
    manifest's own apiVersion; a namespaced kind without a namespace goes to ``default``, as
    kubectl sends it."""
    kind = BY_KIND[doc["kind"]]
    base = kind.base_path(str(doc.get("apiVersion", "")).rpartition("/")[2] or None)
    ns = doc["metadata"].get("namespace") or ("default" if kind.namespaced else None)
    coll = f"{base}/namespaces/{ns}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"
    return f"{coll}/{name}" if name else coll


def create_all(client: httpx.Client, docs: list[dict[str, Any]]) -> None:
    """Create every manifest in order; anything but 201 fails with the server's answer."""
    for doc in docs:
        r = client.post(object_path(doc), json=doc)
        assert r.status_code == 201, f"{doc['kind']} {doc['metadata'].get('name')}: {r.text}"


def self_signed_cert(directory: Path, name: str = "cert") -> tuple[Path, Path]:
    """A one-day self-signed certificate for 127.0.0.1 and its key (``NAME.pem``,
    ``NAME-key.pem`` in ``directory``), made by the ``openssl`` CLI: a TLS server for tests and
    benches."""
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class ServerProcess:
    def __init__(
        self,
        data_dir: Path,
        db: str | None = None,
        *,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        tls: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.db = db
        self.port = port or free_port()
        # A port picked here may be taken by another test's server before this one binds it:
        # start() then picks another. A port the caller named (a restart) is kept.
        self._port_is_ours = port is None
        self.extra = extra
        self.scheme = "https" if tls else "http"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def admin_token(self) -> str:
        return (self.data_dir / ADMIN_TOKEN_FILE).read_text().strip()

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """Start the server and wait until it answers as itself (``gpuaas.server_child``: under
        xdist another test's server may take the same free port first). If this server exits
        for want of its port, and the port was picked here, it starts again on another."""
        child = start_child(
            self._spawn,
            self.port,
            self.data_dir,
            self.log,
            time.monotonic() + timeout,
            scheme=self.scheme,
            move=self._port_is_ours,
            verify=False,
        )
        if child.token is not None:
            return self
        if child.proc.poll() is not None:
            raise RuntimeError(f"server exited with {child.proc.returncode}: {self.log()}")
        self.kill()
        raise RuntimeError(f"server did not become healthy in {timeout}s: {self.log()}")

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        self.port = port
        self.log_path = self.data_dir / f"server-{port}.log"
        cmd = [
            sys.executable, "-m", "gpuaas.cli.server",
            "--data-dir", str(self.data_dir), "--port", str(port), *self.extra,
        ]  # fmt: skip
        if "--runtime" not in self.extra:
            # API tests check scheduling, not processes: no pods, so a SIGKILLed test server
            # leaves nothing running. Tests of the runtime pass --runtime local themselves.
            cmd += ["--runtime", "none"]
        if self.db:
            cmd += ["--db", self.db]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it for its lifetime
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        return self.proc

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-4000:]
        except OSError:
            return ""

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token or self.admin_token}"},
            verify=False,
            timeout=60,
        )

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, no chance to flush anything."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start() if self.proc is None else self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class ThreadedUvicorn:
    """An app served by uvicorn on a thread of the test's own process."""

    server: uvicorn.Server
    thread: threading.Thread
    port: int

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve_in_thread(
    config: Callable[[int], uvicorn.Config], timeout: float = 10.0
) -> ThreadedUvicorn:
    """uvicorn with ``config(port)`` on a thread, on a free port, once it listens. A port
    another test bound first (uvicorn's thread then logs the error and exits) is replaced by
    another, as ``ServerProcess`` does; a server that neither listens nor exits in ``timeout``
    is an error."""
    for _attempt in range(5):
        port = free_port()
        server = uvicorn.Server(config(port))
        thread = threading.Thread(target=_run, args=(server,), name="test-uvicorn", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if server.started:
            return ThreadedUvicorn(server, thread, port)
        if thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on port {port} within {timeout}s")
    raise RuntimeError(
        "uvicorn's thread ended before it listened, 5 times: each port taken first, or an"
        " error it logged"
    )


def _run(server: uvicorn.Server) -> None:
    """``server.run()``, where uvicorn's ``sys.exit`` on a port it could not bind only ends
    this thread (``serve_in_thread`` sees it end), not as an unhandled thread exception."""
    with contextlib.suppress(SystemExit):
        server.run()
