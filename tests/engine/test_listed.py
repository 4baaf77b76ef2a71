"""A list hands out its documents decoded when read (``engine.listed``), through the engine.

Each read is a copy of its own; the list is the one read at its resourceVersion even after the
objects change (a record is replaced, never changed), and a paged list gives every item once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuaas.api.list_pages import Pages
from gpuaas.engine.engine import Engine
from gpuaas.engine.listed import ListedDocs
from gpuaas.store import ObjectKey, ObjectRecord, open_store
from gpuaas.vocab.kinds import BY_KIND

FLAVOR = BY_KIND["ResourceFlavor"]


def flavor(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": labels},
    }


def test_a_list_is_the_one_read_at_its_resource_version(tmp_path: Path) -> None:
    e = Engine(open_store(f"sqlite:///{tmp_path / 'db'}"))
    try:
        for i in range(5):
            e.create(FLAVOR, None, flavor(f"f{i}", zone="a"))
        docs, rv = e.list_objects(FLAVOR)
        e.replace(FLAVOR, None, "f1", flavor("f1", zone="b"))
        e.delete(FLAVOR, None, "f2")
        assert [d["metadata"]["name"] for d in docs] == [f"f{i}" for i in range(5)]
        assert docs[1]["spec"]["nodeLabels"] == {"zone": "a"}
        assert all(int(d["metadata"]["resourceVersion"]) <= rv for d in docs)
        first = docs[0]
        first["spec"]["nodeLabels"]["zone"] = "changed"
        assert docs[0]["spec"]["nodeLabels"] == {"zone": "a"}  # each read is a copy
        now, _ = e.list_objects(FLAVOR)
        assert [d["spec"]["nodeLabels"]["zone"] for d in now] == ["a", "b", "a", "a"]
    finally:
        e.close()


def test_keys_where_and_slices() -> None:
    recs = [
        ObjectRecord(ObjectKey("kueue.x-k8s.io/Workload", "ns", f"w{i}"), i, i, 0.0, {"n": i})
        for i in range(300)
    ]
    built = {"metadata": {"namespace": "ns", "name": "zz"}, "n": 300}
    docs = ListedDocs([*recs, built])
    assert len(docs) == 301
    assert docs.item_keys()[:2] == [("ns", "w0"), ("ns", "w1")]
    assert docs.item_keys()[-1] == ("ns", "zz")
    assert [d["n"] for d in docs[298:]] == [298, 299, 300]  # many at once, collector paused
    assert [d["n"] for d in docs[0:300]] == list(range(300))
    odd = docs.where(lambda d: d["n"] % 2 == 1)
    assert [d["n"] for d in odd][:3] == [1, 3, 5] and len(odd) == 150


def test_pages_of_a_list_give_every_item_once(tmp_path: Path) -> None:
    e = Engine(open_store(f"sqlite:///{tmp_path / 'db'}"))
    try:
        for i in range(23):
            e.create(FLAVOR, None, flavor(f"f{i:02d}"))
        pages, seen, token = Pages(), [], None
        while True:
            items, _, token, _ = pages.page(lambda: e.list_objects(FLAVOR), 5, token)
            seen += [d["metadata"]["name"] for d in items]
            if token is None:
                break
            e.create(FLAVOR, None, flavor(f"new{len(seen)}"))  # later objects: not in this list
        assert seen == [f"f{i:02d}" for i in range(23)]
    finally:
        e.close()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "003-rayclusters"


def _apply(e: Engine, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        kind = BY_KIND[doc["kind"]]
        e.create(kind, doc["metadata"].get("namespace"), doc)


def test_a_list_shows_each_kind_as_a_get_does(tmp_path: Path) -> None:
    """Kinds whose status is built when read (queues' counters, KubeRay's status of a RayCluster
    or RayJob) are listed with it: ``kubectl get rayclusters`` reads its columns from a list."""
    setup = [d for d in yaml.safe_load_all((EXAMPLE / "setup.yaml").read_text()) if d]
    cluster = yaml.safe_load((EXAMPLE / "team-b-ray-cluster-dev.yaml").read_text())
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "team-b", "labels": cluster["metadata"]["labels"]},
        "spec": {
            "entrypoint": "python job.py",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster["spec"],
        },
    }
    e = Engine(open_store(f"sqlite:///{tmp_path / 'db'}"))
    try:
        _apply(e, [*setup, cluster, job])
        e.committer.submit([]).result(timeout=10)  # the scheduler's decisions are in
        for kind_name in ("ClusterQueue", "LocalQueue", "RayCluster", "RayJob"):
            kind = BY_KIND[kind_name]
            listed, _ = e.list_objects(kind)
            assert listed, kind_name
            for doc in listed:
                meta = doc["metadata"]
                got = e.get(kind, meta.get("namespace"), meta["name"])
                assert doc.get("status") and doc["status"] == got["status"], kind_name
    finally:
        e.close()
