"""A pod's first process: a child subreaper that keeps everything the pod starts inside it.

The local runtime starts every pod as ``python -I -S pod_init.py CGROUP CPUS EXITFILE WORKDIR
COMMAND...`` (by path, so no package is imported). It marks itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``), so a process the pod starts stays its descendant whatever that
process does: ``setsid``, a new process group, ``env -i`` or a double fork only reparent an orphan
to this process, never to PID 1. It joins the pod's cgroup (CGROUP, "" for none), takes the CPUs
CPUS (numbers joined by commas: those of a server whose own threads ``--cpus`` bound to fewer, ""
to keep its own) and enters its working directory (WORKDIR, "" to stay), then runs COMMAND
(found on ``PATH``, as a container runtime does) as its child, with SIGPIPE and SIGXFSZ back at
their defaults (Python ignores both, and an ignored signal stays ignored across exec), and:

- on SIGTERM, SIGINT or SIGHUP (the runtime signals the pod's process group), passes the signal on
  to every descendant that left that group, so the command sees it once, exactly as before, and
  processes that called ``setsid`` see it too;
- when COMMAND exits, kills every descendant still alive (as a container's processes end with its
  main process), reaps them all, writes COMMAND's exit code (128+N for a signal N, as a shell
  says it) to EXITFILE and exits with it. The file is how a server that crashed and re-adopts the
  pod learns the code: the pod is no longer its child then, so it cannot reap it.

It was ``pod_init`` running a ``/bin/sh`` wrapper that did the cgroup, directory and exit file: a
process and about 2 ms of CPU more per pod. Its start is what a pod costs the worker's two cores
before its command runs, so it imports only built-in modules: ``signal`` pulls in ``enum`` and
``ctypes`` half the standard library, which made it cost about 17 ms of CPU instead of about 7
(Python's own start). So the signals come from ``_signal`` and prctl from ``_ctypes`` (``ctypes``
only where that fails). Where prctl is missing (not Linux) it still runs COMMAND, without the
guarantee. It imports nothing from gpuaas and decides nothing else.
"""

import os
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NAME = 15
_TERMINATING = (15, 2, 1)  # SIGTERM, SIGINT, SIGHUP (Linux numbers; _signal has the names too)


def become_subreaper() -> None:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)`` through ``_ctypes``: ``import ctypes`` costs a pod
    several milliseconds of CPU for the same call."""
    prctl = _prctl()
    if prctl is None:
        _subreaper_with_ctypes()
    else:
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # type: ignore[operator]


def set_name(name: bytes) -> None:
    """The calling process's name (``/proc/PID/comm``, 15 bytes at most): how a pod leader forked
    by ``pod_launcher`` carries its pod's token, since its environment is the launcher's."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_NAME, name[:15], 0, 0, 0)  # type: ignore[operator]


_PRCTL: list[object] = []  # the prctl function once built (the launcher builds it before forking)


def _prctl() -> object | None:
    if not _PRCTL:
        try:
            import _ctypes

            class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int
                _type_ = "i"

            class _Fn(_ctypes.CFuncPtr):  # a cdecl function returning int, as ctypes.CDLL's
                _flags_ = _ctypes.FUNCFLAG_CDECL
                _restype_ = _Int

            _PRCTL.append(_Fn(_ctypes.dlsym(_ctypes.dlopen(None), "prctl")))  # type: ignore[arg-type]
        except (ImportError, OSError, AttributeError, TypeError):
            _PRCTL.append(None)
    return _PRCTL[0]


def _subreaper_with_ctypes() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def children_of(pids: set[int]) -> set[int]:
    """Live processes whose parent is in ``pids``: from ``/proc/P/task/T/children`` (the kernel's
    own list, a few reads), else from every ``/proc/*/stat`` (a read per process on the host)."""
    out: set[int] = set()
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                    out.update(int(c) for c in fh.read().split())
            except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN
                return _children_by_scan(pids)
            except OSError:
                continue
    return {p for p in out if _live(p)}


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X", "")


def _children_by_scan(pids: set[int]) -> set[int]:
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
        frontier = children_of(frontier) - found
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


def _record(exit_path: str, code: int) -> int:
    """Write the exit code whole (a temporary file renamed into place), then return it."""
    try:
        with open(exit_path + ".tmp", "w", encoding="ascii") as fh:
            fh.write(f"{code}\n")
        os.replace(exit_path + ".tmp", exit_path)
    except OSError as exc:
        print(f"pod_init: cannot record exit code {code}: {exc}", file=sys.stderr, flush=True)
    return code


def take_back(cpus: str) -> str:
    """Leave a pinned server's CPUs and policy (``gpuaas.cpus``) for ``cpus``, those it had
    before (its ``child_arg``; "" where it was not pinned: nothing to do) and the default
    policy; the problem, or ''. A workload's first step: the pod's leader here, the Ray driver.
    The policy is not asked for where the server's ``SCHED_BATCH`` was refused: nothing to undo
    then, and the same refusal would fail every pod."""
    if not cpus:
        return ""
    try:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    except (OSError, ValueError) as exc:
        return f"cannot run on CPUs {cpus}: {exc}"
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError as exc:
        return f"cannot take the default scheduling policy (SCHED_OTHER): {exc}"
    return ""


def _prepare(cgroup: str, cpus: str, workdir: str) -> str:
    """Join the pod's cgroup, take its CPUs and enter its working directory; the problem, or ''."""
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w", encoding="ascii") as fh:
                fh.write(str(os.getpid()))
        except OSError as exc:
            return f"cannot join cgroup {cgroup}: {exc.strerror or exc}"
    problem = take_back(cpus)
    if problem:
        return problem
    if workdir:
        try:
            os.chdir(workdir)
        except OSError:
            return f"workingDir {workdir}: cannot enter"
    return ""


def _use_path(env: dict[str, str]) -> None:
    """Make the pod's ``PATH`` this process's: ``posix_spawnp`` searches the caller's, not the
    environment it passes on. Only ``PATH``, through ``putenv``: rebuilding ``os.environ`` for
    the pod ran enough Python in a forked leader (``os._Environ``'s methods) to copy about 120
    of the launcher's pages and cost half a millisecond of CPU per pod."""
    path = env.get("PATH")
    if path is None:
        os.unsetenv("PATH")  # the C library's default search path, as for an exec'd leader
    else:
        os.putenv("PATH", path)


def main(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run the pod; its exit code. ``env`` is the pod's environment where it is not this
    process's own (a leader forked by ``pod_launcher``)."""
    if len(argv) < 5:
        print("pod_init: usage: pod_init CGROUP CPUS EXITFILE WORKDIR COMMAND...", file=sys.stderr)
        return 127
    cgroup, cpus, exit_path, workdir, command = argv[0], argv[1], argv[2], argv[3], argv[4:]
    become_subreaper()
    problem = _prepare(cgroup, cpus, workdir)
    if problem:
        print(problem, file=sys.stderr, flush=True)
        return _record(exit_path, 126)
    import _signal  # type: ignore[import-not-found]  # built in: ``signal`` imports ``enum``

    def forward(signum: int, _frame: object) -> None:
        _signal_all(signum, outside_group_only=True)

    for sig in _TERMINATING:
        _signal.signal(sig, forward)
    defaults = [s for s in (_signal.SIGPIPE, getattr(_signal, "SIGXFSZ", None)) if s is not None]
    try:
        if env is not None:
            _use_path(env)
        spawn_env = os.environ if env is None else env
        main_pid = os.posix_spawnp(command[0], command, spawn_env, setsigdef=defaults)
    except OSError as exc:
        print(f"{command[0]}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return _record(exit_path, 127 if isinstance(exc, FileNotFoundError) else 126)
    # Blocked in waitpid, not polling: a pod that runs for hours costs no CPU while it runs (a
    # 20 ms poll woke each pod 50 times a second: with 300 pods on a 2-core worker that was a
    # fifth of a core). A forwarded signal interrupts the wait, runs ``forward`` and the wait
    # goes on (PEP 475); orphans reparented here are reaped as they end.
    code: int | None = None
    while code is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # cannot happen before main_pid is reaped; never spin
            return _record(exit_path, 127)
        if pid == main_pid:
            code = os.waitstatus_to_exitcode(status)
    # The main process is gone: nothing it started may outlive it.
    while True:
        _signal_all(9)  # SIGKILL
        _reap()
        if not descendants(os.getpid()):
            break
        time.sleep(0.01)
    return _record(exit_path, 128 - code if code < 0 else code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
