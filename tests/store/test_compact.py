"""Records keep their documents deflated (``store.compact``) and give them back unchanged.

What a record holds must read back as the same JSON value in the same key order (answers are
byte for byte what they were), each read must be a copy of its own, and a Workload must take a
small fraction of its JSON once documents of its kind repeat.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gpuaas.store import ObjectKey, ObjectRecord, compact

WL = "kueue.x-k8s.io/Workload"


def workload(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": f"w-{i}", "namespace": "team-a", "uid": f"uid-{i:08d}"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": [{"type": "Admitted", "status": "True", "message": "ok"}]},
    }


def test_a_record_reads_back_the_same_json_in_the_same_key_order() -> None:
    doc = {"z": 1, "a": {"y": [1.5, None, True, "x"], "b": {}}, "metadata": {"name": "n"}}
    rec = ObjectRecord(ObjectKey(WL, "ns", "n"), 3, 2, 1.0, doc, {"phase": "Pending"})
    assert rec.doc == doc
    assert msgspec.json.encode(rec.doc) == msgspec.json.encode(doc)  # order kept, not sorted
    assert rec.doc_json == msgspec.json.encode(doc)
    assert rec.internal == {"phase": "Pending"}


def test_each_read_is_a_copy_of_its_own() -> None:
    rec = ObjectRecord(ObjectKey(WL, "ns", "n"), 1, 1, 0.0, workload(1))
    first = rec.doc
    first["metadata"]["name"] = "changed"
    assert rec.doc["metadata"]["name"] == "w-1"
    assert rec.doc is not rec.doc


def test_replace_changes_only_what_it_is_given() -> None:
    rec = ObjectRecord(ObjectKey(WL, "ns", "n"), 1, 1, 5.0, workload(1), {"phase": "Pending"})
    new = rec.replace(rv=2, doc=workload(2))
    assert (new.rv, new.seq, new.created, new.key) == (2, 1, 5.0, rec.key)
    assert new.doc == workload(2) and new.internal == {"phase": "Pending"}
    assert rec.replace(internal={}).internal == {}
    assert rec.replace(rv=9) == ObjectRecord(rec.key, 9, 1, 5.0, workload(1), {"phase": "Pending"})
    assert rec != new


def test_documents_of_one_kind_deflate_to_a_fraction_of_their_json() -> None:
    table = "test.gpuaas.dev/Compact"
    packed = [compact.encode(table, workload(i)) for i in range(50)]
    plain = [msgspec.json.encode(workload(i)) for i in range(50)]
    assert sum(map(len, packed)) * 2 < sum(map(len, plain))
    assert [compact.decode(table, p) for p in packed] == [workload(i) for i in range(50)]


def test_json_the_store_read_back_is_kept_as_it_was() -> None:
    text = b'{"a":1,"metadata":{"name":"n"},"z":[2]}'  # the store's sorted keys
    rec = ObjectRecord.encoded(ObjectKey(WL, "ns", "n"), 4, 1, 0.0, text, b"{}")
    assert rec.doc_json == text
    assert list(rec.doc) == ["a", "metadata", "z"]
    assert rec.internal == {}


@pytest.mark.parametrize("value", [{}, {"a": "b" * 5000}, {"x": [1, 2, 3]}])
def test_what_does_not_deflate_stays_plain_and_reads_back(value: dict[str, Any]) -> None:
    packed = compact.encode("test.gpuaas.dev/Plain", value)
    assert compact.decode("test.gpuaas.dev/Plain", packed) == value


def test_a_new_record_is_plain_json_until_compacted_and_reads_the_same_after() -> None:
    key = ObjectKey(WL, "team-a", "w-1")
    for i in range(3):  # the kind's dictionary is chosen from its first compacted document
        ObjectRecord(key, 1, 1, 0.0, workload(i), {"phase": "Pending"}).compact()
    rec = ObjectRecord(key, 7, 1, 5.0, workload(1), {"phase": "Pending", "created": 5.0})
    plain = len(msgspec.json.encode(workload(1)))
    assert rec.size > plain  # nothing deflated under the engine's lock
    doc_json, before = rec.doc_json, (rec.doc, rec.internal)
    rec.compact()
    assert rec.size * 2 < plain
    assert (rec.doc_json, rec.doc, rec.internal) == (doc_json, *before)
    rec.compact()  # once is enough: nothing changes
    assert (rec.doc, rec.internal) == before
    new = rec.replace(rv=8)  # what is not given is shared as it is
    assert new.size == rec.size and new.doc == rec.doc
