"""Kubeflow's Notebook status from a workload's phase and its pod, with gpuaas's status.url."""

from __future__ import annotations

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Phase, WorkloadState
from gpuaas.vocab.notebook_status import notebook_status


def state(phase: Phase) -> WorkloadState:
    wl = Workload("ds", "lab", "q", [PodSet("main", 1, {"nvidia.com/gpu": 1})], kind="Notebook")
    st = WorkloadState(wl, uid=1, created_at=0.0, priority=0)
    st.phase = phase
    st.admitted_at = 10.0 if phase == Phase.ADMITTED else None
    return st


def test_queued_reads_scheduling_gated_with_why() -> None:
    out = notebook_status("ds", "lab", state(Phase.PENDING), None, "no GPU (position 1 of 2)")
    assert out["readyReplicas"] == 0 and "url" not in out
    assert out["containerState"]["waiting"]["reason"] == "SchedulingGated"
    assert out["conditions"][0]["message"] == "no GPU (position 1 of 2)"


def test_running_pod_is_ready_with_its_url() -> None:
    live = {"pods": {"lab-0": "Running"}}
    out = notebook_status("ds", "lab", state(Phase.ADMITTED), live)
    assert out["readyReplicas"] == 1 and out["url"] == "/workbenches/ds/lab/"
    assert out["containerState"]["running"]["startedAt"].endswith("Z")


def test_admitted_without_a_pod_yet_is_creating() -> None:
    out = notebook_status("ds", "lab", state(Phase.ADMITTED), {"pods": {}})
    assert out["readyReplicas"] == 0
    assert out["containerState"] == {"waiting": {"reason": "ContainerCreating"}}


def test_stopped_has_no_pod() -> None:
    out = notebook_status("ds", "lab", state(Phase.ADMITTED), None, stopped=True)
    assert out == {"readyReplicas": 0, "containerState": {}, "conditions": []}
