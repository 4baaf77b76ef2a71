"""A RayCluster's and a RayJob's status as KubeRay writes them, from the Kueue workload and what
really runs.

KubeRay's printer columns read ``status.desiredWorkerReplicas``, ``availableWorkerReplicas``,
``desiredCPU``, ``desiredMemory``, ``desiredGPU`` and ``state``; ``status.endpoints`` and
``status.head`` say where the head listens. Under Kueue a RayCluster that is not admitted is
suspended, so ``state`` is ``suspended`` while its workload is pending (never admitted, or evicted
and requeued), ``ready`` once the head and every worker of the current run are up, and empty while
they start, as KubeRay leaves it. ``suspending`` (KubeRay's ``RayClusterSuspending`` condition) is
shown while an evicted cluster's pods are stopping. Pure: the live part (pod phases, the Ray
records of ``runtimes.ray_pod``) is passed in; no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from gpuaas.core.quantity import format_quantity
from gpuaas.core.state import Phase, WorkloadState

JsonDoc = dict[str, Any]
HEAD = "head"
SUBMITTER = "submitter"  # the RayJob submitter's record (``runtimes.ray_pod``)
GPU = "nvidia.com/gpu"
_DECIMAL = (("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def ray_cluster_status(
    st: WorkloadState | None, live: JsonDoc | None, *, of_rayjob: bool = False
) -> JsonDoc:
    """``of_rayjob``: the cluster of a RayJob, whose workload also has the submitter's pod set
    (Kueue's ``submitter``), a Kubernetes Job beside the cluster: neither a worker nor counted
    in the cluster's totals."""
    skip = (HEAD, SUBMITTER) if of_rayjob else (HEAD,)
    status: JsonDoc = {"state": _state(st, live, skip)}
    if st is not None:
        cluster = [ps for ps in st.workload.pod_sets if not (of_rayjob and ps.name == SUBMITTER)]
        workers = [ps for ps in cluster if ps.name not in skip]
        status["desiredWorkerReplicas"] = sum(ps.count for ps in workers)
        totals: dict[str, int] = {}
        for ps in cluster:
            for res, value in ps.requests.items():
                totals[res] = totals.get(res, 0) + value * ps.count
        status["desiredCPU"] = format_quantity(totals.get("cpu", 0), "cpu")
        status["desiredMemory"] = memory_text(totals.get("memory", 0))
        status["desiredGPU"] = str(totals.get(GPU, 0))
    head, ready_workers = _nodes(live)
    if ready_workers:  # KubeRay omits a zero
        status["availableWorkerReplicas"] = status["readyWorkerReplicas"] = ready_workers
    if head is not None:
        ports = head.get("ports") or {}
        endpoints = {"gcs-server": ports.get("gcs"), "client": ports.get("client")}
        endpoints["dashboard"] = ports.get("dashboard")
        status["endpoints"] = {k: str(v) for k, v in endpoints.items() if v is not None}
        status["head"] = {"podIP": str(head.get("nodeIP", "")), "podName": str(head.get("pod"))}
    return status


def dashboard_address(status: JsonDoc) -> str:
    """``http://IP:PORT`` of the Ray dashboard, or "" when there is none (yet)."""
    ip = (status.get("head") or {}).get("podIP")
    port = (status.get("endpoints") or {}).get("dashboard")
    return f"http://{ip}:{port}" if ip and port else ""


def memory_text(value: int) -> str:
    """The shortest exact Kubernetes text, decimal ("16G", as KubeRay sums "8G") or binary."""
    candidates = [format_quantity(value, "memory")]
    for suffix, unit in _DECIMAL:
        if value and value % unit == 0:
            candidates.append(f"{value // unit}{suffix}")
    return min(candidates, key=len)


def _state(st: WorkloadState | None, live: JsonDoc | None, skip: tuple[str, ...]) -> str:
    if st is None:
        return ""
    if st.phase in (Phase.PENDING, Phase.INACTIVE):
        return "suspended"
    if st.phase == Phase.EVICTING:
        return "suspending"
    if st.phase == Phase.FINISHED:
        finished = st.conditions.get("Finished")
        return "failed" if finished is not None and finished.reason == "Failed" else ""
    head, ready_workers = _nodes(live)
    admitted = st.admission.pod_sets if st.admission is not None else st.workload.pod_sets
    workers = sum(ps.count for ps in admitted if ps.name not in skip)
    return "ready" if head is not None and head.get("ready") and ready_workers >= workers else ""


def _nodes(live: JsonDoc | None) -> tuple[JsonDoc | None, int]:
    """The head's record (its pod running) and how many workers of its run are ready."""
    if not live:
        return None, 0
    pods: dict[str, str] = live.get("pods") or {}
    records: dict[str, JsonDoc] = live.get("ray") or {}
    head = records.get(HEAD)
    if head is None or pods.get(str(head.get("pod"))) != "Running":
        return None, 0
    ready = sum(
        1
        for key, rec in records.items()
        if key != HEAD
        and rec.get("run") == head.get("run")
        and rec.get("ready")
        and pods.get(str(rec.get("pod"))) == "Running"
    )
    return head, ready


def ray_job_status(st: WorkloadState | None, live: JsonDoc | None, spec: JsonDoc) -> JsonDoc:
    """A RayJob's status as KubeRay writes it: ``jobStatus`` (the Ray job's own, read from its
    cluster by the submitter: PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED),
    ``jobDeploymentStatus`` (Suspended while Kueue has not admitted it, Suspending while its
    pods stop, Initializing until its job is seen, Running, then Complete or Failed), ``reason``
    when it failed (``DeadlineExceeded`` past ``spec.activeDeadlineSeconds``, else
    ``AppFailed``), ``jobId``, ``dashboardURL`` and ``rayClusterStatus``."""
    if st is None:
        return {}
    job = _job_record(live)
    status: JsonDoc = {"rayClusterStatus": ray_cluster_status(st, live, of_rayjob=True)}
    for field in ("jobId", "dashboardURL", "jobStatus", "message"):
        if job.get(field):
            status[field] = job[field]
    if st.phase in (Phase.PENDING, Phase.INACTIVE):
        status["jobDeploymentStatus"] = "Suspended"
    elif st.phase == Phase.EVICTING:
        status["jobDeploymentStatus"] = "Suspending"
    elif st.phase == Phase.FINISHED:
        finished = st.conditions.get("Finished")
        if finished is not None and finished.reason == "Succeeded":
            status["jobDeploymentStatus"] = "Complete"
            status["jobStatus"] = "SUCCEEDED"
        else:
            status["jobDeploymentStatus"] = "Failed"
            status["reason"] = "DeadlineExceeded" if _past_deadline(st, spec) else "AppFailed"
    else:
        status["jobDeploymentStatus"] = "Running" if job.get("jobStatus") else "Initializing"
    return status


def active_deadline(spec: JsonDoc) -> int | None:
    """``spec.activeDeadlineSeconds`` when it is a whole number of seconds above 0."""
    value = spec.get("activeDeadlineSeconds")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _past_deadline(st: WorkloadState, spec: JsonDoc) -> bool:
    deadline = active_deadline(spec)
    finished = st.conditions.get("Finished")
    if deadline is None or finished is None or st.admitted_at is None:
        return False
    return finished.last_transition_time - st.admitted_at >= deadline


def _job_record(live: JsonDoc | None) -> JsonDoc:
    """The submitter's record of the Ray job, if it belongs to the running cluster's run."""
    records: dict[str, JsonDoc] = (live or {}).get("ray") or {}
    job = records.get(SUBMITTER) or {}
    head = records.get(HEAD)
    if head is not None and job.get("run") != head.get("run"):
        return {}
    return job
