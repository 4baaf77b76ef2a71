"""A ``gpuaas server`` started as a child on a free port, and how its starter knows that the
server answering on that port is its own.

A free port is picked by binding port 0 and closing it, so another process may bind it before
the child does. That process then answers ``/healthz`` in the child's stead while the child
exits with "address already in use". The only proof of identity a starter has is the admin
token the child writes into its own data directory before it serves: a server that accepts it
is the child. ``start_child`` waits this way for ``gpuaas demo`` and the tests'
``ServerProcess``, and starts the child again on another port when it lost its own.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from gpuaas.datadir import ADMIN_TOKEN_FILE

# uvicorn's words (from the OSError's strerror) when the port is bound by another socket
_PORT_TAKEN = "address already in use"
_TRIES = 5  # ports tried before a child that keeps losing its port is given up


def free_port() -> int:
    """A port no socket on 127.0.0.1 holds now (it may be taken before it is bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_if_ours(url: str, data_dir: Path, verify: bool = True) -> str | None:
    """The admin token of ``data_dir`` when the server at ``url`` accepts it (so it is the
    server using that data dir); None while it is not written yet, nothing answers, or the
    server answering is another one."""
    try:
        token = (data_dir / ADMIN_TOKEN_FILE).read_text().strip()
        r = httpx.get(
            f"{url}/api/v1/namespaces",
            headers={"Authorization": f"Bearer {token}"},
            verify=verify,
            timeout=5,
        )
    except (OSError, httpx.HTTPError):
        return None
    return token if r.status_code == 200 else None


def lost_its_port(log: str) -> bool:
    """Whether a server's log (its end) says it exited because its port was taken."""
    return _PORT_TAKEN in log.lower()


@dataclass(frozen=True)
class Child:
    """A started child: its process and port, and its admin token once it answered as itself
    (None: it exited, or ``deadline`` passed with it still running)."""

    proc: subprocess.Popen[bytes]
    port: int
    token: str | None


def start_child(
    spawn: Callable[[int], subprocess.Popen[bytes]],
    port: int,
    data_dir: Path,
    log: Callable[[], str],
    deadline: float,
    *,
    scheme: str = "http",
    move: bool = True,
    verify: bool = True,
) -> Child:
    """``spawn(port)`` and wait until the server at that port accepts ``data_dir``'s admin
    token. A child that exits because its port was taken (``log()``, the end of its log, says
    so) is spawned again on a free port when ``move`` (the port was picked, not named)."""
    for _attempt in range(_TRIES):
        proc = spawn(port)
        url = f"{scheme}://127.0.0.1:{port}"
        while time.monotonic() < deadline and proc.poll() is None:
            token = token_if_ours(url, data_dir, verify)
            if token is not None:
                return Child(proc, port, token)
            time.sleep(0.1)
        if proc.poll() is None or not (move and lost_its_port(log())):
            break
        port = free_port()
    return Child(proc, port, None)
