"""What Kubernetes or Kueue refuses, gpuaas refuses too: names, lists, sizes, digits, whole GPUs.

Each case is a manifest that was accepted before (the hardening probe of issue 17) and the field
the error must name. Quantities are read in ASCII digits only, as ``resource.ParseQuantity`` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.manifests import ManifestError, parse_object
from gpuaas.core.quantity import QuantityError, parse_quantity

Doc = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta1"


def workload(requests: Doc | None = None, pod_set: str = "main", **meta: Any) -> Doc:
    container: Doc = {"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a", **meta},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": pod_set, "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def job(containers: list[Doc]) -> Doc:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team-a"},
        "spec": {"template": {"spec": {"containers": containers}}},
    }


def cluster_queue(groups: int) -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": [f"example.com/r{i}"],
                    "flavors": [
                        {
                            "name": f"f{i}",
                            "resources": [{"name": f"example.com/r{i}", "nominalQuota": 1}],
                        }
                    ],
                }
                for i in range(groups)
            ]
        },
    }


REFUSED = [
    pytest.param(workload(labels={"bad key!": "x"}), "metadata.labels[bad key!]", id="label-key"),
    pytest.param(workload(labels={"ok": "bad value!"}), "metadata.labels[ok]", id="label-value"),
    pytest.param(workload(labels={"ok\n": "x"}), "metadata.labels[ok\n]", id="label-key-newline"),
    pytest.param(
        workload(annotations={"bad key!": "x"}),
        "metadata.annotations[bad key!]",
        id="annotation-key",
    ),
    pytest.param(
        workload(annotations={"big": "x" * (256 * 1024)}),
        "metadata.annotations",
        id="annotations-256KiB",
    ),
    pytest.param(
        {**cluster_queue(1), "metadata": {"name": "cq", "labels": {"a b": "c"}}},
        "metadata.labels[a b]",
        id="cluster-scoped-label",
    ),
    pytest.param(workload(pod_set="Main"), "spec.podSets[0].name", id="podset-uppercase"),
    pytest.param(workload(pod_set="a.b"), "spec.podSets[0].name", id="podset-dot"),
    pytest.param(workload(pod_set="x" * 64), "spec.podSets[0].name", id="podset-64-chars"),
    pytest.param(job([]), "spec.template.spec.containers", id="job-no-containers"),
    pytest.param(cluster_queue(17), "spec.resourceGroups", id="17-resource-groups"),
    pytest.param(
        workload({"nvidia.com/gpu": "0.5"}),
        "spec.podSets[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        id="fractional-gpu",
    ),
    pytest.param(
        workload({"nvidia.com/gpu": "1500m"}),
        "spec.podSets[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        id="fractional-gpu-milli",
    ),
    pytest.param(
        workload({"cpu": "٣"}),
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
        id="arabic-indic-digit",
    ),
    pytest.param(
        workload(annotations={"gpuaas.dev/runtime-seconds": "\u0663"}),
        "metadata.annotations[gpuaas.dev/runtime-seconds]",
        id="arabic-indic-seconds",
    ),
    pytest.param(
        workload({"memory": "\uff11Gi"}),
        "spec.podSets[0].template.spec.containers[0].resources.requests[memory]",
        id="fullwidth-digit",
    ),
]


@pytest.mark.parametrize(("manifest", "field"), REFUSED)
def test_refused_with_the_field(manifest: Doc, field: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_object(manifest)
    assert info.value.field == field, str(info.value)


ACCEPTED = [
    pytest.param(workload({"nvidia.com/gpu": "2"}), id="whole-gpus"),
    pytest.param(workload({"nvidia.com/gpu": "2000m"}), id="whole-gpus-in-milli"),
    pytest.param(workload({"cpu": "500m", "memory": "1.5Gi"}), id="fractional-native"),
    pytest.param(workload({"hugepages-2Mi": "3Mi"}), id="hugepages"),
    pytest.param(workload(pod_set="worker-1"), id="podset-dns-label"),
    pytest.param(workload(labels={"example.com/team": "a_b.c-d"}), id="prefixed-label"),
    pytest.param(workload(annotations={"note": "x" * (200 * 1024)}), id="annotation-200KiB"),
    pytest.param(cluster_queue(16), id="16-resource-groups"),
]


@pytest.mark.parametrize("manifest", ACCEPTED)
def test_accepted_at_the_limits(manifest: Doc) -> None:
    parse_object(manifest)


@pytest.mark.parametrize("text", ["٣", "\uff11", "1\n", "৫00m", "1e٣", " 1", "1_000"])
def test_quantities_are_ascii(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text, "cpu")
