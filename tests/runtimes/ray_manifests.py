"""Manifests and Ray scripts for the RayCluster and RayJob tests on the Ray runtime.

A small RayCluster in seed 001's queue (a CPU head and one 4-GPU worker, so Kueue gives their
pods different flavors and Ray different nodes), a driver that runs tasks spread over every node
of a Ray cluster, and a RayJob entrypoint that runs one GPU task. Pure data: no processes.
"""

from __future__ import annotations

from typing import Any

TASKS_ON_EVERY_NODE = """
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=0.5, scheduling_strategy="SPREAD")
def where():
    import os, time
    time.sleep(0.5)
    return os.environ["GPUAAS_NODE"]
print(" ".join(sorted(set(ray.get([where.remote() for _ in range(6)])))))
"""


def raycluster(name: str, namespace: str) -> dict[str, Any]:
    """A small RayCluster in seed 001's queue: a CPU head and one worker with 4 GPUs, so Kueue
    gives them different flavors (``g6.4xlarge``, ``g6.12xlarge``) and Ray different nodes."""

    def group(container: str, gpus: int) -> dict[str, Any]:
        requests = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
        return {
            "rayStartParams": {},
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {"name": container, "image": "rayproject/ray",
                         "resources": {"requests": requests, "limits": requests},
                         # this 2-core machine runs 5 raylets and other suites: Ray's own 60 s
                         # for a raylet to register is too short at times
                         "env": [{"name": "RAY_raylet_start_wait_time_s", "value": "180"}]}
                    ],
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                }
            },
        }  # fmt: skip

    worker = {"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kueue.x-k8s.io/queue-name": "private-ai-queue",
                "kueue.x-k8s.io/priority-class": "dev",
            },
        },
        "spec": {
            "headGroupSpec": group("ray-head", 0),
            "workerGroupSpecs": [{**worker, **group("ray-worker", 4)}],
        },
    }


JOB_SCRIPT = """
import os, ray
ray.init()
@ray.remote(num_gpus=1)
def where():
    return os.environ["GPUAAS_NODE"], ray.get_gpu_ids()
print("job ran on", *ray.get(where.remote()))
"""
