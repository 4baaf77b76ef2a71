"""Whether a server listens on a local port: tests wait for one to open (a Ray head's GCS) or to
close (the Ray a preemption stopped)."""

from __future__ import annotations

import socket


def answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` is accepted within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


__all__ = ["answers"]
