"""The engine's object index keeps each kind's objects in step with the objects themselves,
whatever sequence of puts and removals the engine makes (``[key] = record``, ``pop``, ``del``), and the names of its job objects with them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.store import ObjectKey, ObjectRecord

GKS = ["kueue.x-k8s.io/Workload", "batch/Job", "ray.io/RayCluster", "kueue.x-k8s.io/ClusterQueue"]
JOB_GKS = {"batch/Job", "ray.io/RayCluster"}
keys = st.builds(ObjectKey, st.sampled_from(GKS), st.sampled_from(["", "a", "b"]),
                 st.sampled_from(["x", "y", "z"]))  # fmt: skip
ops = st.lists(st.tuples(st.sampled_from(["put", "pop", "del"]), keys, st.integers(1, 9)))


def record(key: ObjectKey, rv: int) -> ObjectRecord:
    return ObjectRecord(key, rv, rv, 0.0, {"metadata": {"name": key.name}})


@given(initial=st.lists(keys, max_size=6), steps=ops)
def test_each_kind_holds_exactly_the_objects_of_that_kind(
    initial: list[ObjectKey], steps: list[tuple[str, ObjectKey, int]]
) -> None:
    index = ObjectIndex([record(k, 1) for k in initial])
    model = {k: record(k, 1) for k in initial}
    for op, key, rv in steps:
        if op == "put":
            index[key] = model[key] = record(key, rv)
        elif op == "pop":
            assert index.pop(key, None) == model.pop(key, None)
        elif key in model:
            del index[key]
            del model[key]
    assert dict(index) == model
    for gk in GKS:
        assert dict(index.of_kind(gk)) == {k: r for k, r in model.items() if k.gk == gk}
    # A Job and a RayCluster may share a name: the name stays until neither is stored.
    assert set(index.job_names) == {f"{k.namespace}/{k.name}" for k in model if k.gk in JOB_GKS}


def test_a_kind_with_no_objects_is_empty() -> None:
    assert dict(ObjectIndex().of_kind("batch/Job")) == {}
