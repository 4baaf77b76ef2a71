"""A RayJob's KubeRay status (pure; no Ray needed): ``jobDeploymentStatus`` in each phase of its
Kueue workload, ``jobStatus`` and ``jobId`` from the submitter's record of the Ray job (only of
the running cluster's run), and the failure reason (``DeadlineExceeded`` past
``spec.activeDeadlineSeconds``, else ``AppFailed``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Admission, Condition, Phase, PodSetAssignment, WorkloadState
from gpuaas.vocab.ray_status import active_deadline, ray_job_status

SPEC: dict[str, Any] = {"entrypoint": "python job.py", "activeDeadlineSeconds": 60}


def _state(phase: Phase, finished: str | None = None, ran: float = 10.0) -> WorkloadState:
    """A RayJob's workload (a head and a submitter), admitted at t=100 when it was; finished
    ``ran`` seconds later when ``finished`` says how."""
    pod_sets = [PodSet("head", 1, {"cpu": 1000}), PodSet("submitter", 1, {"cpu": 1000})]
    wl = Workload("ns", "rj", "lq", pod_sets)
    st = WorkloadState(wl, uid=1, created_at=0.0, priority=0, phase=phase)
    if phase != Phase.PENDING:
        st.admitted_at = 100.0
        st.admission = Admission("cq", [PodSetAssignment(p.name, {}, 1, {}) for p in pod_sets])
    if finished is not None:
        st.conditions["Finished"] = Condition("Finished", "True", finished, "", 100.0 + ran)
    return st


HEAD = {"run": "r1", "pod": "rj-head-0", "ready": True, "nodeIP": "10.0.0.7",
        "ports": {"gcs": 6379, "dashboard": 8265}}  # fmt: skip


def _live(job_status: str | None, run: str = "r1") -> dict[str, Any]:
    ray: dict[str, Any] = {"head": HEAD}
    if job_status is not None:
        ray["submitter"] = {"run": run, "role": "submitter", "jobId": "raysubmit_1",
                            "jobStatus": job_status, "dashboardURL": "http://10.0.0.7:8265"}  # fmt: skip
    return {"pods": {"rj-head-0": "Running", "rj-submitter-0": "Running"}, "ray": ray}


@pytest.mark.parametrize(
    ("st", "live", "deployment", "job_status", "reason"),
    [
        pytest.param(_state(Phase.PENDING), None, "Suspended", None, None, id="pending"),
        pytest.param(_state(Phase.INACTIVE), None, "Suspended", None, None, id="inactive"),
        pytest.param(
            _state(Phase.EVICTING),
            _live("RUNNING"),
            "Suspending",
            "RUNNING",
            None,
            id="evicted, its pods stopping",
        ),
        pytest.param(
            _state(Phase.ADMITTED),
            _live(None),
            "Initializing",
            None,
            None,
            id="cluster starting, no job yet",
        ),
        pytest.param(
            _state(Phase.ADMITTED), _live("PENDING"), "Running", "PENDING", None, id="job submitted"
        ),
        pytest.param(
            _state(Phase.ADMITTED), _live("RUNNING"), "Running", "RUNNING", None, id="job running"
        ),
        pytest.param(
            _state(Phase.ADMITTED),
            _live("FAILED", run="r0"),
            "Initializing",
            None,
            None,
            id="an earlier run's job does not count",
        ),
        pytest.param(
            _state(Phase.FINISHED, "Succeeded"), None, "Complete", "SUCCEEDED", None, id="succeeded"
        ),
        pytest.param(
            _state(Phase.FINISHED, "Failed"), None, "Failed", None, "AppFailed", id="failed"
        ),
        pytest.param(
            _state(Phase.FINISHED, "Failed", ran=60.0),
            None,
            "Failed",
            None,
            "DeadlineExceeded",
            id="failed at its deadline",
        ),
    ],
)
def test_job_deployment_status_follows_the_workload_and_the_ray_job(
    st: WorkloadState,
    live: dict[str, Any] | None,
    deployment: str,
    job_status: str | None,
    reason: str | None,
) -> None:
    status = ray_job_status(st, live, SPEC)
    assert status["jobDeploymentStatus"] == deployment
    assert status.get("jobStatus") == job_status
    assert status.get("reason") == reason
    if job_status in ("PENDING", "RUNNING"):
        assert status["jobId"] == "raysubmit_1"
        assert status["dashboardURL"] == "http://10.0.0.7:8265"
    assert "rayClusterStatus" in status


def test_a_rayjobs_cluster_status_leaves_its_submitter_out() -> None:
    """The submitter is a Kubernetes Job beside the RayJob's cluster: not a worker, not in the
    cluster's totals, and the cluster is ready once its head (and workers) are."""
    cluster = ray_job_status(_state(Phase.ADMITTED), _live("RUNNING"), SPEC)["rayClusterStatus"]
    assert cluster["state"] == "ready"
    assert (cluster["desiredWorkerReplicas"], cluster["desiredCPU"]) == (0, "1")
    assert cluster["head"] == {"podIP": "10.0.0.7", "podName": "rj-head-0"}


def test_a_rayjob_with_no_workload_has_no_status() -> None:
    assert ray_job_status(None, None, SPEC) == {}


@pytest.mark.parametrize(
    ("spec", "deadline"),
    [({}, None), ({"activeDeadlineSeconds": 5}, 5), ({"activeDeadlineSeconds": 0}, None),
     ({"activeDeadlineSeconds": True}, None), ({"activeDeadlineSeconds": "5"}, None)],
)  # fmt: skip
def test_active_deadline_is_a_whole_number_of_seconds_above_zero(
    spec: dict[str, Any], deadline: int | None
) -> None:
    assert active_deadline(spec) == deadline
