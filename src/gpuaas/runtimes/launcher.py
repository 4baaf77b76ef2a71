"""The local runtime's end of its ``pod_launcher``: ask for a pod, hear which leaders ended.

``runtimes.pod_launcher`` (the process) forks each pod's leader instead of the runtime starting
a new Python per pod. This side starts it, sends one request per pod and waits for that request's
answer, and keeps the exits the launcher reports, in the order it reported them, for the runtime
to read at its next poll. A launcher that dies or stops answering is ``LauncherGone``: the runtime
then follows the pods it had started as it follows re-adopted ones (pid, start time, exit file)
and starts pods by ``procs.spawn`` instead. Calls come from one thread, as the runtime's do.
"""

from __future__ import annotations

import contextlib
import os
import py_compile
import select
import signal
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SCRIPT = Path(__file__).with_name("pod_launcher.py")
ANSWER_TIMEOUT = 10.0  # seconds a request may wait for its answer before the launcher is gone


class LauncherGone(Exception):
    """The launcher exited or stopped answering."""


@dataclass(slots=True, frozen=True)
class Launched:
    pid: int
    start_time: float  # epoch seconds, as ``psutil.Process(pid).create_time()`` says it
    exits_before: list[tuple[int, int]] = field(default_factory=list)


class PodLauncher:
    def __init__(self, script: str) -> None:
        # posix_spawn and bare pipes, not Popen: a runtime dropped without ``shutdown`` (a test's,
        # a crashed server's) must not leave a Popen to warn about a running child; the finalizer
        # below ends the launcher's input and reaps it instead.
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        try:
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", script],
                dict(os.environ),
                file_actions=[(os.POSIX_SPAWN_DUP2, to_r, 0), (os.POSIX_SPAWN_DUP2, from_w, 1)],
                setsid=True,  # a Ctrl-C on the server's terminal is the server's to handle
            )
        finally:
            os.close(to_r)
            os.close(from_w)
        self._in, self._out = to_w, from_r
        os.set_blocking(self._out, False)
        self._buffer = b""
        self._lines: list[bytes] = []
        self._next = 0
        self._tick = os.sysconf("SC_CLK_TCK")
        self.gone = False
        self._finalizer = weakref.finalize(self, _end, self.pid, to_w, from_r, 5.0)

    @classmethod
    def start(cls, directory: Path) -> PodLauncher | None:
        """A launcher running from ``directory`` (``pod_init.pyc`` must be there already), or
        None where one cannot run (no ``fork``, or its script cannot be compiled)."""
        if not hasattr(os, "fork") or not (directory / "pod_init.pyc").exists():
            return None
        target = directory / "pod_launcher.pyc"
        try:
            py_compile.compile(str(SCRIPT), cfile=str(target), doraise=True)
            return cls(str(target))
        except (OSError, py_compile.PyCompileError):
            return None

    def spawn(self, name: str, log: Path, env: dict[str, str], argv: list[str]) -> Launched:
        """Start one pod's leader; raises ``OSError`` when the launcher could not (its message),
        ``LauncherGone`` when the launcher is gone."""
        if self.gone:
            raise LauncherGone("the pod launcher is gone")
        ident, self._next = self._next, self._next + 1
        data = _request(ident, name, log, env, argv)
        try:
            while data:
                data = data[os.write(self._in, data) :]
        except OSError:
            self._lost()
        exits: list[tuple[int, int]] = []
        deadline = time.monotonic() + ANSWER_TIMEOUT
        prefix = f"{ident} ".encode()
        while True:
            lines = self._take()
            for i, line in enumerate(lines):
                kind, rest = line[:1], line[2:]
                if kind == b"x":
                    exits.append(_exit(rest))
                elif rest.startswith(prefix):
                    self._lines = lines[i + 1 :]  # what came after: for the next poll
                    answer = rest[len(prefix) :]
                    if kind == b"e":  # the exits read meanwhile go back, first, to the poll
                        self._lines[:0] = [b"x %d %d" % e for e in exits]
                        raise OSError(answer.decode(errors="replace"))
                    pid, ticks = (int(v) for v in answer.split())
                    return Launched(pid, psutil.boot_time() + ticks / self._tick, exits)
            if not self._wait(deadline - time.monotonic()):
                self._lost()

    def exits(self) -> list[tuple[int, int]]:
        """(pid, exit code) of every leader reaped since the last call, in order; never blocks."""
        if not self.gone:
            self._read()
        return [_exit(line[2:]) for line in self._take() if line[:1] == b"x"]

    def close(self, timeout: float = 5.0) -> None:
        """End its input and reap it; pods it started are not touched."""
        self.gone = True
        self._finalizer.detach()
        _end(self.pid, self._in, self._out, timeout)

    # -- internals -----------------------------------------------------------------------------

    def _take(self) -> list[bytes]:
        lines, self._lines = self._lines, []
        return lines

    def _read(self) -> bool:
        """Read what is there into whole lines; False at end of output (the launcher exited)."""
        while True:
            try:
                data = os.read(self._out, 1 << 16)
            except BlockingIOError:
                return True
            if not data:
                self.gone = True
                return False
            *lines, self._buffer = (self._buffer + data).split(b"\n")
            self._lines.extend(line for line in lines if line)

    def _wait(self, seconds: float) -> bool:
        if seconds <= 0:
            return False
        ready, _, _ = select.select([self._out], [], [], seconds)
        return bool(ready) and self._read()

    def _lost(self) -> None:
        self.gone = True
        self._finalizer.detach()
        _end(self.pid, self._in, self._out, 0.0)
        raise LauncherGone("the pod launcher stopped answering")


def _end(pid: int, to_fd: int, from_fd: int, timeout: float) -> None:
    """Close both pipes (the launcher exits at end of input) and reap it, killed past
    ``timeout``."""
    for fd in (to_fd, from_fd):
        with contextlib.suppress(OSError):
            os.close(fd)
    deadline = time.monotonic() + timeout
    try:
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.002)
    except ChildProcessError:
        return


def _request(ident: int, name: str, log: Path, env: dict[str, str], argv: list[str]) -> bytes:
    """One request line (``pod_launcher``'s protocol): ID, then every field's bytes in hex, ENV
    and ARGV as NUL-joined lists."""
    items = [f"{k}={v}" for k, v in env.items()]
    fields = [
        os.fsencode(name), os.fsencode(log),
        b"\0".join(map(os.fsencode, items)), b"\0".join(map(os.fsencode, argv)),
    ]  # fmt: skip
    return f"{ident} {' '.join(f.hex() for f in fields)}\n".encode()


def _exit(rest: bytes) -> tuple[int, int]:
    pid, code = rest.split()
    return int(pid), int(code)
