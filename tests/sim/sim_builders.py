"""Small builders for scenario documents used by the sim and CLI tests (fluent enough, plain dicts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

KUEUE = "kueue.x-k8s.io/v1beta1"


def namespace(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(
    name: str = "cq",
    cpu: str = "4",
    *,
    flavor_name: str = "default",
    within: str = "Never",
    cohort: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": within},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": flavor_name, "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                ],
            }
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str = "lq", cq: str = "cq", ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def workload(
    name: str,
    cpu: str = "1",
    *,
    priority: int = 0,
    queue: str = "lq",
    ns: str = "default",
    runtime: float | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if runtime is not None:
        meta["annotations"] = {"gpuaas.dev/runtime-seconds": str(runtime)}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
    }


def job(name: str, cpu: str = "1", *, queue: str = "lq", ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                    ],
                    "restartPolicy": "Never",
                }
            }
        },
    }


def base_objects(cpu: str = "4", within: str = "Never") -> list[dict[str, Any]]:
    return [namespace(), flavor(), cluster_queue(cpu=cpu, within=within), local_queue()]


def scenario(
    steps: list[dict[str, Any]],
    *,
    objects: list[dict[str, Any]] | None = None,
    name: str = "t",
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "objects": base_objects() if objects is None else objects,
        "steps": steps,
    }
    if configuration is not None:
        spec["configuration"] = configuration
    return {
        "apiVersion": "gpuaas.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": name},
        "spec": spec,
    }


def write(path: Path, *docs: Any) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path
