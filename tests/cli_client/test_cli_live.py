"""The kubectl-like CLI against a live server: apply the seed, get, -w, describe, explain, delete,
tokens and login (over TLS with a self-signed certificate)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess, self_signed_cert
from gpuaas.cli.kubectl import build_app

SEED = Path(__file__).parent / "seed"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "data").start()
    try:
        yield srv
    finally:
        srv.kill()


def _env(srv: ServerProcess, tmp_path: Path, token: str | None = None) -> dict[str, str]:
    return {
        "GPUAAS_SERVER": srv.url,
        "GPUAAS_TOKEN": token or srv.admin_token,
        "GPUAAS_CONFIG": str(tmp_path / "cfg.json"),
        "GPUAAS_INSECURE": "1",
    }


def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), list(args), env=env)
    return result.exit_code, result.output


def test_seed_demo_through_the_cli(live: ServerProcess, tmp_path: Path) -> None:
    env = _env(live, tmp_path)
    code, out = run(env, "apply", "-f", str(SEED / "setup.yaml"))
    assert code == 0, out
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq created" in out
    code, out = run(env, "apply", "-f", str(SEED / "setup.yaml"))
    assert "unchanged" in out and code == 0
    code, out = run(env, "get", "cq")
    # The server's Table: Kueue's CRD puts Admitted Workloads at priority 1 (-o wide).
    assert out.splitlines()[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
    code, out = run(env, "get", "cq", "-o", "wide")
    assert out.splitlines()[0].split() == ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS",
                                           "ADMITTED", "WORKLOADS"]  # fmt: skip
    assert run(env, "apply", "-f", str(SEED / "team-b-job.yaml"))[0] == 0
    watcher = subprocess.Popen(
        [sys.executable, "-m", "gpuaas.cli.kubectl", "get", "workload", "-A", "-w"],
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[list[str]] = []
    got = threading.Condition()

    def read() -> None:
        assert watcher.stdout is not None
        for raw in watcher.stdout:
            if raw.strip():
                with got:
                    lines.append(raw.split())
                    got.notify_all()

    def wait_for(pred: Callable[[], bool]) -> bool:
        # Waits on the stream itself (not a fixed sleep), so a loaded machine only makes it slower.
        with got:
            return got.wait_for(pred, timeout=60)

    def b_states() -> list[str]:
        return [ln[-2] for ln in lines[1:] if len(ln) > 2 and ln[1] == "team-b-job"]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # The watch lists what exists first, so seeing team-b admitted also says it is established.
        assert wait_for(lambda: "True" in b_states()), lines
        assert run(env, "apply", "-f", str(SEED / "team-a-job.yaml"))[0] == 0
        code, out = run(env, "get", "wl", "-A")
        rows = {ln.split()[1]: ln.split() for ln in out.splitlines()[1:]}
        assert out.splitlines()[0].split()[:5] == ["NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN"]
        assert rows["team-a-job"][4] == "True" and rows["team-b-job"][3] == "False"
        assert wait_for(lambda: b_states()[-1:] == ["False"]), lines
    finally:
        os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(timeout=10)
        reader.join(timeout=10)
        if watcher.stdout is not None:
            watcher.stdout.close()
    assert lines[0][:2] == ["NAMESPACE", "NAME"]
    assert "True" in b_states() and b_states()[-1] == "False"  # admitted, then preempted, live
    code, out = run(env, "describe", "workload", "team-b-job", "-n", "team-b")
    assert code == 0 and "Preempted to accommodate a workload (UID: " in out
    assert "team-a-job" not in out  # the preemptor is named by its UIDs only
    assert "Events:" in out and "EvictedDueToPreempted" in out
    code, out = run(env, "explain", "workload", "team-b-job", "-n", "team-b")
    assert code == 0 and "Position:       1 of 1" in out and "What would have to change" in out
    code, out = run(env, "get", "wl", "team-a-job", "-n", "team-a", "-o", "yaml")
    assert "podSetAssignments" in out
    code, out = run(env, "delete", "job", "team-a-job", "-n", "team-a")
    assert code == 0 and "deleted" in out
    # Readmitted once Kueue's 1 s requeue batch returns it to its queue: poll for it, never sleep.
    deadline = time.monotonic() + 60
    while True:
        code, out = run(env, "get", "wl", "-n", "team-b")
        if out.splitlines()[1].split()[3] == "True" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert out.splitlines()[1].split()[3] == "True", out  # readmitted


def test_tokens_and_errors(live: ServerProcess, tmp_path: Path) -> None:
    env = _env(live, tmp_path)
    assert run(env, "apply", "-f", str(SEED))[0] == 0  # a directory
    code, token = run(env, "token", "create", "--namespace", "team-a")
    assert code == 0
    tenant = _env(live, tmp_path, token.strip())
    code, out = run(tenant, "get", "wl", "-n", "team-b")
    assert code == 1 and "Forbidden" in out
    code, out = run(tenant, "get", "wl", "-A")
    assert "team-b" not in out and "team-a-job" in out
    code, out = run(tenant, "delete", "cq", "team-a-cq")
    assert code == 1 and "Forbidden" in out
    local = subprocess.run(
        [sys.executable, "-m", "gpuaas.cli.kubectl", "token", "create", "-n", "team-b",
         "--data-dir", str(live.data_dir)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    code, out = run(_env(live, tmp_path, local.stdout.strip()), "get", "wl", "-n", "team-b")
    assert code == 0 and "team-b-job" in out
    code, out = run(_env(live, tmp_path, "bogus"), "get", "cq")
    assert code == 1 and "Unauthorized" in out
    code, out = run(env, "get", "nosuchkind")
    assert code == 1 and "doesn't have a resource type" in out


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
def test_login_over_tls(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    srv = ServerProcess(
        tmp_path / "data", extra=("--tls-cert", str(cert), "--tls-key", str(key)), tls=True
    )
    try:
        srv.start()
        env = {"GPUAAS_CONFIG": str(tmp_path / "cfg.json")}
        code, out = run(env, "login", srv.url, "--token", srv.admin_token, "--ca", str(cert))
        assert code == 0, out
        assert (tmp_path / "cfg.json").stat().st_mode & 0o777 == 0o600
        code, out = run(env, "apply", "-f", str(SEED / "setup.yaml"))
        assert code == 0, out
        code, out = run(env, "get", "rf")
        assert "gpu-flavor" in out
        code, out = run(env, "login", srv.url, "--token", srv.admin_token)  # untrusted cert
        assert code == 1 and "login failed" in out
    finally:
        srv.kill()
