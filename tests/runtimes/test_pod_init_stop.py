"""A stop that comes while a pod's leader (``pod_init``, a Ray pod's ``ray_podproc``) prepares
is never lost.

The runtime stops a pod by signalling its process group. While the leader prepares (cgroup,
CPUs, directory), before its command exists, that group is the leader alone: a SIGTERM then
was handled as a forward to no one, and the command, started a moment later, ran on until the
runtime's SIGKILL at the end of its grace period. Each case runs the leader in a child process
of its own session and sends the signal at an exact point (the leader's own steps, patched in
that child), so the race is made, not waited for.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LEADER = """
import os, signal, sys
from gpuaas.runtimes import pod_init

when, exit_file, marker = sys.argv[1:4]
if when == "preparing":  # the runtime's stop lands while the leader prepares
    prepare = pod_init._prepare
    def _prepare(*args):
        os.killpg(0, signal.SIGTERM)
        return prepare(*args)
    pod_init._prepare = _prepare
else:  # ... or as the command is being created, before it is in the group
    spawn = os.posix_spawnp
    def posix_spawnp(*args, **kwargs):
        os.killpg(0, signal.SIGTERM)
        return spawn(*args, **kwargs)
    os.posix_spawnp = posix_spawnp
script = f"touch {marker}; exec sleep 60"
sys.exit(pod_init.main(["", "", exit_file, "", "sh", "-c", script]))
"""


@pytest.mark.parametrize("when", ["preparing", "spawning"])
def test_a_stop_before_the_command_exists_still_stops_it(tmp_path: Path, when: str) -> None:
    exit_file, marker = tmp_path / "exit", tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-c", LEADER, when, str(exit_file), str(marker)],
        start_new_session=True,  # its group is the pod's: the signal reaches no one else
        capture_output=True,
        text=True,
        timeout=30,  # the command sleeps 60 s: a lost SIGTERM fails here
    )
    assert done.returncode == 143, done.stderr
    assert exit_file.read_text() == "143\n"
    if when == "preparing":  # stopped before it started: the command never ran
        assert not marker.exists()


PODPROC = """
import os, signal, subprocess, sys
from gpuaas.runtimes import pod_init, ray_podproc

when, marker = sys.argv[1:3]
def stop_once(real):
    def call(*args, **kwargs):
        if not getattr(call, "done", False):
            call.done = True
            os.killpg(0, signal.SIGTERM)
        return real(*args, **kwargs)
    return call
if when == "preparing":
    pod_init.become_subreaper = stop_once(pod_init.become_subreaper)
else:
    subprocess.Popen = stop_once(subprocess.Popen)
sys.exit(ray_podproc.main(["--", "sh", "-c", f"touch {marker}; exec sleep 60"]))
"""


@pytest.mark.parametrize("when", ["preparing", "spawning"])
def test_a_ray_pods_leader_passes_on_a_stop_that_came_before_its_command(
    tmp_path: Path, when: str
) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-c", PODPROC, when, str(marker)],
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 143, done.stderr
    if when == "preparing":
        assert not marker.exists()
