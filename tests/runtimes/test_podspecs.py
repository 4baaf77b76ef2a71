"""From an admitted workload and its manifest to the pods the runtime starts (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Admission, PodSetAssignment
from gpuaas.runtimes.podspecs import PodSpecError, build_run_plan

SEED_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "team-a-job", "namespace": "team-a"},
    "spec": {
        "backoffLimit": 2,
        "parallelism": 2,
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox",
                        "command": ["sleep", "3600"],
                        "workingDir": "/tmp",
                        "env": [
                            {"name": "SECS", "value": "3600"},
                            {
                                "name": "ME",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            },
                        ],
                        "resources": {"requests": {"cpu": "7", "nvidia.com/gpu": 2}},
                    }
                ],
            }
        },
    },
}


def job_workload(count: int = 2) -> Workload:
    requests = {"cpu": 7000, "nvidia.com/gpu": 2}
    return Workload(
        "team-a", "team-a-job", "local-queue", [PodSet("main", count, requests)], kind="Job"
    )


def admission(**counts: int) -> Admission:
    return Admission(
        "team-a-cq",
        [PodSetAssignment(name, {"cpu": "default-flavor"}, n, {}) for name, n in counts.items()],
    )


def test_seed_job() -> None:
    plan = build_run_plan(job_workload(), admission(main=2), SEED_JOB)
    assert plan.backoff_limit == 2
    assert [p.name for p in plan.pods] == ["team-a-job-0", "team-a-job-1"]
    pod = plan.pods[0]
    assert pod.argv == ["sleep", "3600"]
    assert (pod.cpu_millis, pod.gpus, pod.termination_grace_seconds) == (7000, 2, 5.0)
    assert pod.working_dir == "/tmp" and pod.image == "busybox"
    assert pod.env == (("SECS", "3600"), ("ME", "team-a-job-0"))


def test_admitted_count_wins_over_requested() -> None:
    plan = build_run_plan(job_workload(4), admission(main=1), SEED_JOB)
    assert len(plan.pods) == 1


def test_defaults_and_var_expansion() -> None:
    manifest: dict[str, Any] = {
        "kind": "Job",
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "args": ["echo", "$(X)", "$(UNKNOWN)", "$$(X)"],
                            "env": [{"name": "X", "value": "x"}],
                        }
                    ]
                }
            }
        },
    }
    plan = build_run_plan(job_workload(1), None, manifest)
    pod = plan.pods[0]
    assert plan.backoff_limit == 6 and pod.termination_grace_seconds == 30.0
    assert pod.argv == ["echo", "x", "$(UNKNOWN)", "$(X)"]


def test_raycluster_head_and_workers() -> None:
    def template(cmd: str) -> dict[str, Any]:
        return {
            "template": {"spec": {"containers": [{"name": "ray", "command": ["sh", "-c", cmd]}]}}
        }

    manifest = {
        "kind": "RayCluster",
        "spec": {
            "headGroupSpec": template("ray start --head --block"),
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": 2, **template("ray start --block")}
            ],
        },
    }
    workload = Workload(
        "team-a",
        "rc",
        "q",
        [PodSet("head", 1, {"cpu": 1000}), PodSet("gpu", 2, {"cpu": 2000, "nvidia.com/gpu": 1})],
        kind="RayCluster",
    )
    plan = build_run_plan(workload, admission(head=1, gpu=2), manifest)
    assert [(p.name, p.pod_set, p.gpus) for p in plan.pods] == [
        ("rc-head-0", "head", 0),
        ("rc-gpu-0", "gpu", 1),
        ("rc-gpu-1", "gpu", 1),
    ]
    assert plan.pods[0].argv[-1] == "ray start --head --block"


def test_workload_podsets() -> None:
    manifest = {
        "kind": "Workload",
        "spec": {
            "podSets": [
                {
                    "name": "driver",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "d", "command": ["true"]}]}},
                },
            ]
        },
    }
    workload = Workload("ns", "wl", "q", [PodSet("driver", 1, {"cpu": 500})])
    plan = build_run_plan(workload, None, manifest)
    assert [(p.name, p.argv, p.cpu_millis) for p in plan.pods] == [("wl-0", ["true"], 500)]


def _job(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"kind": "Job", "spec": {"template": {"spec": {"containers": [container]}}, **spec}}


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        (_job({"name": "app", "image": "busybox"}), "container app: no command or args"),
        ({"kind": "Job", "spec": {}}, r"spec.template: must be a mapping, got nothing"),
        ({"kind": "Deployment", "spec": {}}, "kind 'Deployment' cannot be run"),
        (_job({"name": "app", "command": ["x"]}, backoffLimit=-1), "spec.backoffLimit"),
        (
            _job(
                {
                    "name": "app",
                    "command": ["x"],
                    "env": [{"name": "S", "valueFrom": {"secretKeyRef": {}}}],
                }
            ),
            r"env\[0\] \(S\): valueFrom",
        ),
        (
            {"kind": "Job", "spec": {"template": {"spec": {"containers": []}}}},
            "containers is empty",
        ),
    ],
)
def test_errors_name_object_and_field(manifest: dict[str, Any], match: str) -> None:
    with pytest.raises(PodSpecError, match=match) as info:
        build_run_plan(job_workload(1), None, manifest)
    assert "team-a/team-a-job" in str(info.value)
