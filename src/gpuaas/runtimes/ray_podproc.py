"""A Ray pod's process-group leader: run the container's command, die with the actor that owns it.

``python .../ray_podproc.py -- ARGV...`` is what a ``ray_actor.NodeLauncher`` starts for each pod
on its node, in a session of its own. It runs ``ARGV`` in its own process group and exits with its code (128 + the
signal for a signal), so the actor's ``wait`` reads the pod's exit code. It ignores SIGTERM
itself: a stop signals the whole group, the command gets it and decides, and this leader follows
it out. It is a child subreaper, so whatever the command's processes do to their session, group or
environment they stay its descendants, and it kills them all when the command ends. If the launcher
actor that started it dies (its raylet was killed, the node is going down) the leader sees its parent
change and SIGKILLs the group, so no pod process outlives the Ray worker that answers for it and
a GPU Ray thinks free is really free. A Ray worker that exits SIGKILLs its own children, this
leader among them, before the leader can act: so the leader starts a guard (``--guard``, in the
pod's group) that does the same once the leader is gone. It decides nothing and never signals a
process outside its own pod.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from gpuaas.runtimes import pod_init

_PARENT_CHECK = 0.2  # seconds between checks that the owning actor still lives
GUARD = "--guard"  # ``ray_podproc --guard LEADER``: the leader's own watcher (below)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [GUARD] and len(args) == 2:
        return _guard(int(args[1]))
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("ray_podproc: no command after --", file=sys.stderr, flush=True)
        return 2
    parent = os.getppid()
    pod_init.become_subreaper()
    # Taken over by a handler that does nothing, not ignored, until the command exists: the
    # command is created by vfork with every signal blocked and its handlers set back to the
    # default before they are unblocked, so a stop that comes once it exists is the command's
    # (an ignored signal would stay ignored across exec, and a ``preexec_fn`` to undo that means
    # a plain fork, where the child ignores SIGTERM until that function runs). A stop before
    # the command exists is held back by the actor (``procs.command_started``).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _ignore)
    try:
        child = subprocess.Popen(args, stdin=subprocess.DEVNULL, close_fds=True)
    except OSError as exc:
        print(f"ray_podproc: cannot run {args[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    for sig in (signal.SIGTERM, signal.SIGINT):  # the guard below inherits these from birth
        signal.signal(sig, signal.SIG_IGN)
    _start_guard()
    while True:
        try:
            code = child.wait(timeout=_PARENT_CHECK)
            break
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:  # the actor is gone: nobody answers for this pod
                _kill_descendants()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(0, signal.SIGKILL)
    _kill_descendants()  # the command is gone: nothing it started outlives it
    return 128 - code if code < 0 else code


def _kill_descendants() -> None:
    """SIGKILL every descendant (this process is a child subreaper: ``setsid`` or ``env -i``
    cannot leave its tree) and reap them."""
    for _ in range(50):
        left = pod_init.descendants(os.getpid())
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass


def _start_guard() -> None:
    """A watcher of this leader, in the pod's group: a Ray worker that exits SIGKILLs its own
    children (this leader) first, which would leave the command's processes orphaned, alive."""
    with contextlib.suppress(OSError):
        subprocess.Popen(  # reaped by _kill_descendants
            [sys.executable, "-m", "gpuaas.runtimes.ray_podproc", GUARD, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )


def _guard(leader: int) -> int:
    """Wait while ``leader`` lives; once it is gone, SIGKILL what is left of the pod (its group,
    and every process carrying its ``GPUAAS_POD_UID``) and exit."""
    from gpuaas.runtimes import procs  # here, not at the top: psutil would delay every pod start

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == leader:
        time.sleep(_PARENT_CHECK)
    token = os.environ.get(procs.POD_UID_ENV)
    me = os.getpid()
    for _ in range(100):
        left = set(procs.group_members(leader))
        if token:
            left.update(procs.processes_with_token(token))
        left.discard(me)
        if not left:
            break
        procs.kill_pids(sorted(left))
        time.sleep(0.02)
    return 0


def _ignore(_signum: int, _frame: object) -> None:
    """SIGTERM and SIGINT as the leader takes them while it creates the command: the command
    gets its own, the leader follows it out."""


if __name__ == "__main__":
    sys.exit(main())
