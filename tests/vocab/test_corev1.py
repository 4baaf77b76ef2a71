"""v1 Secret and ConfigMap as kube-apiserver accepts them, and MultiKueue's two kinds' shapes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gpuaas.vocab import corev1, multikueue

B64 = base64.b64encode(b"hello").decode()


def secret(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "ns"}, **fields}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "fields", "error"),
    [
        ("bad base64", {"data": {"k": "not base64!"}}, "Secret ns/s: data[k]: illegal base64"),
        ("unpadded", {"data": {"k": "aGVsbG8"}}, "data[k]: illegal base64"),
        ("number value", {"data": {"k": 5}}, "data[k]: must be a base64 string"),
        ("bad key", {"data": {"a/b": B64}}, "data['a/b']: a valid config key"),
        ("stringData not a string", {"stringData": {"k": 1}}, "stringData[k]: must be a string"),
        ("data not a map", {"data": ["x"]}, "data: must be an object"),
    ],
)  # fmt: skip
def test_secret_refused(case: str, fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=None) as exc:
        corev1.normalize_secret(secret(**fields))
    assert error in str(exc.value), case


def test_string_data_is_merged_into_data_and_never_kept() -> None:
    out = corev1.normalize_secret(secret(data={"a": B64, "b": B64}, stringData={"b": "new"}))
    assert out["data"] == {"a": B64, "b": base64.b64encode(b"new").decode()}
    assert "stringData" not in out and out["type"] == "Opaque"
    assert corev1.data_count(out) == 2
    shown = corev1.redacted(out)
    assert shown["data"] == {"a": "5 bytes", "b": "3 bytes"} and "hello" not in str(shown)


def test_config_map() -> None:
    cm = {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"},
          "data": {"x": "1"}, "binaryData": {"y": B64}}  # fmt: skip
    assert corev1.data_count(corev1.normalize_config_map(cm)) == 2
    with pytest.raises(ValueError, match=r"data\[x\]: must be a string"):
        corev1.normalize_config_map({**cm, "data": {"x": 1}})
    with pytest.raises(ValueError, match="duplicate"):
        corev1.normalize_config_map({**cm, "binaryData": {"x": B64}})


@pytest.mark.parametrize(
    ("case", "doc", "error"),
    [
        ("v1beta1 kubeConfig", {"apiVersion": "kueue.x-k8s.io/v1beta1",
         "spec": {"kubeConfig": {"locationType": "Secret", "location": "s"}}}, None),
        ("v1beta2 clusterSource", {"apiVersion": "kueue.x-k8s.io/v1beta2",
         "spec": {"clusterSource": {"kubeConfig": {"location": "s"}}}}, None),
        ("v1beta2 both", {"apiVersion": "kueue.x-k8s.io/v1beta2", "spec": {"clusterSource": {
         "kubeConfig": {"location": "s"}, "clusterProfileRef": {"name": "p"}}}},
         "exactly one of the fields in [kubeConfig clusterProfileRef]"),
        ("bad locationType", {"apiVersion": "kueue.x-k8s.io/v1beta1",
         "spec": {"kubeConfig": {"locationType": "Url", "location": "s"}}},
         "spec.kubeConfig.locationType: Unsupported value: 'Url'"),
        ("no location", {"apiVersion": "kueue.x-k8s.io/v1beta1",
         "spec": {"kubeConfig": {"locationType": "Secret"}}},
         "spec.kubeConfig.location: required"),
    ],
)  # fmt: skip
def test_multikueue_cluster_shapes(case: str, doc: dict[str, Any], error: str | None) -> None:
    doc = {"kind": "MultiKueueCluster", "metadata": {"name": "w"}, **doc}
    if error is None:
        multikueue.check_cluster(doc)
        ref = multikueue.kubeconfig_ref(doc)
        assert ref is not None and (ref.location_type, ref.location) == ("Secret", "s")
    else:
        with pytest.raises(ValueError) as exc:
            multikueue.check_cluster(doc)
        assert error in str(exc.value), case


def test_multikueue_config_limits() -> None:
    ok = {"kind": "MultiKueueConfig", "metadata": {"name": "c"}, "spec": {"clusters": ["a"]}}
    multikueue.check_config(ok)
    with pytest.raises(ValueError, match="at most 20"):
        multikueue.check_config({**ok, "spec": {"clusters": [f"w{i}" for i in range(21)]}})
    with pytest.raises(ValueError, match="duplicate"):
        multikueue.check_config({**ok, "spec": {"clusters": ["a", "a"]}})


@pytest.mark.parametrize(
    ("manifest", "runs"),
    [
        ({"kind": "Job", "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}, False),
        ({"kind": "Job", "spec": {}}, True),
        ({"kind": "Workload", "metadata": {"labels": {multikueue.ORIGIN_LABEL: "m"}}}, False),
        ({"kind": "Workload", "metadata": {"labels": {}}}, True),
    ],
)
def test_runs_pods_here(manifest: dict[str, Any], runs: bool) -> None:
    assert multikueue.runs_pods_here(manifest) is runs
