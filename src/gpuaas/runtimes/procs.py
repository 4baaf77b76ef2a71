"""Process groups on Linux: spawn a pod, tell whether it is alive, signal it, find its leftovers.

This module owns every system call the local runtime makes on processes. A pod is one session
(its own process group) led by ``pod_init``, a child subreaper, so every process the pod starts
stays its descendant whatever it does to its session, group or environment (``descendants``). It
joins the pod's cgroup, enters its working directory, runs the command as its only child and
records the command's exit code in a file, so the code survives a server crash (a re-adopted pod
is no longer our child). The command sees SIGTERM exactly as in a container: the runtime signals
the pod's group (once the command exists: ``command_started``), and ``pod_init`` passes it on to
what left the group. Aliveness ignores zombies: on hosts whose PID 1 does not reap orphans, zombies never vanish.
Nothing here decides retries or stops; that is ``runtimes.local``.
"""

from __future__ import annotations

import contextlib
import os
import py_compile
import signal
import sys
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from gpuaas import cpus
from gpuaas.runtimes import pod_init

POD_UID_ENV = "GPUAAS_POD_UID"
POD_INIT = str(Path(__file__).with_name("pod_init.py"))
_START_TIME_TOLERANCE = 0.05


def compiled_pod_init(directory: Path) -> str:
    """``pod_init`` compiled to ``directory/pod_init.pyc`` for this interpreter, or its source's
    path if that fails. Python runs a ``.pyc`` given as the script without compiling (a script
    given as source is compiled at every start, never cached): about 1 ms of CPU less per pod.
    Compiled again by every runtime that starts, so a stale copy never outlives an upgrade."""
    target = directory / "pod_init.pyc"
    try:
        py_compile.compile(POD_INIT, cfile=str(target), doraise=True)
    except (OSError, py_compile.PyCompileError):
        return POD_INIT
    return str(target)


@dataclass(slots=True, frozen=True)
class Spawned:
    pid: int
    pgid: int
    start_time: float


def spawn(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    exit_path: Path,
    working_dir: str | None = None,
    cgroup_dir: Path | None = None,
    pod_init: str = POD_INIT,
) -> Spawned:
    """Start ``argv`` as the only job of a new session, stdout and stderr appended to a log.

    ``posix_spawn`` rather than ``subprocess.Popen``: the runtime waits for its pods by pid, and a
    dropped ``Popen`` object would warn about a child that is meant to outlive it.
    """
    forget_exit(exit_path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), flags, 0o600),  # logs are the tenant's
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    full = [
        sys.executable,
        "-I",
        "-S",
        pod_init,
        *init_args(argv, exit_path, working_dir, cgroup_dir),
    ]
    pid = os.posix_spawn(sys.executable, full, env, file_actions=actions, setsid=True)
    try:
        start = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:  # exited already; still our child, reaped later
        start = 0.0
    return Spawned(pid, pid, start)


def init_args(
    argv: list[str], exit_path: Path, working_dir: str | None, cgroup_dir: Path | None
) -> list[str]:
    """``pod_init``'s arguments: CGROUP CPUS EXITFILE WORKDIR COMMAND... (CPUS: those the server
    had before ``--cpus`` pinned it, for the pod to take back; "" where it was not pinned)."""
    return [str(cgroup_dir or ""), cpus.child_arg(), str(exit_path), working_dir or "", *argv]


def forget_exit(exit_path: Path) -> None:
    """Remove an earlier run's exit code before the pod starts again."""
    with contextlib.suppress(FileNotFoundError):
        exit_path.unlink()


def wait_leader(pid: int, start_time: float, exit_path: Path) -> tuple[bool, int | None]:
    """(exited, exit code) of a pod's leader, whether it is our child or a re-adopted orphan.

    A child is reaped here (its code is exact, a signal N reads as 128+N like a shell); an orphan
    from before a restart is checked by pid and start time, and its code read from the file
    ``pod_init`` wrote (None if it was killed).
    """
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        if leader_alive(pid, start_time):
            return False, None
        return True, read_exit_code(exit_path)
    if done == 0:
        return False, None
    code = os.waitstatus_to_exitcode(status)
    return True, (128 - code if code < 0 else code)


def is_our_child(pid: int) -> bool:
    try:
        return psutil.Process(pid).ppid() == os.getpid()
    except psutil.NoSuchProcess:
        return False


def leader_alive(pid: int, start_time: float) -> bool:
    """The same process (pid and start time agree, so not a reused pid) and not a zombie."""
    try:
        proc = psutil.Process(pid)
        if start_time and abs(proc.create_time() - start_time) > _START_TIME_TOLERANCE:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    return live_with_stat_field(PGRP_FIELD, pgid)


# Fields of /proc/<pid>/stat after the command name: 0 state, 1 ppid, 2 pgrp, 3 session.
PGRP_FIELD, SESSION_FIELD = 2, 3


def _live_stats(spare: frozenset[int] = frozenset()) -> Iterator[tuple[int, str, list[str]]]:
    """(pid, command name, the fields of /proc/<pid>/stat after the name) of every live
    (non-zombie) process but those in ``spare``: the one walk over /proc the lookups share."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spare:
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        close = stat.rfind(")")
        fields = stat[close + 2 :].split()
        if fields and fields[0] not in ("Z", "X"):
            yield int(name), stat[stat.find("(") + 1 : close], fields


def _environ(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None


def live_with_stat_field(index: int, value: int, spare: frozenset[int] = frozenset()) -> list[int]:
    """Live (non-zombie) pids whose /proc stat field ``index`` equals ``value`` (a process
    group or a session), read from /proc so processes that changed group are seen too."""
    return [
        pid
        for pid, _, fields in _live_stats(spare)
        if len(fields) > index and int(fields[index]) == value
    ]


def leader_name(token: str) -> str:
    """The name (``/proc/PID/comm``, 15 bytes) of a pod's leader forked by ``pod_launcher``: its
    environment is the launcher's, so the name is what carries the pod's token."""
    return f"{LEADER_PREFIX}{token}"[:15]


LEADER_PREFIX = "pod-"


def processes_with_token(token: str) -> list[int]:
    """Live processes whose environment carries this pod's ``GPUAAS_POD_UID``, or whose name is
    its leader's (``leader_name``).

    The token survives pid reuse and ``setsid``: it is how leftovers of a pod whose leader is
    gone (or was never recorded, if the server died right after spawning) are found.
    """
    return scan_leftovers([token], ()).by_token[token]


@dataclass(slots=True)
class Leftovers:
    """Live processes by pod token and by process group, from one pass over /proc."""

    by_token: dict[str, list[int]]
    by_group: dict[int, list[int]]


def scan_leftovers(tokens: Collection[str], pgids: Collection[int]) -> Leftovers:
    """``processes_with_token`` and ``group_members`` for many pods in one pass over /proc: a
    pass per pod read every process's files once per pod, so a stop of N pods on a host of M
    processes read N x M files (seconds, with 100 pods, for a server's graceful stop)."""
    want = {f"{POD_UID_ENV}={t}".encode(): t for t in tokens}
    leaders = {leader_name(t): t for t in tokens}
    marker = POD_UID_ENV.encode()
    groups = set(pgids)
    out = Leftovers({t: [] for t in tokens}, {g: [] for g in groups})
    for pid, comm, fields in _live_stats():
        if len(fields) > PGRP_FIELD and int(fields[PGRP_FIELD]) in groups:
            out.by_group[int(fields[PGRP_FIELD])].append(pid)
        if not want:
            continue
        if comm in leaders:
            out.by_token[leaders[comm]].append(pid)
            continue
        environ = _environ(pid)
        if environ is not None and marker in environ:
            for var in environ.split(b"\0"):
                token = want.get(var)
                if token is not None:
                    out.by_token[token].append(pid)
    return out


def descendants(pid: int, start_time: float = 0.0) -> list[int]:
    """Live descendants of a pod's leader (its ``pod_init``, a subreaper: nothing the pod starts
    can leave this tree while the leader lives), found by parent links whatever their session:
    the kernel's lists of each process's children (``pod_init.descendants``), a few reads per
    process of the tree. psutil's ``children`` reads the stat of every process on the host for
    each call, which made stopping N pods, and reading their CPU, cost N times that."""
    if not leader_alive(pid, start_time):
        return []
    return sorted(pod_init.descendants(pid))


@dataclass(slots=True, frozen=True)
class TreeCpu:
    """CPU time and resident memory of a pod's process tree, read at ``read_at`` (epoch s)."""

    cpu_seconds: float
    rss_bytes: int
    processes: int
    read_at: float


def tree_cpu(pid: int, start_time: float) -> TreeCpu | None:
    """User + system time of the leader and its live descendants, plus what the children they
    reaped used (``children_user``/``children_system``): the pod's CPU time since it started,
    each second counted once. None when the leader is gone (or its pid was reused)."""
    if not leader_alive(pid, start_time):
        return None
    try:
        tree = [psutil.Process(pid)]
    except psutil.NoSuchProcess:
        return None
    for child in sorted(pod_init.descendants(pid)):
        with contextlib.suppress(psutil.NoSuchProcess):
            tree.append(psutil.Process(child))
    cpu, rss, count = 0.0, 0, 0
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied), proc.oneshot():
            t = proc.cpu_times()
            mem = proc.memory_info().rss
            cpu += t.user + t.system + t.children_user + t.children_system
            rss += mem
            count += 1
    return TreeCpu(cpu, rss, count, time.time())


def cgroup_members(cgroup_dir: Path | None) -> list[int]:
    """Live processes in a pod's cgroup and its sub-cgroups (none without one): where the host
    lets the runtime write cgroups, a second fence besides ``pod_init``'s process tree."""
    if cgroup_dir is None:
        return []
    found: list[int] = []
    with contextlib.suppress(OSError):
        for procs_file in [cgroup_dir / "cgroup.procs", *cgroup_dir.glob("**/cgroup.procs")]:
            with contextlib.suppress(OSError, ValueError):
                found += [int(x) for x in procs_file.read_text().split()]
    return sorted({p for p in found if _alive_pid(p)})


def _alive_pid(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_cgroup(cgroup_dir: Path | None) -> None:
    """SIGKILL everything in a pod's cgroup: ``cgroup.kill`` (Linux 5.14+), else one by one."""
    if cgroup_dir is None:
        return
    with contextlib.suppress(OSError):
        (cgroup_dir / "cgroup.kill").write_text("1")
    kill_pids(cgroup_members(cgroup_dir))


def kill_tree(pid: int, start_time: float, pgid: int | None) -> None:
    """SIGKILL a pod: its leader's descendants first (so none is orphaned to PID 1 by the
    leader's death), then its process group, leader included."""
    for _ in range(5):  # a process may fork while we kill: its child is found on the next pass
        pids = descendants(pid, start_time)
        if not pids:
            break
        kill_pids(pids)
    if pgid is not None:
        signal_group(pgid, signal.SIGKILL)


def command_started(pid: int) -> bool:
    """Whether a pod's leader (``pod_init``, ``ray_podproc``) has created its command: whether it
    has a live child. Until then a SIGTERM to the pod's group reaches the leader alone, which has
    already taken SIGTERM over to pass it on and has no one to pass it to, so the command created
    a moment later would never see it; a stop waits for this instead (``runtimes.local``,
    ``ray_actor``). Once the child exists, even before its ``exec``, a SIGTERM to the group is
    its: ``posix_spawn`` and ``subprocess`` create it with every signal blocked and reset its
    handlers to the default before unblocking them."""
    return bool(pod_init.children_of({pid}))


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def read_exit_code(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
