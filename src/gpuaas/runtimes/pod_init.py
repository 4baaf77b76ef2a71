"""A pod's first process: a child subreaper that keeps everything the pod starts inside it.

The local runtime starts every pod as ``python -I -S pod_init.py COMMAND...`` (by path, so no
package is imported: it starts in a few milliseconds). It marks itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``), so a process the pod starts stays its descendant whatever that
process does: ``setsid``, a new process group, ``env -i`` or a double fork only reparent an orphan
to this process, never to PID 1. It then runs COMMAND (the runtime's shell wrapper) as its child
and:

- on SIGTERM, SIGINT or SIGHUP (the runtime signals the pod's process group), passes the signal on
  to every descendant that left that group, so the command sees it once, exactly as before, and
  processes that called ``setsid`` see it too;
- when COMMAND exits, kills every descendant still alive (as a container's processes end with its
  main process), reaps them all and exits with COMMAND's exit status.

So the runtime's view stays simple: the pod is alive while this process is, and its processes are
this process's descendants (``procs.descendants``), which the runtime kills before the process
itself when it must SIGKILL. Where prctl is missing (not Linux) it still runs COMMAND, without the
guarantee. It imports nothing from gpuaas and decides nothing else.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children_of(pids: set[int]) -> set[int]:
    """Live processes whose parent is in ``pids``, from /proc (no third-party module here)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) in pids and fields[0] not in ("Z", "X"):
            out.add(int(name))
    return out


def descendants(root: int) -> set[int]:
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = _children_of(frontier) - found
        found |= frontier
    return found


def _signal_all(sig: int, *, outside_group_only: bool = False) -> None:
    group = os.getpgrp()
    for pid in descendants(os.getpid()):
        try:
            if outside_group_only and os.getpgid(pid) == group:
                continue  # the runtime signals the pod's group: those have it already
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> list[tuple[int, int]]:
    """Every child that has exited, as (pid, wait status); never blocks."""
    out: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def main(argv: list[str]) -> int:
    if not argv:
        print("pod_init: no command", file=sys.stderr, flush=True)
        return 127
    become_subreaper()

    def forward(signum: int, _frame: object) -> None:
        _signal_all(signum, outside_group_only=True)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        main_pid = os.posix_spawn(argv[0], argv, dict(os.environ))
    except OSError as exc:
        print(f"pod_init: cannot run {argv[0]}: {exc}", file=sys.stderr, flush=True)
        return 127
    # Blocked in waitpid, not polling: a pod that runs for hours costs no CPU while it runs (a
    # 20 ms poll woke each pod 50 times a second: with 300 pods on a 2-core worker that was a
    # fifth of a core). A forwarded signal interrupts the wait, runs ``forward`` and the wait
    # goes on (PEP 475); orphans reparented here are reaped as they end.
    code: int | None = None
    while code is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # cannot happen before main_pid is reaped; never spin
            return 127
        if pid == main_pid:
            code = os.waitstatus_to_exitcode(status)
    # The main process is gone: nothing it started may outlive it.
    while True:
        _signal_all(signal.SIGKILL)
        _reap()
        if not descendants(os.getpid()):
            break
        time.sleep(0.01)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
