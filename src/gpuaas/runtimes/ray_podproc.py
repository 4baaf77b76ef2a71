"""A Ray pod's process-group leader: run the container's command, die with the actor that owns it.

``python -m gpuaas.runtimes.ray_podproc -- ARGV...`` is what a ``ray_actor.PodProcess`` starts in a
session of its own. It runs ``ARGV`` in its own process group and exits with its code (128 + the
signal for a signal), so the actor's ``wait`` reads the pod's exit code. It ignores SIGTERM
itself: a stop signals the whole group, the command gets it and decides, and this leader follows
it out. It is a child subreaper, so whatever the command's processes do to their session, group or
environment they stay its descendants, and it kills them all when the command ends. If the actor
that started it dies (its raylet was killed, the node is going down) the
leader sees its parent change and SIGKILLs the group, so no pod process outlives the Ray worker
that answers for it and a GPU Ray thinks free is really free. It decides nothing and never signals
a process outside its own group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from gpuaas.runtimes import pod_init

_PARENT_CHECK = 0.2  # seconds between checks that the owning actor still lives


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("ray_podproc: no command after --", file=sys.stderr, flush=True)
        return 2
    parent = os.getppid()
    pod_init.become_subreaper()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = subprocess.Popen(
            args, preexec_fn=_default_signals, stdin=subprocess.DEVNULL, close_fds=True
        )
    except OSError as exc:
        print(f"ray_podproc: cannot run {args[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127 if isinstance(exc, FileNotFoundError) else 126
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


def _default_signals() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
