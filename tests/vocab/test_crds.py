"""The vendored Kueue CRDs against the printer columns recorded from Kueue (commit in the JSON),
and the pure parts of the Kubernetes surface: JSONPath, selectors, pages, tables, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaas.api import selectors, tables, validation
from gpuaas.api.body import BodyError
from gpuaas.vocab.crds import EXTRA_SHORT_NAMES, resource
from gpuaas.vocab.kinds import BY_KIND

RECORDED = json.loads((Path(__file__).parent / "kueue_printer_columns.json").read_text())


@pytest.mark.parametrize("kind", sorted(RECORDED["kinds"]))
def test_printer_columns_and_short_names_are_kueues(kind: str) -> None:
    res = resource(BY_KIND[kind])
    recorded = RECORDED["kinds"][kind]
    # The CRD's short names, in its order, then the ones gpuaas serves beside them (``wl``).
    assert list(res.short_names) == recorded["shortNames"] + list(EXTRA_SHORT_NAMES.get(kind, ()))
    for version in BY_KIND[kind].versions:
        cols = [
            {"name": c.name, "jsonPath": c.json_path, "type": c.type, "priority": c.priority}
            for c in res.columns(version)
        ]
        # A CRD without columns prints Age, as the apiextensions server defaults it.
        expected = recorded[version] or [
            {
                "name": "Age",
                "jsonPath": ".metadata.creationTimestamp",
                "type": "date",
                "priority": 0,
            }
        ]
        assert cols == expected


def test_table_of_workloads_follows_the_crd() -> None:
    doc = {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "lq"},
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "Admitted", "status": "True"}],
        },
    }
    t = tables.table(BY_KIND["Workload"], "v1beta2", [doc], now=1767225600 + 90)
    names = [c["name"] for c in t["columnDefinitions"]]
    assert names == ["Name", "Queue", "Reserved in", "Admitted", "Finished", "Age"]
    assert t["rows"][0]["cells"] == ["w", "lq", "cq", "True", None, "90s"]
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_a_v1beta1_cohort_field_prints_under_v1beta2() -> None:
    doc = {"metadata": {"name": "cq"}, "spec": {"cohort": "c"}, "status": {}}
    row = tables.table(BY_KIND["ClusterQueue"], "v1beta2", [doc])["rows"][0]
    assert row["cells"][:2] == ["cq", "c"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("a=1", ["x"]),
        ("a==1,b!=2", ["x"]),
        ("a in (1,3)", ["x", "z"]),
        ("a notin (1)", ["y", "z"]),
        ("b", ["x", "y"]),
        ("!b", ["z"]),
    ],
)
def test_label_selectors(selector: str, expected: list[str]) -> None:
    docs = [
        {"metadata": {"name": "x", "labels": {"a": "1", "b": "1"}}},
        {"metadata": {"name": "y", "labels": {"a": "2", "b": "2"}}},
        {"metadata": {"name": "z", "labels": {"a": "3"}}},
    ]
    match = selectors.label_selector(selector)
    assert [d["metadata"]["name"] for d in docs if match(d)] == expected


def test_field_selectors_refuse_what_kubernetes_refuses() -> None:
    match = selectors.field_selector("metadata.name!=a", "ClusterQueue")
    assert not match({"metadata": {"name": "a"}})
    with pytest.raises(BodyError, match="not a known field selector"):
        selectors.field_selector("spec.cohort=x", "ClusterQueue")
    ev = selectors.field_selector("involvedObject.kind=Workload,reason=Admitted", "Event")
    assert ev({"metadata": {}, "involvedObject": {"kind": "Workload"}, "reason": "Admitted"})


def test_field_validation_modes() -> None:
    lq = BY_KIND["LocalQueue"]
    doc = {"metadata": {"name": "q", "bogus": 1}, "spec": {"clusterQueue": "cq", "x": 1}}
    assert validation.check(lq, "v1beta2", doc, "Ignore") == []
    assert validation.check(lq, "v1beta2", doc, None) == [
        'unknown field "metadata.bogus"',
        'unknown field "spec.x"',
    ]
    with pytest.raises(BodyError, match=r'strict decoding error: unknown field "metadata\.bogus"'):
        validation.check(lq, "v1beta2", doc, "Strict")
