"""A ``gpuaas server`` started as a child on a free port, and how its starter knows that the
server answering on that port is its own.

A free port is picked by binding port 0 and closing it, so another process may bind it before
the child does. That process then answers ``/healthz`` in the child's stead while the child
exits with "address already in use". The only proof of identity a starter has is the admin
token the child writes into its own data directory before it serves: a server that accepts it
is the child. ``gpuaas demo`` and the tests' ``ServerProcess`` both wait this way, and start
again on another port when the child lost its port.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from gpuaas.datadir import ADMIN_TOKEN_FILE

# uvicorn's words (from the OSError's strerror) when the port is bound by another socket
_PORT_TAKEN = "address already in use"


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
