"""A create's managedFields, built in one walk (``created_fields``), equal the general path's
(``changes`` from an empty object, then ``encode``): for every manifest of the examples, for
documents hypothesis draws over the Workload and Job schemas (duplicate list keys included), and
through ``Writer.updated`` as the API calls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.api import field_types, managed_fields, patching
from gpuaas.api.managed_fields import changes, created_fields, encode
from gpuaas.vocab.kinds import BY_KIND, KINDS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKLOAD, JOB = BY_KIND["Workload"], BY_KIND["Job"]


def general(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "managedFields"}
    added, _ = changes({"metadata": {}}, {**doc, "metadata": meta}, schema, True)
    return encode(added)


def fast(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "managedFields"}
    return created_fields({**doc, "metadata": meta}, schema, True)


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal, keys in the same order too (the served JSON is the same text)."""
    return json.dumps(a) == json.dumps(b)


def example_docs() -> list[tuple[str, dict[str, Any]]]:
    by_api = {(k.api_version, k.kind): k for k in KINDS}
    for k in KINDS:
        for v in k.versions:
            by_api.setdefault((f"{k.group}/{v}" if k.group else v, k.kind), k)
    out = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if path.name.startswith("scenario"):
            continue
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) in by_api:
                out.append((f"{path.relative_to(EXAMPLES)}#{i}", doc))
    return out


DOCS = example_docs()


def test_the_examples_hold_manifests_of_several_kinds() -> None:
    assert len({d["kind"] for _, d in DOCS}) >= 5


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=[n for n, _ in DOCS])
def test_created_fields_equal_the_general_path_for_every_example(doc: dict[str, Any]) -> None:
    kind = next(k for k in KINDS if k.kind == doc["kind"])
    version = str(doc["apiVersion"]).rsplit("/", 1)[-1]
    schema = field_types.schema_of(kind, version)
    assert same(fast(doc, schema), general(doc, schema))


scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b", ""]))
keys = st.sampled_from(["name", "image", "resources", "requests", "cpu", "x", "labels", "spec"])
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["c", "d"])},  # equal names: one keyed element for two items
        optional={"image": scalars, "resources": values, "ports": values},
    ),
    max_size=3,
)
pod_sets = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "w"]), "count": st.integers(0, 3)},
        optional={"template": st.fixed_dictionaries({"spec": st.fixed_dictionaries(
            {"containers": containers}, optional={"extra": values})})},
    ),
    max_size=3,
)  # fmt: skip
metadata = st.fixed_dictionaries(
    {"name": st.just("w")},
    optional={"labels": st.dictionaries(keys, st.sampled_from(["1", "2"])), "uid": scalars,
              "annotations": values, "finalizers": st.lists(st.sampled_from(["a", "b"]))},
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    meta=metadata,
    spec=st.fixed_dictionaries({}, optional={"podSets": pod_sets, "queueName": scalars,
                                             "other": values}),
    status=st.one_of(st.none(), values),
)  # fmt: skip
def test_created_fields_equal_the_general_path_for_drawn_workloads(
    meta: dict[str, Any], spec: dict[str, Any], status: Any
) -> None:
    doc: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                           "metadata": meta, "spec": spec}  # fmt: skip
    if status is not None:
        doc["status"] = status
    for kind, version in ((WORKLOAD, "v1beta1"), (WORKLOAD, "v1beta2"), (JOB, "v1")):
        schema = field_types.schema_of(kind, version)
        assert same(fast(doc, schema), general(doc, schema))


def test_writer_records_a_create_as_one_update_owning_every_field() -> None:
    w = patching.Writer(WORKLOAD, "v1beta1", "bench", lambda: "2026-01-01T00:00:00Z")
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
           "metadata": {"name": "w", "labels": {"a": "1"}},
           "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]}}  # fmt: skip
    out = w.updated(None, doc)
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "bench",
            "operation": "Update",
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {
                    ".": {},
                    "f:podSets": {
                        ".": {},
                        'k:{"name":"main"}': {".": {}, "f:count": {}, "f:name": {}},
                    },
                    "f:queueName": {},
                },
            },
        }
    ]
    bare = w.updated(None, {"metadata": {"name": "w"}})  # nothing to own: no entry at all
    assert "managedFields" not in bare["metadata"]


@pytest.mark.parametrize(
    "value", ["main", "a b", "é", "x\u2028y", 'q"', "b\\s", "t\tx", "", "ü-1", 7, None]
)
def test_a_keyed_item_path_element_is_go_json_whatever_the_key_value(value: object) -> None:
    """The direct spelling of a one-key element equals the JSON encoding it stands for."""
    assert managed_fields.item_element({"name": value}, "map", ("name",), 0) == (
        "k:" + managed_fields._go_json({"name": value})
    )
