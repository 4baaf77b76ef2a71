"""A RayCluster's KubeRay status and ``gpuaas get raycluster`` columns (pure; no Ray needed).

Seed 003's dev RayCluster in each phase of its workload, with the live part (pod phases and the
Ray nodes' records) as the runtime bridge reports it. The printed rows are the seed's
``oc get rayclusters -A`` rows plus the dashboard address.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.api import tables
from gpuaas.cli.reading import table_lines
from gpuaas.core.manifests import parse_object
from gpuaas.core.objects import Workload
from gpuaas.core.state import Admission, Condition, Phase, PodSetAssignment, WorkloadState
from gpuaas.vocab.kinds import BY_KIND
from gpuaas.vocab.ray_status import dashboard_address, memory_text, ray_cluster_status

SEED = Path(__file__).resolve().parents[2] / "examples" / "003-rayclusters"
DOC = yaml.safe_load((SEED / "team-b-ray-cluster-dev.yaml").read_text())
HEAD_POD, W0, W1 = (
    "raycluster-dev-head-0",
    "raycluster-dev-small-group-test-0",
    "raycluster-dev-small-group-test-1",
)


def _state(phase: Phase, finished: str | None = None) -> WorkloadState:
    wl = parse_object(DOC)
    assert isinstance(wl, Workload)
    st = WorkloadState(wl, uid=1, created_at=0.0, priority=100, phase=phase)
    if phase in (Phase.ADMITTED, Phase.EVICTING):
        st.admission = Admission(
            "team-b-cq",
            [PodSetAssignment(ps.name, {}, ps.count, {}) for ps in wl.pod_sets],
        )
    if finished is not None:
        st.conditions["Finished"] = Condition("Finished", "True", finished, "", 0.0)
    return st


def _record(pod: str, run: str = "r1", ready: bool = True) -> dict[str, Any]:
    return {"pod": pod, "run": run, "ready": ready, "nodeIP": "127.0.0.1"}


HEAD = {**_record(HEAD_POD), "ports": {"gcs": 6379, "client": 10001, "dashboard": 8265}}
RUNNING = {HEAD_POD: "Running", W0: "Running", W1: "Running"}
UP = {
    "pods": RUNNING,
    "ray": {"head": HEAD, f"worker-{W0}": _record(W0), f"worker-{W1}": _record(W1)},
}


@pytest.mark.parametrize(
    ("st", "live", "state", "available", "dashboard"),
    [
        (_state(Phase.PENDING), None, "suspended", None, ""),
        (_state(Phase.INACTIVE), None, "suspended", None, ""),
        (_state(Phase.EVICTING), UP, "suspending", 2, "http://127.0.0.1:8265"),
        (_state(Phase.ADMITTED), {"pods": {}, "ray": {}}, "", None, ""),
        (_state(Phase.ADMITTED), UP, "ready", 2, "http://127.0.0.1:8265"),
        # one worker still starting: not ready yet, one available
        (_state(Phase.ADMITTED),
         {"pods": RUNNING, "ray": {**UP["ray"], f"worker-{W1}": _record(W1, ready=False)}},
         "", 1, "http://127.0.0.1:8265"),
        # a record left by an earlier run does not count
        (_state(Phase.ADMITTED),
         {"pods": RUNNING, "ray": {**UP["ray"], f"worker-{W1}": _record(W1, run="r0")}},
         "", 1, "http://127.0.0.1:8265"),
        # the head's pod is terminating: no address to give
        (_state(Phase.ADMITTED), {"pods": {**RUNNING, HEAD_POD: "Terminating"}, "ray": UP["ray"]},
         "", None, ""),
        (_state(Phase.FINISHED, "Failed"), None, "failed", None, ""),
        (_state(Phase.FINISHED, "Succeeded"), None, "", None, ""),
        (None, None, "", None, ""),
    ],
    ids=["pending", "inactive", "evicting", "starting", "ready", "one-worker-starting",
         "stale-record", "head-terminating", "failed", "succeeded", "not-a-workload"],
)  # fmt: skip
def test_status(
    st: WorkloadState | None,
    live: dict[str, Any] | None,
    state: str,
    available: int | None,
    dashboard: str,
) -> None:
    status = ray_cluster_status(st, live)
    assert status["state"] == state
    assert status.get("availableWorkerReplicas") == available
    assert dashboard_address(status) == dashboard
    if st is not None:  # the seed's totals: 2 workers, 6 CPUs, 16G, no GPU
        assert (status["desiredWorkerReplicas"], status["desiredCPU"]) == (2, "6")
        assert (status["desiredMemory"], status["desiredGPU"]) == ("16G", "0")
    if dashboard:
        assert status["endpoints"] == {"gcs-server": "6379", "client": "10001", "dashboard": "8265"}
        assert status["head"] == {"podIP": "127.0.0.1", "podName": HEAD_POD}


@pytest.mark.parametrize(
    ("value", "text"),
    [(16 * 10**9, "16G"), (24 * 10**9, "24G"), (64 * 2**30, "64Gi"), (1000 * 2**20, "1000Mi"),
     (0, "0"), (1536, "1536")],
)  # fmt: skip
def test_memory_text(value: int, text: str) -> None:
    assert memory_text(value) == text


def test_printer_columns_are_kuberays_and_the_dashboard() -> None:
    """The server's Table (KubeRay's printer columns, then the dashboard), as ``gpuaas get``
    lays it out."""
    kind = BY_KIND["RayCluster"]
    ready = {**DOC, "status": ray_cluster_status(_state(Phase.ADMITTED), UP)}
    suspended = {**DOC, "status": ray_cluster_status(_state(Phase.PENDING), None)}
    table = tables.table(kind, "v1", [ready, suspended])
    lines = table_lines(table, wide=False, all_ns=True)
    assert lines[0] == ["NAMESPACE", "NAME", "DESIRED WORKERS", "AVAILABLE WORKERS", "CPUS",
                        "MEMORY", "GPUS", "STATUS", "AGE", "DASHBOARD"]  # fmt: skip
    assert [r[:8] + r[9:] for r in lines[1:]] == [
        ["team-b", "raycluster-dev", "2", "2", "6", "16G", "0", "ready", "http://127.0.0.1:8265"],
        ["team-b", "raycluster-dev", "2", "", "6", "16G", "0", "suspended", ""],
    ]
    wide = table_lines(table, wide=True, all_ns=False)[0]
    assert "HEAD POD IP" in wide and "HEAD SERVICE IP" in wide and "TPUS" in wide
