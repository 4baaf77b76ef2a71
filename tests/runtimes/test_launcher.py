"""The pod launcher with real processes: who forks a pod's leader, how its end is heard, what a
crash or a dead launcher leaves, and that a leader without the pod's environment is still found
by its token."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
from runtime_helpers import MakeRuntime, wait_for

from gpuaas.runtimes import procs
from gpuaas.runtimes.base import EventKind, PodSpec
from gpuaas.runtimes.launcher import PodLauncher
from gpuaas.runtimes.local import LocalRuntime
from gpuaas.runtimes.podstate import volatile_records


def _pod(name: str, script: str, **kwargs: object) -> PodSpec:
    return PodSpec(name, ("sh", "-c", script), **kwargs)  # type: ignore[arg-type]


def _launcher(runtime: LocalRuntime) -> PodLauncher:
    launcher = runtime._launcher
    assert launcher is not None
    return launcher


def _token(root: Path, key: str, pod: str) -> str:
    ns, name = key.split("/")
    path = volatile_records(root) / "workloads" / ns / name / "pods" / f"{pod}.json"
    return str(json.loads(path.read_text())["token"])


def test_leaders_are_the_launchers_children_named_after_their_token(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime()
    runtime.start("ns/a", [_pod("a-0", "sleep 30", gpus=1)])
    leader = runtime.running()["ns/a"].pods[0].pid
    assert leader is not None
    proc = psutil.Process(leader)
    assert proc.ppid() == _launcher(runtime).pid != os.getpid()
    token = _token(tmp_path / "rt", "ns/a", "a-0")
    assert proc.name() == procs.leader_name(token) == f"pod-{token}"[:15]
    # the start time the runtime recorded is the one psutil reads (adoption compares the two)
    recorded = json.loads(
        (volatile_records(tmp_path / "rt") / "workloads/ns/a/pods/a-0.json").read_text()
    )
    assert abs(recorded["start_time"] - proc.create_time()) < 0.02
    # found by its token although its environment is the launcher's; its command by its own
    assert "GPUAAS_POD_UID" not in proc.environ()
    deadline = time.monotonic() + 5
    while True:  # the command may still be forking its own child: wait until the two agree
        tree = {leader, *(c.pid for c in proc.children(recursive=True))}
        found = set(procs.processes_with_token(token))
        if len(tree) > 1 and found == tree:
            break
        assert time.monotonic() < deadline, (found, tree)
        time.sleep(0.01)


def test_exit_codes_are_heard_from_the_launcher_in_order(make_runtime: MakeRuntime) -> None:
    """Many short pods: each exit is told by the launcher and lands on its own pod, pids reused
    by later pods included (an ``x`` line always precedes the ``s`` that reuses its pid)."""
    runtime = make_runtime(gpus="0")
    for i in range(30):
        runtime.start(f"ns/w{i}", [_pod("p-0", f"exit {i % 4}")], backoff_limit=0)
    ended: dict[str, EventKind] = {}
    deadline = time.monotonic() + 20
    while len(ended) < 30:
        assert time.monotonic() < deadline, ended
        for event in runtime.poll():
            if event.kind in (EventKind.SUCCEEDED, EventKind.FAILED):
                ended[event.workload] = event.kind
        time.sleep(0.01)
    assert ended == {
        f"ns/w{i}": EventKind.SUCCEEDED if i % 4 == 0 else EventKind.FAILED for i in range(30)
    }
    assert runtime._launched == {}  # every leader it forked was reported ended


def test_a_killed_launcher_leaves_pods_followed_and_new_ones_spawned(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime()
    runtime.start("ns/a", [_pod("a-0", "sleep 0.5; exit 3", gpus=1)], backoff_limit=0)
    old = _launcher(runtime).pid
    os.kill(old, signal.SIGKILL)
    # its leader lives on (reparented), and its end is read from pod_init's exit file
    event, _ = wait_for(runtime, EventKind.FAILED, "ns/a")
    assert "exit codes [3]" in event.message
    assert runtime._launcher is None
    runtime.start("ns/b", [_pod("b-0", "sleep 30", gpus=1)])
    leader = runtime.running()["ns/b"].pods[0].pid
    assert leader is not None and psutil.Process(leader).ppid() == os.getpid()
    runtime.stop("ns/b", grace_seconds=0)
    wait_for(runtime, EventKind.STOPPED, "ns/b")


def test_a_leader_never_recorded_is_found_and_stopped_after_a_crash(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """The server died after the launcher forked the leader and before its pid was written: the
    next server finds the leader by its name and the command by its environment."""
    root = tmp_path / "rt"
    first = make_runtime(root=root)
    first.start("ns/a", [_pod("a-0", "sleep 30")])
    leader = first.running()["ns/a"].pods[0].pid
    assert leader is not None
    path = volatile_records(root) / "workloads/ns/a/pods/a-0.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "pid": None, "pgid": None, "start_time": 0.0}))
    first._runs.clear()  # the server goes away without stopping its pods

    second = make_runtime(root=root)
    assert second.adopt() == ["ns/a"]
    wait_for(second, EventKind.POD_RESTARTED, "ns/a")
    deadline = time.monotonic() + 5
    while psutil.pid_exists(leader) and psutil.Process(leader).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    second.stop("ns/a", grace_seconds=0)
    wait_for(second, EventKind.STOPPED, "ns/a")


def test_a_launcher_that_cannot_open_the_log_says_why(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime()
    launcher = _launcher(runtime)
    try:
        launcher.spawn("pod-x", Path("/nonexistent/dir/x.log"), {}, ["", "", "", "", "true"])
    except OSError as exc:
        assert "cannot open log /nonexistent/dir/x.log" in str(exc)
    else:
        raise AssertionError("a pod whose log cannot be opened was started")
    assert not launcher.gone


def test_a_pods_arguments_and_environment_reach_its_command_exactly(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """The request line carries every field's bytes: empty arguments, spaces, newlines, ``=``
    in a value, non-ASCII text and a name that is not UTF-8 arrive as they were sent."""
    runtime = make_runtime()
    launcher = _launcher(runtime)
    odd = os.fsdecode(b"caf\xe9")  # not UTF-8: carried as the bytes the kernel will hold
    args = ["", "two words", "line\nbreak", "é ü", odd, "--flag=a=b"]
    env = {
        "EMPTY": "",
        "EQUALS": "a=b=c",
        "NL": "x\ny",
        "SPACE": " lead",
        "TEXT": "ünï",
        "ODD": odd,
    }
    script = (
        "import json, os, sys\n"
        "print(json.dumps([[os.fsencode(a).hex() for a in sys.argv[1:]],"
        " {k: os.fsencode(v).hex() for k, v in os.environ.items()}]))"
    )
    log = tmp_path / "args.log"
    exit_file = tmp_path / "args.exit"
    launched = launcher.spawn(
        "pod-args",
        log,
        env,
        ["", "", str(exit_file), "", sys.executable, "-I", "-S", "-c", script, *args],
    )
    deadline = time.monotonic() + 10
    while not exit_file.exists():
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.01)
    assert exit_file.read_text().strip() == "0", log.read_text(errors="replace")
    seen_args, seen_env = json.loads(log.read_text().splitlines()[-1])
    assert [bytes.fromhex(a) for a in seen_args] == [os.fsencode(a) for a in args]
    seen = {k: bytes.fromhex(v) for k, v in seen_env.items() if k != "LC_CTYPE"}
    assert seen == {k: os.fsencode(v) for k, v in env.items()}
    assert launched.pid > 0
