"""Field ownership and server-side apply against Kubernetes' documented behaviour
(https://kubernetes.io/docs/reference/using-api/server-side-apply/), one named case per rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.api import field_types, managed_fields, patching
from gpuaas.api.managed_fields import ApplyConflict, decode, encode, field_set, path_string
from gpuaas.vocab.kinds import BY_KIND

CQ = BY_KIND["ClusterQueue"]
JOB = BY_KIND["Job"]
V = "kueue.x-k8s.io/v1beta2"
CQ_SCHEMA = field_types.schema_of(CQ, "v1beta2")
JOB_SCHEMA = field_types.schema_of(JOB, "v1")
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def cq(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def apply(live: Any, config: Any, manager: str, *, force: bool = False) -> dict[str, Any]:
    return managed_fields.apply(live, config, manager, V, T1, CQ_SCHEMA, True, force=force)


def owners(doc: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    return {
        (e.manager, e.operation): {path_string(p) for p in e.fields}
        for e in managed_fields.entries_of(doc)
    }


def test_apply_owns_exactly_the_applied_fields() -> None:
    out = apply(None, cq(cohort="a", stopPolicy="None"), "alice")
    assert owners(out) == {("alice", "Apply"): {".spec.cohort", ".spec.stopPolicy"}}
    assert out["spec"] == {"cohort": "a", "stopPolicy": "None"}
    entry = out["metadata"]["managedFields"][0]
    assert entry["fieldsType"] == "FieldsV1" and entry["operation"] == "Apply"
    assert entry["fieldsV1"] == {"f:spec": {"f:cohort": {}, "f:stopPolicy": {}}}


def test_reapplying_the_same_configuration_changes_nothing() -> None:
    first = apply(None, cq(cohort="a"), "alice")
    assert apply(first, cq(cohort="a"), "alice") == first


def test_another_manager_changing_a_field_conflicts() -> None:
    live = apply(None, cq(cohort="a"), "alice")
    with pytest.raises(ApplyConflict) as err:
        apply(live, cq(cohort="b"), "bob")
    assert str(err.value) == 'Apply failed with 1 conflict: conflict with "alice": .spec.cohort'


def test_the_same_value_is_shared_not_a_conflict() -> None:
    live = apply(None, cq(cohort="a"), "alice")
    out = apply(live, cq(cohort="a"), "bob")
    assert owners(out) == {("alice", "Apply"): {".spec.cohort"}, ("bob", "Apply"): {".spec.cohort"}}


def test_force_takes_the_field() -> None:
    live = apply(None, cq(cohort="a", stopPolicy="None"), "alice")
    out = apply(live, cq(cohort="b"), "bob", force=True)
    assert out["spec"]["cohort"] == "b"
    assert owners(out) == {
        ("alice", "Apply"): {".spec.stopPolicy"},
        ("bob", "Apply"): {".spec.cohort"},
    }


def test_a_field_no_longer_applied_is_removed_when_nobody_else_owns_it() -> None:
    live = apply(None, cq(cohort="a", stopPolicy="Hold"), "alice")
    out = apply(live, cq(cohort="a"), "alice")
    assert out["spec"] == {"cohort": "a"}


def test_a_field_no_longer_applied_stays_when_another_manager_owns_it() -> None:
    live = apply(None, cq(cohort="a", stopPolicy="Hold"), "alice")
    live = apply(live, cq(stopPolicy="Hold"), "bob")
    out = apply(live, cq(cohort="a"), "alice")
    assert out["spec"] == {"cohort": "a", "stopPolicy": "Hold"}


def test_an_update_takes_ownership_from_an_applier() -> None:
    live = apply(None, cq(cohort="a"), "alice")
    edited = {**live, "spec": {"cohort": "b"}}
    out = managed_fields.record_update(live, edited, "kubectl-edit", V, T1, CQ_SCHEMA, True)
    assert owners(out) == {("kubectl-edit", "Update"): {".spec.cohort"}}
    with pytest.raises(ApplyConflict) as err:
        apply(out, cq(cohort="a"), "alice")
    assert f'conflict with "kubectl-edit" using {V} at {T1}: .spec.cohort' in str(err.value)


def test_a_create_owns_every_node_it_adds() -> None:
    doc = cq(cohort="a")
    doc["metadata"]["labels"] = {"x": "1"}
    out = managed_fields.record_update(None, doc, "kubectl-create", V, T0, CQ_SCHEMA, True)
    assert out["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:x": {}}},
        "f:spec": {".": {}, "f:cohort": {}},
    }


def test_an_update_that_changes_nothing_records_nothing() -> None:
    live = managed_fields.record_update(None, cq(cohort="a"), "m", V, T0, CQ_SCHEMA, True)
    again = managed_fields.record_update(live, dict(live), "other", V, T1, CQ_SCHEMA, True)
    assert again["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_keyed_lists_are_owned_item_by_item() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "finalizers": ["a.io/x"]},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    fields = field_set(job, JOB_SCHEMA, True)
    assert {path_string(p) for p in fields} == {
        '.spec.template.spec.containers[name="c"]',
        '.spec.template.spec.containers[name="c"].name',
        '.spec.template.spec.containers[name="c"].image',
        '.metadata.finalizers[="a.io/x"]',
    }
    assert encode(fields)["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}
    }


def test_two_appliers_own_different_containers() -> None:
    def job(*names: str) -> dict[str, Any]:
        containers = [{"name": n, "image": n} for n in names]
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"template": {"spec": {"containers": containers}}}}  # fmt: skip

    def run(live: Any, cfg: Any, m: str) -> Any:
        return managed_fields.apply(live, cfg, m, "batch/v1", T1, JOB_SCHEMA, True, force=False)

    live = run(None, job("a"), "alice")
    live = run(live, job("b"), "bob")
    names = [c["name"] for c in live["spec"]["template"]["spec"]["containers"]]
    assert names == ["a", "b"]
    live = run(live, job(), "bob")  # bob drops his container; alice's stays
    assert [c["name"] for c in live["spec"]["template"]["spec"]["containers"]] == ["a"]


paths = st.lists(
    st.lists(st.sampled_from(["f:a", "f:b", 'k:{"name":"x"}', 'v:"y"', "i:0"]), min_size=1,
             max_size=4).map(tuple), max_size=8,
)  # fmt: skip


@given(paths)
def test_fieldsv1_round_trips(fields: list[tuple[str, ...]]) -> None:
    assert decode(encode(set(fields))) == set(fields)


def test_a_parent_still_holding_applied_fields_is_not_pruned() -> None:
    """kubectl moves client-side apply's fields (``f:spec: {.: {}, ...}``) to its server-side
    manager: the ``.`` of ``spec`` is no longer applied, but what is under it still is."""
    live = managed_fields.record_update(None, cq(cohort="a"), "csa", V, T0, CQ_SCHEMA, True)
    moved = managed_fields.entries_of(live)
    moved[0].manager, moved[0].operation = "kubectl", "Apply"
    live = managed_fields.with_entries(live, moved)
    out = apply(live, cq(cohort="a"), "kubectl")
    assert out["spec"] == {"cohort": "a"}


@pytest.mark.parametrize("body", [{"metadata": None}, {"metadata": []}, ["not", "an", "object"]])
def test_a_malformed_body_is_left_for_the_engine_to_refuse(body: Any) -> None:
    """The engine's checks refuse it naming the field (422); ownership never raises first."""
    writer = patching.Writer(CQ, "v1beta2", "m", lambda: T0)
    assert writer.updated(None, body) == body
