"""One long-lived process per local runtime that forks each pod's ``pod_init``.

Starting ``python -I -S pod_init.pyc`` for every pod costs the machine a whole interpreter start
(about 6 of the 9.5 ms of CPU a pod took before its command ran; on a 2-core MultiKueue worker
that bounded pods to well under 200 a second). This process pays that start once: it loads
``pod_init`` (and its ``prctl``) and, for each request, forks a child that becomes the pod's
leader and runs ``pod_init.main`` exactly as a freshly started one would: its own session, stdin
from /dev/null, stdout and stderr appended to the pod's log, the pod's environment given to its
command (and the pod's ``PATH`` put in the leader's own, which is where ``posix_spawnp`` looks for
the command).

A forked leader's ``/proc/PID/environ`` is the launcher's, not the pod's: the kernel shows the
environment a process was exec'd with. So the child first names itself after the pod's token
(``/proc/PID/comm``, read by ``procs.scan_leftovers``), and a server that crashed before it
recorded the leader's pid still finds it by that name, as it finds the command by its
environment.

Protocol, one line each way per message. The runtime writes ``ID NAME LOG ENV ARGV``: ID in
decimal, then each field's bytes in hex (ENV its ``KEY=VALUE`` items and ARGV, ``pod_init``'s
CGROUP CPUS EXITFILE WORKDIR COMMAND..., each joined by NUL, which no C string holds); the launcher
answers ``s ID PID TICKS`` (the leader's pid and start time in clock ticks since boot, as in
``/proc/PID/stat``) or ``e ID MESSAGE`` when it could not start one (the log cannot be opened,
fork failed), and writes ``x PID CODE`` when it has reaped a leader (CODE as a shell says it,
128+N for a signal N). Lines come in the order things happened, so an ``x`` for a pid always
precedes an ``s`` that reuses it.

At end of input (the server stopped or died) it exits and leaves the pods running: each leader
is a subreaper that records its command's exit code in its file, which is how a restarted
server learns how a pod it did not watch ended. Like ``pod_init`` it imports only what an
interpreter started with ``-I -S`` has, and nothing from gpuaas: it runs from a ``.pyc`` beside
``pod_init.pyc`` in the runtime's directory. Nor does it import ``json`` or ``contextlib``
(``json`` pulls in ``re`` and ``enum``): every pod's leader is a fork of this process, so each
module it holds is memory every leader maps copy-on-write, page tables the fork copies and
pages the kernel walks through every leader that maps them (``bench/pod_start.py``).
"""

import _signal  # type: ignore[import-not-found]  # built in: ``signal`` imports ``enum``
import os
import select
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pod_init  # type: ignore[import-not-found]  # beside this file, by path

_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND
_own_pid, _own_name = 0, b""  # this process's, set by main()


def _noop(_signum: int, _frame: object) -> None:
    """SIGCHLD needs a handler for the wakeup fd to be written; the loop does the reaping."""


def _start_ticks(pid: int) -> int:
    """The process's start in clock ticks since boot (``/proc/PID/stat`` field 22), 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rfind(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _child(log_fd: int, ready_fd: int, env: dict[str, str], argv: list[str]) -> None:
    """The forked pod leader: never returns."""
    code = 127
    try:
        os.setsid()
        os.close(ready_fd)  # the launcher answers once its session exists (see ``_launch``)
        _signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, 1 << 16)  # the launcher's pipes are not the pod's
        code = pod_init.main(argv, env)
    except BaseException as exc:  # a pod that could not start, said in its log
        try:  # noqa: SIM105  # not contextlib.suppress: contextlib is not imported (see above)
            os.write(2, f"pod_launcher: cannot start the pod: {exc}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(code)


def _fields(line: bytes) -> tuple[str, str, str, dict[str, str], list[str]]:
    """A request line's ID, NAME, LOG, ENV and ARGV (see the module's docstring); ValueError
    where it is not one."""
    ident, name, log, env, argv = line.decode("ascii").split(" ")
    items = [os.fsdecode(v) for v in bytes.fromhex(env).split(b"\0")] if env else []
    pairs = dict(item.split("=", 1) for item in items)
    args = [os.fsdecode(v) for v in bytes.fromhex(argv).split(b"\0")]
    return (
        str(int(ident)),
        os.fsdecode(bytes.fromhex(name)),
        os.fsdecode(bytes.fromhex(log)),
        pairs,
        args,
    )


def _launch(line: bytes) -> bytes:
    """Fork one pod's leader for a request line; the reply line."""
    ident = "?"
    try:
        ident, name, log, env, argv = _fields(line)
        log_fd = os.open(log, _LOG_FLAGS, 0o600)
    except ValueError as exc:
        return f"e {ident} bad request: {exc}\n".encode()
    except OSError as exc:
        return f"e {ident} cannot open log {log}: {exc.strerror or exc}\n".encode()
    # Named before the fork, so the leader bears the pod's name from its first instant (a name
    # it set itself would leave a moment where a crashed server's successor could miss it).
    # The answer waits until the leader has its own session: the runtime may signal the pod's
    # process group (its pid) at once, and a SIGTERM sent before that group exists would be lost.
    pod_init.set_name(name.encode())
    ready_r, ready_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(ready_r)
        return f"e {ident} fork: {exc.strerror or exc}\n".encode()
    finally:
        if os.getpid() == _own_pid:  # the launcher, not the new leader
            pod_init.set_name(_own_name)
            os.close(log_fd)
            os.close(ready_w)
    if pid == 0:
        os.close(ready_r)
        _child(log_fd, ready_w, env, argv)
    os.read(ready_r, 1)  # end of file once the leader closed its end (or died)
    os.close(ready_r)
    return f"s {ident} {pid} {_start_ticks(pid)}\n".encode()


def _reaped() -> bytes:
    """``x PID CODE`` lines for every leader that has exited; never blocks."""
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        code = os.waitstatus_to_exitcode(status)
        out.append(f"x {pid} {128 - code if code < 0 else code}\n")
    return "".join(out).encode()


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def main() -> int:
    pod_init._prctl()  # built once here, inherited by every leader forked below
    global _own_pid, _own_name  # set once, before any fork
    with open("/proc/self/comm", "rb") as fh:
        _own_pid, _own_name = os.getpid(), fh.read().strip()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w)
    _signal.signal(_signal.SIGCHLD, _noop)
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        out = _reaped()
        if 0 in ready:
            data = os.read(0, 1 << 16)
            if not data:
                if out:
                    _write(out)
                return 0  # the server is gone; the pods are not (see the module's docstring)
            pending += data
            *lines, pending = pending.split(b"\n")
            out += b"".join(_launch(line) for line in lines if line)
        if out:
            try:
                _write(out)
            except BrokenPipeError:
                return 0


if __name__ == "__main__":
    sys.exit(main())
