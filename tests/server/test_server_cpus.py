"""``gpuaas server --cpus``: the server's own threads on the CPUs named and as ``SCHED_BATCH``,
its pods on every CPU it had with the default policy, and a list it cannot use refused before
anything starts (``gpuaas.cpus``)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas import cpus
from gpuaas.api.testing import ServerProcess

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"
ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
needs_two = pytest.mark.skipif(
    len(ALLOWED) < 2, reason="one CPU here: a pinned server and its pods cannot be told apart"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{0}", [0]),
        ("{0}-{0}", [0]),
        (" {0} , {0} ", [0]),
        ("{0}-{1}", [0, 1]),
        ("{0},{1}", [0, 1]),
    ],
)
def test_a_list_in_tasksets_syntax_names_those_cpus(text: str, expected: list[int]) -> None:
    if len(ALLOWED) < 2 and "{1}" in text:
        pytest.skip("one CPU here")
    got = cpus.parse(text.format(*ALLOWED[:2]))
    assert got == frozenset(ALLOWED[i] for i in expected)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "'' is not a CPU number"),
        ("zero", "'zero' is not a CPU number"),
        ("0-", "'0-' is not a CPU number"),
        ("0,,1", "'' is not a CPU number"),
        ("3-1", "'3-1' is not a range"),
        ("-1", "'-1' is not a CPU number"),
        ("{beyond}", "CPU {beyond} is not one this process may run on"),
        ("0-99999999999", "CPU {beyond}-99999999999 is not one this process may run on"),
    ],
)
def test_a_list_that_cannot_be_used_says_which_part_and_why(text: str, says: str) -> None:
    beyond = (max(ALLOWED) if ALLOWED else 0) + 1
    with pytest.raises(cpus.CpuListError, match=re.escape(says.format(beyond=beyond))):
        cpus.parse(text.format(beyond=beyond))


@given(st.sets(st.integers(min_value=0, max_value=300), min_size=1))
def test_describe_writes_a_list_that_names_the_same_cpus(chosen: set[int]) -> None:
    text = cpus.describe(chosen)
    named: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        named.update(range(int(low), int(high or low) + 1))
    assert named == chosen
    assert len(text.split(",")) == sum(1 for c in chosen if c - 1 not in chosen)  # one a run


def _allowed(pid: int | str, tid: int | str | None = None) -> str | None:
    """A process's (or one of its threads') CPUs as /proc writes them; None once it is gone."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    try:
        text = Path(path).read_text()
    except OSError:  # a thread that ended since the directory was listed
        return None
    found = re.search(r"^Cpus_allowed_list:\s*(\S+)$", text, re.M)
    assert found is not None
    return found.group(1)


def _policy(pid: int | str, tid: int | str | None = None) -> int | None:
    """A process's (or thread's) scheduling policy, ``/proc/PID/stat`` field 41; None if gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        stat = Path(path).read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[38])


def _setup(c: httpx.Client) -> None:
    docs: list[tuple[str, str, dict[str, Any]]] = [
        ("resourceflavors", "ResourceFlavor", {"metadata": {"name": "default-flavor"}}),
        ("clusterqueues", "ClusterQueue", {"metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu"], "flavors": [{"name": "default-flavor",
                "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}),
        ("namespaces/default/localqueues", "LocalQueue",
         {"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}),
    ]  # fmt: skip
    for path, kind, doc in docs:
        r = c.post(
            f"{KUEUE}/{path}", json={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **doc}
        )
        assert r.status_code == 201, r.text


@needs_two
def test_the_servers_threads_run_on_its_cpus_and_its_pods_on_all_it_had(
    tmp_path: Path,
) -> None:
    own = str(ALLOWED[0])
    srv = ServerProcess(
        tmp_path / "data", extra=("--runtime", "local", "--fake-gpus", "0", "--cpus", own)
    )
    srv.start()
    try:
        assert srv.proc is not None
        pid = srv.proc.pid
        threads = os.listdir(f"/proc/{pid}/task")
        assert len(threads) > 3  # the event loop, the group commit, the runtime's, ...
        assert {_allowed(pid, t) for t in threads} - {None} == {own}
        assert {_policy(pid, t) for t in threads} - {None} == {os.SCHED_BATCH}
        assert f"server threads on CPU {own} (SCHED_BATCH)" in srv.log()
        with srv.client() as c:
            _setup(c)
            job = {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "where", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}},
                    "command": ["sh", "-c",
                                "echo policy $(cut -d' ' -f41 /proc/self/stat); "
                                "grep Cpus_allowed_list /proc/self/status; exec sleep 30"]}]}}},
            }  # fmt: skip
            r = c.post("/apis/batch/v1/namespaces/default/jobs", json=job)
            assert r.status_code == 201, r.text
            logs = f"{GPUAAS}/namespaces/default/workloads/where/logs"
            deadline = time.monotonic() + 20
            while "Cpus_allowed_list" not in (text := c.get(logs).text):
                assert time.monotonic() < deadline, text
                time.sleep(0.05)
        assert text.split()[-1] == cpus.describe(set(ALLOWED))  # every CPU the server had
        assert f"policy {os.SCHED_OTHER}\n" in text  # and the default policy, not the server's
        launchers = [
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit() and b"pod_launcher" in _cmdline(p) and _parent(p) == pid
        ]
        assert launchers, "no pod launcher among the server's children"
        assert {_allowed(p) for p in launchers} == {own}  # the server's helper: its CPU
        assert {_policy(p) for p in launchers} == {os.SCHED_BATCH}  # and its policy
    finally:
        srv.stop()


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: str) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rfind(")") + 2 :].split()[1])


@pytest.mark.skipif(not ALLOWED, reason="no sched_getaffinity here")
def test_a_cpu_the_server_may_not_use_is_refused_before_it_starts(tmp_path: Path) -> None:
    beyond = str(max(ALLOWED) + 1)
    srv = ServerProcess(tmp_path / "data", extra=("--cpus", beyond))
    with pytest.raises(RuntimeError, match="exited with 2"):
        srv.start(timeout=30)
    log = srv.log()
    assert f"--cpus '{beyond}': CPU {beyond} is not one this process may run on" in log
    assert "Traceback" not in log
    assert not (tmp_path / "data" / "gpuaas.db").exists()  # refused before the store opened


@needs_two
def test_the_ray_driver_takes_the_cpus_it_is_given_before_anything_else() -> None:
    """A pinned server's Ray driver (``python -m gpuaas.runtimes.ray_driver FD CPUS``) runs on
    every CPU the server had, and so does any Ray cluster it starts: it takes them first thing,
    before it reads its arguments (here: none come, it waits, then ends with the connection),
    with the default scheduling policy instead of the server's ``SCHED_BATCH``."""
    ours, theirs = socket.socketpair()
    wanted = str(ALLOWED[0])
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuaas.runtimes.ray_driver", str(theirs.fileno()), wanted],
        pass_fds=(theirs.fileno(),),
        preexec_fn=lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)),
    )
    theirs.close()
    try:
        deadline = time.monotonic() + 20
        while (_allowed(proc.pid), _policy(proc.pid)) != (wanted, os.SCHED_OTHER):
            assert proc.poll() is None and time.monotonic() < deadline, _policy(proc.pid)
            time.sleep(0.02)
    finally:
        ours.close()  # end of its input: it ends
        assert proc.wait(timeout=20) == 0


@pytest.mark.skipif(not ALLOWED, reason="no sched_getaffinity here")
def test_pin_says_a_refused_policy_and_still_takes_the_cpus() -> None:
    """Where the system refuses ``SCHED_BATCH`` (a sandbox's seccomp filter; here the call is
    made to fail in a child of its own, which ``pin`` also binds), the CPUs are still taken and
    the refusal is said, not raised: the policy is a gain, the CPUs are what was asked for."""
    code = (
        "import os, sys\n"
        "def refused(*args): raise PermissionError(1, 'Operation not permitted')\n"
        "os.sched_setscheduler = refused\n"
        "from gpuaas import cpus\n"
        f"print(cpus.pin(frozenset({{{ALLOWED[0]}}})))\n"
        "print(sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[0] == "its policy unchanged: SCHED_BATCH refused ([Errno 1] Operation not permitted)"
    assert out[1] == f"[{ALLOWED[0]}] {os.SCHED_OTHER}"


@pytest.mark.skipif(not ALLOWED, reason="no sched_getaffinity here")
@pytest.mark.parametrize(
    ("start", "says"),
    [
        # the server's SCHED_BATCH was refused: the pod has nothing to undo and starts
        ("SCHED_OTHER", ""),
        # it took, and the pod cannot leave it: the pod's own problem, said (exit 126)
        ("SCHED_BATCH", "cannot take the default scheduling policy (SCHED_OTHER): "
                        "[Errno 1] Operation not permitted"),
    ],
)  # fmt: skip
def test_a_pods_leader_leaves_the_servers_policy_only_where_it_has_it(
    start: str, says: str
) -> None:
    """``pod_init`` takes ``SCHED_OTHER`` back only from another policy: where the system
    refuses the call (here made to fail, in a child of its own) a server whose ``SCHED_BATCH``
    was refused still starts its pods."""
    code = (
        "import os\n"
        f"os.sched_setscheduler(0, os.{start}, os.sched_param(0))\n"
        "def refused(*args): raise PermissionError(1, 'Operation not permitted')\n"
        "os.sched_setscheduler = refused\n"
        "from gpuaas.runtimes import pod_init\n"
        f"print(repr(pod_init._prepare('', '{ALLOWED[0]}', '')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    assert out == repr(says)
