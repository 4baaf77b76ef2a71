"""A stop that comes as a pod's leader (``pod_init``, a Ray pod's ``ray_podproc``) starts its
command is never lost.

The runtime stops a pod by signalling its process group, whose leader starts the command. The
leaders used to take over SIGTERM (``pod_init`` to pass it on, ``ray_podproc`` to ignore it)
before the command existed: a stop in between reached the leader alone, which had no one to pass
it to, and the command, created a moment later, ran until the SIGKILL at the end of its grace
period. Each case runs a leader in a child process of its own session (its group is the pod's)
and sends the group SIGTERM at an exact point, by wrapping the leader's own call that creates
the command, so the race is made, not waited for. The leader must end promptly either way; it
has ended at SIGTERM's default and the command never ran, or the command got it too.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The leader, run in a child process: its call that creates the command (``os.posix_spawnp``
# for ``pod_init``, ``subprocess.Popen`` for ``ray_podproc``) is wrapped once so that the pod's
# group gets SIGTERM just before or just after it.
LEADER = """
import os, signal, subprocess, sys
from gpuaas.runtimes import pod_init, ray_podproc

leader, when, exit_file, marker = sys.argv[1:5]
owner, name = (os, "posix_spawnp") if leader == "pod_init" else (subprocess, "Popen")
real = getattr(owner, name)
def create(*args, **kwargs):
    setattr(owner, name, real)  # once: ray_podproc's guard starts as usual
    if when == "before":
        os.killpg(0, signal.SIGTERM)
    made = real(*args, **kwargs)
    if when == "after":
        os.killpg(0, signal.SIGTERM)
    return made
setattr(owner, name, create)
command = ["sh", "-c", f"touch {marker}; exec sleep 60"]
if leader == "pod_init":
    sys.exit(pod_init.main(["", "", exit_file, "", *command]))
sys.exit(ray_podproc.main(["--", *command]))
"""


def _group_gone(pgid: int) -> bool:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("leader", ["pod_init", "ray_podproc"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_stop_as_the_command_is_created_stops_the_pod(
    tmp_path: Path, leader: str, when: str
) -> None:
    marker = tmp_path / "ran"
    proc = subprocess.Popen(
        [sys.executable, "-c", LEADER, leader, when, str(tmp_path / "exit"), str(marker)],
        start_new_session=True,  # its group is the pod's: the signal reaches no one else
        stdin=subprocess.DEVNULL,
    )
    try:
        code = proc.wait(timeout=30)  # the command sleeps 60 s: a lost SIGTERM fails here
        assert _group_gone(proc.pid), "a process of the pod outlived its stop"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
    if when == "before":  # ended at SIGTERM's default before the command was created
        assert code == -15 and not marker.exists()
    else:  # the command was in the group: it got the SIGTERM (the leader too, or passed on)
        assert code in (-15, 143)
