"""Invariant of the pinning used without a runtime: no GPU ever goes to two workloads, every
pinned workload holds quota, and a workload keeps the same GPUs while it holds its quota."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_docs import cluster_queue, flavor, local_queue, namespace, workload

from gpuaas.core.cluster import Cluster
from gpuaas.core.manifests import parse_object
from gpuaas.core.state import Phase
from gpuaas.engine.telemetry_view import HOLDING, DerivedPinning
from gpuaas.engine.views import workload_views
from gpuaas.inventory.gpus import parse_fake_gpus

Step = tuple[str, int, int]  # ("add", id, gpus) or ("finish", id, 0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 9), st.integers(1, 4)),
            st.tuples(st.just("finish"), st.integers(0, 9), st.just(0)),
        ),
        max_size=30,
    )
)
def test_derived_pinning_never_shares_a_gpu(steps: list[Step]) -> None:
    c = Cluster()
    for doc in (namespace("ns"), flavor(), cluster_queue("cq", 6), local_queue("ns", "lq", "cq")):
        c.apply(parse_object(doc), 0.0)
    pinning = DerivedPinning(parse_fake_gpus("6"))
    held_before: dict[str, set[int]] = {}
    for t, (op, ident, gpus) in enumerate(steps, start=1):
        key = f"ns/w{ident}"
        if op == "add" and key not in c.workloads:
            c.apply(parse_object(workload("ns", f"w{ident}", queue="lq", gpus=gpus)), float(t))
        elif op == "finish":
            c.finish(key, float(t))
        c.schedule(float(t))
        owners = pinning.owners(workload_views(c, phases=HOLDING))
        by_workload: dict[str, set[int]] = {}
        for index, (owner, pod) in owners.items():
            assert pod == f"{owner.split('/')[1]}-0"
            by_workload.setdefault(owner, set()).add(index)
        for owner, indices in by_workload.items():
            state = c.workloads[owner]
            assert state.phase in HOLDING
            assert len(indices) == state.usage[("h100", "nvidia.com/gpu")]
            if owner in held_before and state.phase == Phase.ADMITTED:
                assert held_before[owner] == indices  # no reshuffle while it holds quota
        held_before = by_workload
