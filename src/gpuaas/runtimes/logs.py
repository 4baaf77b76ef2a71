"""Reading pods' captured stdout and stderr, once or following as ``kubectl logs -f`` does.

This module owns turning log files into lines: one pod's lines as written, several pods' lines
prefixed with ``[pod]``. It writes nothing and knows no processes; whether pods are still alive
(so following should wait for more) is a callable the runtime passes in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

FOLLOW_INTERVAL = 0.1


def read_logs(paths: dict[str, Path]) -> Iterator[str]:
    prefix = len(paths) > 1
    for name, path in paths.items():
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            yield f"[{name}] {line}" if prefix else line


class LogFollower(Iterator[str]):
    """Pods' lines as they arrive, until the pods are gone and everything written has been read.

    ``step`` reads what is there now and never waits, so an HTTP server can follow many quiet pods
    from its event loop, sleeping between steps without holding a worker thread (45 followers of a
    quiet pod once took every thread). Iterating (``kubectl logs -f`` on one thread) sleeps
    ``FOLLOW_INTERVAL`` between empty steps. Pods are checked twice in a row before stopping, so a
    pod being retried (a moment with no live process) does not end the stream.
    """

    def __init__(self, paths: dict[str, Path], alive: Callable[[], bool]) -> None:
        self._paths = paths
        self._alive = alive
        self._prefix = len(paths) > 1
        self._offsets = dict.fromkeys(paths, 0)
        self._partial = dict.fromkeys(paths, b"")
        self._quiet_checks = 0
        self._pending: list[str] = []
        self.done = False

    def _line(self, name: str, raw: bytes) -> str:
        line = raw.decode(errors="replace")
        return f"[{name}] {line}" if self._prefix else line

    def step(self, max_bytes: int = 1 << 20) -> list[str]:
        """The lines written since the last step (empty when none); sets ``done`` at the end."""
        if self.done:
            return []
        out: list[str] = []
        read = False
        for name, path in self._paths.items():
            try:
                with path.open("rb") as fh:
                    fh.seek(self._offsets[name])
                    chunk = fh.read(max_bytes)
            except FileNotFoundError:
                continue
            if len(chunk) == 0 and path.stat().st_size < self._offsets[name]:
                self._offsets[name] = 0  # truncated by a new start of the workload
                continue
            self._offsets[name] += len(chunk)
            read = read or bool(chunk)
            lines = (self._partial[name] + chunk).split(b"\n")
            self._partial[name] = lines.pop()
            out.extend(self._line(name, raw) for raw in lines)
        if read:
            self._quiet_checks = 0
            return out
        self._quiet_checks = 0 if self._alive() else self._quiet_checks + 1
        if self._quiet_checks >= 2:
            self.done = True
            out = [self._line(name, rest) for name, rest in self._partial.items() if rest]
        return out

    def __next__(self) -> str:
        while not self._pending:
            if self.done:
                raise StopIteration
            self._pending = self.step()
            if not self._pending and not self.done:
                time.sleep(FOLLOW_INTERVAL)
        return self._pending.pop(0)


def follow_logs(paths: dict[str, Path], alive: Callable[[], bool]) -> LogFollower:
    """Lines as they arrive, until the pods are gone (see ``LogFollower``)."""
    return LogFollower(paths, alive)
