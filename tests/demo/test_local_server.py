"""A real ``gpuaas server`` with the local runtime: Jobs run, logs stream, preemption stops pods.

The server is a child process with 4 fake GPUs; it is stopped with SIGTERM, which stops every pod
it started, so no process outlives the test (the suite's conftest checks it too).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.main import build_app

SEED = Path(__file__).resolve().parents[2] / "src" / "gpuaas" / "demos" / "004"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def _job(name: str, script: str) -> dict[str, Any]:
    doc = copy.deepcopy(_docs(name)[0])
    spec = doc["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 1
    spec["containers"][0]["command"] = ["sh", "-c", script]
    return doc


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "data", extra=("--runtime", "local", "--fake-gpus", "4"))
    try:
        yield srv.start()
    finally:
        srv.stop()


def _create(c: httpx.Client, doc: dict[str, Any]) -> None:
    kind, meta = doc["kind"], doc["metadata"]
    base = {"Namespace": "/api/v1", "Job": "/apis/batch/v1"}.get(kind, KUEUE)
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    path = (
        f"{base}/namespaces/{meta['namespace']}/{plural}"
        if "namespace" in meta
        else f"{base}/{plural}"
    )
    r = c.post(path, json=doc)
    assert r.status_code == 201, r.text


def _until(c: httpx.Client, what: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what(c)
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def _pods(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    for item in c.get(f"{GPUAAS}/runtime/pods").json()["items"]:
        if f"{item['namespace']}/{item['workload']}" == key and not item["stopping"]:
            return list(item["pods"])
    return []


def test_jobs_run_log_and_are_preempted_for_real(server: ServerProcess, tmp_path: Path) -> None:
    with server.client() as c:
        for doc in _docs("setup.yaml"):
            _create(c, doc)
        _create(c, _job("team-b-job.yaml", "echo hi; sleep 30"))
        dev = _until(c, lambda c: _pods(c, "team-b/team-b-job"))[0]
        logs = f"{GPUAAS}/namespaces/team-b/workloads/team-b-job/logs"
        assert _until(c, lambda c: c.get(logs).text) == "hi\n"
        env = {"GPUAAS_SERVER": server.url, "GPUAAS_TOKEN": server.admin_token,
               "GPUAAS_CONFIG": str(tmp_path / "none.json")}  # fmt: skip
        out = CliRunner().invoke(build_app(), ["logs", "team-b-job", "-n", "team-b"], env=env)
        assert out.exit_code == 0 and out.output == "hi\n", out.output
        missing = CliRunner().invoke(build_app(), ["logs", "nope", "-n", "team-b"], env=env)
        assert missing.exit_code == 1 and "NotFound" in missing.output

        with c.stream("GET", logs, params={"follow": "true"}) as follow:
            _create(c, _job("team-a-job.yaml", "echo prod; sleep 30"))
            streamed = list(follow.iter_lines())  # ends when the preempted pod is gone
        assert streamed[0] == "hi"  # then the shell may say its sleep was "Terminated"
        prod = _until(c, lambda c: _pods(c, "team-a/team-a-job"))[0]
        assert prod["gpus"] == [0, 1]
        assert not psutil.pid_exists(dev["pid"]) or psutil.Process(dev["pid"]).status() == "zombie"
        events = c.get("/api/v1/events").json()["items"]
        trail = [(e["involvedObject"]["name"], e["reason"]) for e in events]
        assert trail.index(("team-b-job", "Stopped")) < trail.index(("team-a-job", "Started"))
        assert trail.index(("team-b-job", "EvictedDueToPreempted")) < trail.index(
            ("team-b-job", "Stopped")
        )
    server.stop()  # graceful: the server stops the prod Job's pod before it exits
    assert not psutil.pid_exists(prod["pid"]) or psutil.Process(prod["pid"]).status() == "zombie"


def test_server_refuses_a_bad_fake_gpu_spec(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", extra=("--fake-gpus", "lots"))
    with pytest.raises(RuntimeError, match="exited with 2"):
        srv.start(timeout=30)
    assert "lots" in srv.log()
