"""Scenario files with hardware profiles and Notebooks: the server's admission chain on replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuaas.sim.runner import run_file

GPU = "nvidia.com/gpu"
BASE: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace",
     "metadata": {"name": "ds", "labels": {"kueue.openshift.io/managed": "true"}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU],
              "flavors": [{"name": "l4", "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "q", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
    {"apiVersion": "infrastructure.opendatahub.io/v1", "kind": "HardwareProfile",
     "metadata": {"name": "gpu", "namespace": "ds"},
     "spec": {"identifiers": [{"identifier": GPU, "displayName": "GPU", "minCount": 1,
                               "defaultCount": 1, "maxCount": 1}],
              "scheduling": {"type": "Queue", "kueue": {"localQueueName": "q"}}}},
]  # fmt: skip


def nb(name: str, profile: str | None = "gpu", stopped: bool = False) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if profile:
        ann["opendatahub.io/hardware-profile-name"] = profile
    if stopped:
        ann["kubeflow-resource-stopped"] = "t"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": name, "namespace": "ds", "annotations": ann},
        "spec": {"template": {"spec": {"containers": [{"name": name, "image": "x"}]}}},
    }


def scenario(tmp_path: Path, steps: list[dict[str, Any]]) -> Path:
    doc = {
        "apiVersion": "gpuaas.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "wb"},
        "spec": {"objects": BASE, "steps": steps},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_stop_frees_the_gpu_and_a_restart_queues_at_the_back(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        [
            {"at": 0, "apply": [nb("a")], "expect": {"admitted": ["ds/a"], "pending": []}},
            {"at": 10, "apply": [nb("b")], "expect": {"admitted": ["ds/a"], "pending": ["ds/b"]}},
            {"at": 20, "apply": [nb("a", stopped=True)],
             "expect": {"admitted": ["ds/b"], "pending": []}},
            {"at": 30, "apply": [nb("a")], "expect": {"admitted": ["ds/b"], "pending": ["ds/a"]}},
        ],
    )  # fmt: skip
    [outcome] = run_file(path)
    assert outcome.error is None, outcome.error
    assert outcome.passed, [m for c in outcome.checks for m in c.mismatches]


def test_missing_profile_is_refused_as_the_webhook_does(tmp_path: Path) -> None:
    path = scenario(tmp_path, [{"at": 0, "apply": [nb("a", profile="nope")]}])
    [outcome] = run_file(path)
    assert outcome.error is not None
    assert "Notebook ds/a" in outcome.error
    assert "hardware profile 'nope' not found in namespace 'ds'" in outcome.error


def test_managed_namespace_without_queue_is_refused(tmp_path: Path) -> None:
    path = scenario(tmp_path, [{"at": 0, "apply": [nb("a", profile=None)]}])
    [outcome] = run_file(path)
    assert outcome.error is not None
    assert 'missing required label "kueue.x-k8s.io/queue-name"' in outcome.error
