"""Strategic merge patch against Kubernetes' documented behaviour (the strategic-merge-patch
design document and apimachinery's own test cases), one named case per rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.api import strategic_merge
from gpuaas.api.strategic_merge import PatchError


def _job(containers: list[Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": containers, **spec}}}, "metadata": {}}


def _containers(doc: dict[str, Any]) -> Any:
    return doc["spec"]["template"]["spec"]["containers"]


C_A = {"name": "a", "image": "x:1", "env": [{"name": "E1", "value": "1"}]}
C_B = {"name": "b", "image": "y:1"}

# (id, kind, original, patch, expected)
CASES: list[tuple[str, str, Any, Any, Any]] = [
    (
        "containers merge by name, other fields kept",
        "Job",
        _job([C_A, C_B]),
        _job([{"name": "a", "image": "x:2"}]),
        _job([{**C_A, "image": "x:2"}, C_B]),
    ),
    (
        "a new container goes before the server-only ones (apimachinery's order)",
        "Job",
        _job([C_A]),
        _job([{"name": "c", "image": "z"}]),
        _job([{"name": "c", "image": "z"}, C_A]),
    ),
    (
        "env merges by name inside a container",
        "Job",
        _job([C_A]),
        _job([{"name": "a", "env": [{"name": "E2", "value": "2"}]}]),
        _job([{**C_A, "env": [{"name": "E2", "value": "2"}, {"name": "E1", "value": "1"}]}]),
    ),
    (
        "ports merge by containerPort",
        "Job",
        _job([{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]),
        _job([{"name": "a", "ports": [{"containerPort": 80, "name": "web"}]}]),
        _job([{"name": "a", "ports": [{"containerPort": 80, "name": "web"}]}]),
    ),
    (
        "$patch: delete removes one item by its key",
        "Job",
        _job([C_A, C_B]),
        _job([{"name": "a", "$patch": "delete"}]),
        _job([C_B]),
    ),
    (
        "$patch: replace as a list item replaces the list",
        "Job",
        _job([C_A, C_B]),
        _job([{"$patch": "replace"}, {"name": "c", "image": "z"}]),
        _job([{"name": "c", "image": "z"}]),
    ),
    (
        "$patch: replace on a map replaces the map",
        "Job",
        {"metadata": {}, "spec": {"selector": {"matchLabels": {"a": "1"}}, "parallelism": 2}},
        {"spec": {"$patch": "replace", "parallelism": 3}},
        {"metadata": {}, "spec": {"parallelism": 3}},
    ),
    (
        "$patch: delete on a map removes it",
        "Job",
        {"metadata": {}, "spec": {"selector": {"matchLabels": {"a": "1"}}, "parallelism": 2}},
        {"spec": {"selector": {"$patch": "delete"}}},
        {"metadata": {}, "spec": {"parallelism": 2}},
    ),
    (
        "null deletes a key",
        "Job",
        {"metadata": {"labels": {"a": "1", "b": "2"}}},
        {"metadata": {"labels": {"a": None}}},
        {"metadata": {"labels": {"b": "2"}}},
    ),
    (
        "a list without patch strategy is replaced (args)",
        "Job",
        _job([{"name": "a", "args": ["1", "2"]}]),
        _job([{"name": "a", "args": ["3"]}]),
        _job([{"name": "a", "args": ["3"]}]),
    ),
    (
        "tolerations (no strategy) are replaced",
        "Job",
        _job([C_A], tolerations=[{"key": "a"}]),
        _job([C_A], tolerations=[{"key": "b"}]),
        _job([C_A], tolerations=[{"key": "b"}]),
    ),
    (
        "finalizers merge as a set",
        "Namespace",
        {"metadata": {"finalizers": ["a/x", "b/y"]}},
        {"metadata": {"finalizers": ["b/y", "c/z"]}},
        {"metadata": {"finalizers": ["a/x", "b/y", "c/z"]}},
    ),
    (
        "$deleteFromPrimitiveList removes set members",
        "Namespace",
        {"metadata": {"finalizers": ["a/x", "b/y"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}},
        {"metadata": {"finalizers": ["b/y"]}},
    ),
    (
        "$setElementOrder orders the merged list",
        "Job",
        _job([C_A, C_B]),
        {
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                        "containers": [{"name": "a", "image": "x:3"}],
                    }
                }
            }
        },
        _job([C_B, {**C_A, "image": "x:3"}]),
    ),
    (
        "$retainKeys clears the keys it does not name (a volume's source)",
        "Job",
        _job([C_A], volumes=[{"name": "v", "emptyDir": {}}]),
        _job(
            [],
            volumes=[
                {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}
            ],
        ),
        _job([C_A], volumes=[{"name": "v", "hostPath": {"path": "/d"}}]),
    ),
    (
        "directives never reach a new subtree",
        "Job",
        {"metadata": {}, "spec": {}},
        _job([{"name": "a"}, {"name": "b", "$patch": "delete"}]),
        _job([{"name": "a"}]),
    ),
    (
        "Secret data is a map",
        "Secret",
        {"metadata": {}, "data": {"a": "MQ==", "b": "Mg=="}},
        {"data": {"a": None, "c": "Mw=="}},
        {"metadata": {}, "data": {"b": "Mg==", "c": "Mw=="}},
    ),
]


@pytest.mark.parametrize(("kind", "original", "patch", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_strategic_merge(kind: str, original: Any, patch: Any, expected: Any) -> None:
    assert strategic_merge.apply(kind, original, patch) == expected


BAD = [
    ("an item without its merge key", _job([{"image": "x"}])),
    ("an unknown $patch", {"spec": {"$patch": "explode"}}),
    ("$patch: merge in a list", _job([{"$patch": "merge"}])),
    ("a key outside $retainKeys", {"spec": {"$retainKeys": ["a"], "b": 1}}),
]


@pytest.mark.parametrize(("patch"), [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_strategic_patches_are_refused(patch: Any) -> None:
    with pytest.raises(PatchError):
        strategic_merge.apply("Job", _job([C_A]), patch)


def test_only_built_in_kinds_take_strategic_patches() -> None:
    assert strategic_merge.supports("Job") and strategic_merge.supports("Namespace")
    assert not strategic_merge.supports("ClusterQueue")
    assert not strategic_merge.supports("RayCluster")


labels = st.dictionaries(st.sampled_from("abcde"), st.text("xyz", max_size=2), max_size=4)


@given(original=labels, patch=labels)
def test_a_patch_without_directives_on_a_map_is_a_merge_patch(
    original: dict[str, str], patch: dict[str, str]
) -> None:
    out = strategic_merge.apply(
        "Namespace", {"metadata": {"labels": original}}, {"metadata": {"labels": patch}}
    )
    assert out["metadata"]["labels"] == {**original, **patch}


@given(names=st.lists(st.sampled_from("abcdef"), unique=True, max_size=5),
       patched=st.lists(st.sampled_from("abcdef"), unique=True, max_size=5))  # fmt: skip
def test_keyed_merge_keeps_every_name_once(names: list[str], patched: list[str]) -> None:
    original = _job([{"name": n, "image": "old"} for n in names])
    out = strategic_merge.apply(
        "Job", original, _job([{"name": n, "image": "new"} for n in patched])
    )
    got = _containers(out)
    assert sorted(c["name"] for c in got) == sorted(set(names) | set(patched))
    assert all(c["image"] == ("new" if c["name"] in patched else "old") for c in got)
