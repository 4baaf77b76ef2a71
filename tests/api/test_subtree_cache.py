"""The body walks kept by a field's value (``api.subtree_cache``) answer as the walks do.

Each walk is run on documents that share fields with documents seen before (as a batch
system's creates share a ``spec``) and compared with the walk itself, without the cache: the
same field ownership, the same unknown fields, the same refusals naming the same field. A
caller that changes what it got does not change what the next caller gets.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuaas.api import managed_fields, subtree_cache, validation
from gpuaas.api.body import BodyError, check_document, parse_body
from gpuaas.api.field_types import schema_of
from gpuaas.vocab.kinds import BY_KIND

WORKLOAD = BY_KIND["Workload"]
JOB = BY_KIND["Job"]


def workload(name: str, cpu: str = "1", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": "t", "labels": {"team": "a"}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}},
                                         **(extra or {})}]}}}]}}  # fmt: skip


def job(name: str, image: str = "busybox") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": image, "ports": [{"containerPort": 80}]}]}}}}  # fmt: skip


def test_the_cache_keeps_a_result_by_context_field_and_value() -> None:
    cache: subtree_cache.SubtreeCache[int] = subtree_cache.SubtreeCache()
    calls: list[int] = []

    def compute(n: int) -> Any:
        return lambda: calls.append(n) or n

    ctx, other = object(), object()
    assert cache.get(ctx, "spec", {"a": 1}, compute(1)) == 1
    assert cache.get(ctx, "spec", {"a": 1}, compute(2)) == 1  # kept
    assert cache.get(ctx, "spec", {"a": 1.0}, compute(3)) == 3  # another value
    assert cache.get(ctx, "status", {"a": 1}, compute(4)) == 4  # another field
    assert cache.get(other, "spec", {"a": 1}, compute(5)) == 5  # another context
    big = {"x": "y" * subtree_cache.MAX_BYTES}
    assert cache.get(ctx, "spec", big, compute(6)) == 6
    assert cache.get(ctx, "spec", big, compute(7)) == 7  # never kept
    assert calls == [1, 3, 4, 5, 6, 7]


def _uncached_created(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    fields, _ = managed_fields.changes({}, doc, schema, True)
    return managed_fields.encode(fields)


@pytest.mark.parametrize(
    ("kind", "docs"),
    [
        (WORKLOAD, [workload("a"), workload("b"), workload("c", "2"), workload("d")]),
        (WORKLOAD, [workload("a", extra={"image": "x"}), workload("b", extra={"image": "y"})]),
        (JOB, [job("a"), job("b"), job("c", "other"), job("d")]),
    ],
)
def test_created_fields_are_the_walks_for_documents_that_share_fields(
    kind: Any, docs: list[dict[str, Any]]
) -> None:
    schema = schema_of(kind, kind.versions[0])
    for doc in docs:
        got = managed_fields.created_fields(doc, schema, True)
        assert got == _uncached_created(doc, schema)
        assert json.dumps(got) == json.dumps(_uncached_created(doc, schema))  # and key order
        got["f:spec"]["f:mine"] = {}  # the caller's copy
    assert "f:mine" not in managed_fields.created_fields(docs[0], schema, True)["f:spec"]


def test_unknown_fields_are_the_walks_for_documents_that_share_fields() -> None:
    docs = [workload("a"), workload("b", extra={"bogus": 1}), workload("c"),
            {**workload("d"), "spec": {**workload("d")["spec"], "nope": [1]}}, workload("e")]  # fmt: skip
    for doc in docs:
        want = [f'unknown field "{u}"' for u in validation.unknown_fields(
            doc, validation._checked_schema(WORKLOAD, "v1beta1"))]  # fmt: skip
        assert validation.check(WORKLOAD, "v1beta1", doc, "Warn") == want
        assert validation.check(WORKLOAD, "v1beta1", copy.deepcopy(doc), None) == want
    assert validation.check(WORKLOAD, "v1beta1", docs[1], "Warn") == [
        'unknown field "spec.podSets[0].template.spec.containers[0].bogus"'
    ]


def _refusal(check: Any) -> str | None:
    try:
        check()
    except BodyError as exc:
        return exc.message
    return None


@pytest.mark.parametrize(
    "doc",
    [
        {"spec": {"a": 1}, "metadata": {"name": "x"}},  # seen before: the spec is kept as good
        {"spec": {"a": 1}, "metadata": {"n": 1 << 64}},  # a kept spec, a bad field beside it
        {"spec": {"a": 1 << 64}, "metadata": {"n": 1 << 64}},  # two bad fields: the same named
        {"metadata": {"n": 1 << 64}, "spec": {"a": 1 << 64}},
        {"spec": [[[[1]]]], "status": 1 << 63},
        {"spec": {"a": 1}, "deep": json.loads("[" * 70 + "]" * 70)},
    ],
)
def test_checks_of_msgspec_documents_refuse_as_the_walk_does(doc: dict[str, Any]) -> None:
    check_document({"spec": {"a": 1}}, from_msgspec=True)  # keeps {"a": 1} as good
    raw = json.dumps(doc).encode()
    want = _refusal(lambda: check_document(json.loads(raw)))
    assert _refusal(lambda: check_document(json.loads(raw), from_msgspec=True)) == want
    assert _refusal(lambda: parse_body(raw, "application/json")) == want
