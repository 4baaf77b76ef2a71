"""Whether a server listens on a local port: tests wait for one to open (a Ray head's GCS) or to
close (the Ray a preemption stopped); and a port that surely refuses, for tests of a refused
connection."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


def answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` is accepted within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A local port that refuses connections for the ``with`` block: bound but never
    listening, so no other process can take it and answer meanwhile (a free port could be)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


__all__ = ["answers", "refusing_port"]
