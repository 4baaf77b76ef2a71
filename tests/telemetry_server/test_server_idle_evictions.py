"""Idle evictions through a real ``gpuaas server`` process, its HTTP API and the CLI.

An idle holder under an ``Evict`` rule (1 s window) is evicted and waits out its back-off
(600 s: still waiting when the test reads); ``gpuaas get hoarding`` and its API show it
BackingOff with its idle-eviction count and requeue time, the Workload carries Kueue's
``status.requeueState``, and ``gpuaas report usage`` shows the GPU-hours it wasted while flagged,
in table, CSV and JSON.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import cli, post, wait_for
from telemetry_docs import cluster_queue, configuration, flavor, local_queue, namespace, workload

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

pytestmark = pytest.mark.slow

CONFIG = configuration(
    {
        "hoarding": [{"windowSeconds": 1, "action": "Evict", "backoffBaseSeconds": 600}],
        "telemetry": {"collector": "simulated"},
    }
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    extra = ("--runtime", "none", "--fake-gpus", "2", "--telemetry-interval", "0.2")
    srv = ServerProcess(tmp_path_factory.mktemp("idle"), extra=(*extra, "--tick", "0.1"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_idle_eviction_count_and_wasted_hours_through_api_and_cli(
    server: ServerProcess, tmp_path: Path
) -> None:
    srv = server
    with srv.client() as c:
        for doc in (
            CONFIG,
            namespace("team"),
            flavor(),
            cluster_queue("cq", 2),
            local_queue("team", "lq", "cq"),
            workload("team", "idler", queue="lq", gpus=2, profile="idle"),
        ):
            assert post(c, doc).status_code == 201, doc

        def backing_off() -> list[dict[str, Any]]:
            items = c.get("/apis/gpuaas.dev/v1alpha1/hoarding").json()["items"]
            return [r for r in items if r["state"] == "BackingOff"]

        (row,) = wait_for(backing_off, "the idle eviction", timeout=30.0)
        assert (row["namespace"], row["workload"], row["idleEvictions"]) == ("team", "idler", 1)
        assert row["action"] == "Evict" and row["requeueAt"] > time.time() + 500
        status = c.get(f"{BY_KIND['Workload'].base_path()}/namespaces/team/workloads/idler")
        wl = status.json()
        assert wl["status"]["requeueState"]["count"] == 1
        evicted = {x["type"]: x for x in wl["status"]["conditions"]}["Evicted"]
        assert evicted["reason"] == "IdleGPU" and "idle eviction 1" in evicted["message"]
        usage = c.get("/apis/gpuaas.dev/v1alpha1/usage", params={"by": "namespace"}).json()
        (team,) = usage["rows"]
        assert 0 < team["wastedGPUHours"] <= team["gpuHours"]

    out = cli(srv, tmp_path, "get", "hoarding")
    assert out.returncode == 0, out.stderr
    header, line = (ln.split() for ln in out.stdout.splitlines()[:2])
    assert header[-2:] == ["IDLE-EVICTIONS", "STATE"]
    assert line[:2] == ["team", "idler"] and line[-2:] == ["1", "BackingOff"]
    out = cli(srv, tmp_path, "get", "hoarding", "-o", "json")
    assert json.loads(out.stdout)["items"][0]["idleEvictions"] == 1

    out = cli(srv, tmp_path, "report", "usage", "-o", "csv")
    assert out.returncode == 0, out.stderr
    (head, team_row) = list(csv.reader(io.StringIO(out.stdout)))[:2]
    assert head[-1] == "wasted_gpu_hours" and team_row[0] == "team"
    assert 0 < float(team_row[-1]) <= float(team_row[1])
    out = cli(srv, tmp_path, "report", "usage", "-o", "json")
    (row,) = json.loads(out.stdout)["rows"]
    assert row["wastedGPUHours"] > 0
    out = cli(srv, tmp_path, "report", "usage")
    assert out.stdout.splitlines()[0].split()[-1] == "WASTED-GPU-HOURS"
    assert "Traceback" not in srv.log_path.read_text()
