"""A Kubeflow Notebook as the Workload of Kueue's StatefulSet pod group."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.manifest_notebook import notebook_stopped
from gpuaas.core.manifests import ManifestError, parse_object


def nb(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": "wb", "namespace": "team", **meta},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "wb",
                            "image": "img",
                            "resources": {
                                "requests": {"cpu": "500m", "nvidia.com/gpu": 1},
                                "limits": {"memory": "2Gi"},
                            },
                        },
                    ]
                }
            }
        },
    }


def test_notebook_becomes_one_pod_workload_with_its_labels() -> None:
    doc = nb(labels={"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "p"})
    wl = parse_object(doc)
    assert wl.kind == "Notebook"  # type: ignore[union-attr]
    assert (wl.namespace, wl.name, wl.queue_name, wl.priority_class) == ("team", "wb", "q", "p")  # type: ignore[union-attr]
    [ps] = wl.pod_sets  # type: ignore[union-attr]
    assert (ps.name, ps.count) == ("main", 1)
    assert ps.requests == {"cpu": 500, "nvidia.com/gpu": 1, "memory": 2 * 1024**3}


@pytest.mark.parametrize("version", ["kubeflow.org/v1", "kubeflow.org/v1beta1"])
def test_both_versions(version: str) -> None:
    assert parse_object({**nb(), "apiVersion": version}).name == "wb"


def test_missing_template_names_the_field() -> None:
    doc = nb()
    del doc["spec"]["template"]
    with pytest.raises(ManifestError) as err:
        parse_object(doc)
    assert "Notebook team/wb: spec.template: required value" in str(err.value)


def test_stopped_annotation_any_value() -> None:
    assert not notebook_stopped(nb())
    assert notebook_stopped(nb(annotations={"kubeflow-resource-stopped": "odh-notebook-culler"}))
    assert notebook_stopped(nb(annotations={"kubeflow-resource-stopped": ""}))
