"""A pod's processes are contained whatever they do (issue 17, item 4).

A process that leaves the pod's process group and session (``setsid``), drops ``GPUAAS_POD_UID``
(``env -i``) and is orphaned by a double fork used to survive the pod's stop and keep its GPU,
which the runtime had already given to the next workload. Each pod now starts under ``pod_init``,
a child subreaper: such a process stays the pod's descendant, and the runtime says Stopped (and
frees the GPU) only once it is gone, on a stop, on a stop that SIGKILLs, and when the pod's main
process simply exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from runtime_helpers import wait_for

from gpuaas.runtimes import procs
from gpuaas.runtimes.base import EventKind, PodSpec
from gpuaas.runtimes.local import LocalRuntime


def escape(inner: str) -> str:
    """A process that leaves the pod's session and group and drops its environment."""
    return f"env -i setsid sh -c '{inner}'"


SLEEPER = escape("echo $$ > esc.pid; exec sleep 300")
STUBBORN = escape('trap "" TERM; echo $$ > esc.pid; while :; do sleep 1; done')
CASES = [
    pytest.param(f"({SLEEPER} &); sleep 300", "stop", id="double-fork-setsid-env-i"),
    pytest.param(f"{SLEEPER} & sleep 300", "stop", id="setsid-env-i-child"),
    pytest.param(f"({STUBBORN} &); sleep 300", "stop", id="escaped-and-ignores-sigterm"),
    pytest.param(f"({SLEEPER} &); sleep 300", "kill", id="stop-with-grace-zero"),
    pytest.param(
        f"({SLEEPER} &); while [ ! -s esc.pid ]; do sleep 0.05; done; exit 0",
        "exit",
        id="main-process-exits",
    ),
]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(("script", "how"), CASES)
def test_escaped_processes_end_with_their_pod(
    runtime: LocalRuntime, tmp_path: Path, script: str, how: str
) -> None:
    pod = PodSpec("p-0", ("sh", "-c", script), gpus=1, termination_grace_seconds=1.0,
                  working_dir=str(tmp_path))  # fmt: skip
    runtime.start("ns/w", [pod])
    pid_file = tmp_path / "esc.pid"
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the escaping process never started"
        runtime.poll()
        time.sleep(0.02)
    escaped = int(pid_file.read_text())
    leader = runtime.running()["ns/w"].pods[0].pid
    assert leader is not None
    if how != "exit":
        proc = psutil.Process(escaped)
        assert "GPUAAS_POD_UID" not in proc.environ()  # it really escaped the old checks
        assert os.getsid(escaped) != os.getsid(leader)
    if how == "stop":
        runtime.stop("ns/w")
    elif how == "kill":
        runtime.stop("ns/w", grace_seconds=0)
    expected = EventKind.SUCCEEDED if how == "exit" else EventKind.STOPPED
    wait_for(runtime, expected, "ns/w", timeout=20)
    assert not _alive(escaped), "the pod was reported gone while its process still ran"
    assert runtime.gpu_owners() == {}


def test_cgroup_members_are_found_and_killed(tmp_path: Path) -> None:
    """Where the host lets the runtime write cgroups, the pod's cgroup is a second fence: its
    members (sub-cgroups included) are leftovers, and a kill empties it (a directory stands in
    for cgroupfs here; ``cgroup.kill`` is then an ordinary file)."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        sub = tmp_path / "pod" / "nested"
        sub.mkdir(parents=True)
        (tmp_path / "pod" / "cgroup.procs").write_text("")
        (sub / "cgroup.procs").write_text(f"{child.pid}\n999999999\n")
        assert procs.cgroup_members(tmp_path / "pod") == [child.pid]
        assert procs.cgroup_members(None) == []
        procs.kill_cgroup(tmp_path / "pod")
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()


def _switches(pid: int) -> int:
    """Context switches of a process so far: a process blocked in a wait makes none."""
    ctx = psutil.Process(pid).num_ctx_switches()
    return int(ctx.voluntary + ctx.involuntary)


def test_a_running_pod_init_waits_without_waking(tmp_path: Path) -> None:
    """While its command runs, pod_init sleeps in waitpid: it made 50 wake-ups a second when
    it polled, which 300 running pods turned into a fifth of a 2-core worker's CPU."""
    exit_path = tmp_path / "exit"
    spawned = procs.spawn(["sleep", "30"], dict(os.environ), tmp_path / "log", exit_path)
    try:
        deadline = time.monotonic() + 10
        while len(procs.descendants(spawned.pid)) < 1:  # sleep, its command, is running
            assert time.monotonic() < deadline, "the pod's command never started"
            time.sleep(0.02)
        before = _switches(spawned.pid)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # let a poller wake about 25 times
            time.sleep(0.05)
        assert _switches(spawned.pid) - before <= 2
    finally:
        os.killpg(spawned.pgid, 9)
        os.waitpid(spawned.pid, 0)


def test_the_command_gets_sigpipe_at_its_default(runtime: LocalRuntime) -> None:
    """Python ignores SIGPIPE and an ignored signal stays ignored across exec (a shell cannot
    even undo it): pod_init gives the command the default, as a container's process has, so a
    writer into a closed pipe dies of SIGPIPE (141) instead of living on."""
    runtime.start("ns/w", [PodSpec("p-0", ("sh", "-c", "kill -PIPE $$; exit 3"))], backoff_limit=0)
    _, seen = wait_for(runtime, EventKind.FAILED, "ns/w")
    assert [e.exit_code for e in seen if e.kind == EventKind.POD_FAILED] == [141]


@pytest.mark.parametrize(
    ("command", "workdir", "code"),
    [
        (["sh", "-c", "kill -TERM $$"], "", 143),  # 128 + SIGTERM, as a shell says it
        (["sh", "-c", "exit 5"], "", 5),
        (["no-such-command-gpuaas"], "", 127),
        (["true"], "/no/such/dir", 126),
    ],
)
def test_pod_init_records_the_exit_code_a_re_adopted_pod_is_judged_by(
    tmp_path: Path, command: list[str], workdir: str, code: int
) -> None:
    """The file is all a server that crashed and re-adopts the pod has (the pod is no longer its
    child): it says what the leader's own exit status says, for a signal too."""
    exit_path = tmp_path / "exit"
    spawned = procs.spawn(command, dict(os.environ), tmp_path / "log", exit_path, workdir or None)
    _, status = os.waitpid(spawned.pid, 0)
    assert os.waitstatus_to_exitcode(status) == code
    assert procs.read_exit_code(exit_path) == code


def test_one_pass_over_proc_finds_what_a_pass_per_pod_finds(tmp_path: Path) -> None:
    """A poll sweeps every ended pod with one read of /proc (a graceful stop of 100 pods read
    /proc 200 times): by token and by group it must find what the per-pod reads find."""
    pods = []
    try:
        for token in ("aaaa", "bbbb"):
            env = dict(os.environ, **{procs.POD_UID_ENV: token})
            pods.append(
                (
                    token,
                    procs.spawn(["sleep", "30"], env, tmp_path / token, tmp_path / f"{token}.x"),
                )
            )
        for _, spawned in pods:
            deadline = time.monotonic() + 10
            while not procs.descendants(spawned.pid):
                assert time.monotonic() < deadline, "the pod's command never started"
                time.sleep(0.02)
        table = procs.scan_leftovers(["aaaa", "bbbb", "cccc"], [s.pgid for _, s in pods])
        for token, spawned in pods:
            assert sorted(table.by_token[token]) == sorted(procs.processes_with_token(token))
            assert sorted(table.by_group[spawned.pgid]) == sorted(procs.group_members(spawned.pgid))
            assert len(table.by_token[token]) == 2  # pod_init and sleep
        assert table.by_token["cccc"] == []
    finally:
        for _, spawned in pods:
            os.killpg(spawned.pgid, 9)
            os.waitpid(spawned.pid, 0)


@pytest.mark.parametrize(("cpus", "code"), [("first", 0), ("4096", 126), ("x", 126)])
def test_pod_init_gives_its_command_the_cpus_it_was_told(
    tmp_path: Path, cpus: str, code: int
) -> None:
    """CPUS is how a server whose own threads ``--cpus`` bound hands its pods every CPU it had:
    pod_init takes them before it runs the command; CPUs it cannot take are its exit 126 and a
    line in the pod's log, never a command run elsewhere."""
    allowed = sorted(os.sched_getaffinity(0))
    wanted = str(allowed[0]) if cpus == "first" else cpus
    log, exit_path = tmp_path / "log", tmp_path / "exit"
    command = ["sh", "-c", "grep Cpus_allowed_list /proc/self/status"]
    argv = [sys.executable, "-I", "-S", procs.POD_INIT, "", wanted, str(exit_path), "", *command]
    with log.open("wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=30, check=False)
    assert done.returncode == code
    assert procs.read_exit_code(exit_path) == code
    text = log.read_text()
    if code == 0:
        assert text.split() == ["Cpus_allowed_list:", wanted]
    else:
        assert f"cannot run on CPUs {wanted}" in text and "Cpus_allowed_list" not in text
