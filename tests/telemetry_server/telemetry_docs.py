"""Builders for the telemetry wiring tests: queues with GPU quota, GPU workloads, the config."""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]
FLAVOR = "h100"


def namespace(name: str) -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def flavor(name: str = FLAVOR) -> Doc:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
    }


def priority_class(name: str, value: int) -> Doc:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def cluster_queue(name: str, gpus: int, *, cohort: str | None = None, preempt: bool = False) -> Doc:
    spec: Doc = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": 16},
                            {"name": "memory", "nominalQuota": "128Gi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                        ],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    if preempt:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(ns: str, name: str, cq: str) -> Doc:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def workload(
    ns: str,
    name: str,
    *,
    queue: str,
    gpus: int,
    cpu: int = 1,
    memory: str = "1Gi",
    profile: str | None = None,
    priority: tuple[str, int] | None = None,
) -> Doc:
    meta: Doc = {"name": name, "namespace": ns}
    if profile is not None:
        meta["annotations"] = {"gpuaas.dev/simulated-gpu-profile": profile}
    requests = {"cpu": str(cpu), "memory": memory, "nvidia.com/gpu": str(gpus)}
    spec: Doc = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}
                },
            }
        ],
    }
    if priority is not None:
        spec |= {
            "priorityClassName": priority[0],
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            "priority": priority[1],
        }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": meta,
        "spec": spec,
    }


def configuration(spec: Doc) -> Doc:
    return {
        "apiVersion": "gpuaas.dev/v1alpha1",
        "kind": "GpuaasConfiguration",
        "metadata": {"name": "default"},
        "spec": spec,
    }


TIERED = configuration(
    {
        "tiers": {"reserved": ["team-a-cq"], "best-effort": ["team-b-cq"]},
        "hoarding": [
            {"tier": "reserved", "windowSeconds": 600, "action": "Notify"},
            {"tier": "best-effort", "windowSeconds": 600, "action": "Evict"},
        ],
        "prices": {FLAVOR: {"gpuHour": 2.5, "cpuCoreHour": 0.04, "memoryGBHour": 0.005}},
        "currency": "EUR",
        "telemetry": {"intervalSeconds": 15, "collector": "simulated"},
    }
)
