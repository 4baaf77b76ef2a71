"""The fast flavor assignment (``assign_if_fits``) answers exactly as the full assigner does.

The scheduler asks ``assign_if_fits`` first and runs ``FlavorAssigner`` only when it returns
None. Here every answer it gives during random scenarios (several flavors with labels and
taints, two resource groups, the ``pods`` resource, several pod sets, lending limits,
hierarchical cohorts, whenCanBorrow TryNextFlavor, resumed scans) is compared field by field,
dict order included, with the full assigner's on the same tree; the full one may not even ask
its preemption oracle.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.core import scheduler as scheduler_mod
from gpuaas.core.cluster import Cluster
from gpuaas.core.flavors import Assignment, FlavorAssigner, Mode, assign_if_fits
from gpuaas.core.objects import (
    ClusterQueue,
    KueueObject,
    PodSet,
    ResourceFlavor,
    Taint,
    Toleration,
    Workload,
)
from gpuaas.core.state import Phase
from gpuaas.testing.builders import ClusterQueueBuilder, cohort, local_queue

FLAVORS = [
    ResourceFlavor("f1", {"zone": "a"}),
    ResourceFlavor("f2", {"zone": "b"}),
    ResourceFlavor("f3", {"zone": "a"}, (Taint("spot", "true"),)),
]


def _summary(a: Assignment) -> Any:
    return (
        [
            (
                ps.name,
                ps.count,
                list(ps.requests.items()),
                [(r, fc.flavor, fc.mode, fc.borrow, fc.tried_idx) for r, fc in ps.flavors.items()],
                ps.reasons,
            )
            for ps in a.pod_sets
        ],
        a.borrowing,
        list(a.usage.items()),
        a.last_tried,
        a.mode(),
    )


def _no_oracle(fr: Any, val: int) -> Any:
    raise AssertionError(f"a plain fit needs no preemption oracle ({fr}, {val})")


@st.composite
def clusters(draw: st.DrawFn) -> list[KueueObject]:
    objs: list[KueueObject] = list(FLAVORS)
    hierarchical = draw(st.booleans())
    if hierarchical:
        objs += [cohort("root"), cohort("left", "root"), cohort("right", "root")]
    for i in range(draw(st.integers(1, 3))):
        b = ClusterQueueBuilder(f"cq{i}")
        if draw(st.booleans()):
            b.cohort(("left" if i % 2 else "right") if hierarchical else "co")
        flavors = draw(st.permutations(["f1", "f2", "f3"]))[: draw(st.integers(1, 3))]
        with_pods = draw(st.booleans())
        group: list[tuple[str, dict[str, Any]]] = []
        for f in flavors:
            nominal = draw(st.integers(0, 10))
            quota: dict[str, Any] = {
                "cpu": (
                    nominal,
                    draw(st.one_of(st.none(), st.integers(0, 10))),
                    draw(st.one_of(st.none(), st.integers(0, nominal))),
                )
            }
            if with_pods:
                quota["pods"] = draw(st.integers(1, 8))
            group.append((f, quota))
        b.group(*group)
        if draw(st.booleans()):
            b.group(("f1", {"example.com/gpu": draw(st.integers(0, 4))}))
        b.fungibility(draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])))
        b.preemption("LowerPriority", "Any" if draw(st.booleans()) else "Never")
        objs += [b.obj(), local_queue(f"cq{i}", f"cq{i}")]
    return objs


pod_sets_st = st.lists(
    st.tuples(
        st.integers(1, 3),  # count
        st.integers(0, 2),  # cpu per pod
        st.sampled_from([0, 0, 1, 2]),  # gpus per pod
        st.sampled_from([None, "a", "b"]),  # nodeSelector zone
        st.booleans(),  # tolerates spot
    ),
    min_size=1,
    max_size=2,
)

events_st = st.lists(
    st.tuples(st.sampled_from(["submit", "submit", "finish"]), st.integers(0, 2), pod_sets_st),
    min_size=1,
    max_size=20,
)


def _workload(n: int, cq: int, specs: list[tuple[int, int, int, str | None, bool]]) -> Workload:
    pod_sets = []
    for j, (count, cpu, gpu, zone, tolerates) in enumerate(specs):
        requests = {"cpu": cpu * 1000}  # millicores, as the quotas are parsed
        if gpu:
            requests["example.com/gpu"] = gpu
        pod_sets.append(
            PodSet(
                name=f"ps{j}",
                count=count,
                requests=requests,
                node_selector={"zone": zone} if zone else {},
                tolerations=(Toleration("spot", "Exists"),) if tolerates else (),
            )
        )
    return Workload("default", f"w{n}", f"cq{cq}", pod_sets, priority=n % 3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), events_st)
def test_fast_assignment_matches_the_full_assigner(
    objs: list[KueueObject], events: list[tuple[str, int, Any]]
) -> None:
    c = Cluster()
    answered = []

    def checked(
        pod_sets: list[PodSet],
        cq: ClusterQueue,
        node: Any,
        rg_by_resource: Any,
        flavors: Any,
        last_tried: Any,
    ) -> Assignment | None:
        fast = assign_if_fits(pod_sets, cq, node, rg_by_resource, flavors, last_tried)
        if fast is not None:
            full = FlavorAssigner(
                pod_sets, cq, node, rg_by_resource, flavors, _no_oracle, False, last_tried
            ).assign(None)
            assert _summary(fast) == _summary(full)
            answered.append(fast)
        return fast

    mp = pytest.MonkeyPatch()
    mp.setattr(scheduler_mod, "assign_if_fits", checked)
    try:
        for o in objs:
            c.apply(o, 0)
        for n, (kind, idx, specs) in enumerate(events):
            t = n + 1
            if kind == "submit":
                c.apply(_workload(n, idx % 3, specs), t)
            else:
                admitted = sorted(k for k, w in c.workloads.items() if w.phase == Phase.ADMITTED)
                if admitted:
                    c.finish(admitted[idx % len(admitted)], t)
            c.schedule(t)
    finally:
        mp.undo()
    assert all(a.mode() == Mode.FIT for a in answered)


def _plain_cluster(when_can_borrow: str) -> Cluster:
    c = Cluster()
    c.apply(FLAVORS[0], 0)
    c.apply(FLAVORS[1], 0)
    for name in ("a", "b"):
        b = ClusterQueueBuilder(name).cohort("co")
        b.group(("f1", {"cpu": (2, 4)}), ("f2", {"cpu": 4}))
        b.fungibility(when_can_borrow)
        c.apply(b.obj(), 0)
    c.schedule(0)
    return c


def _ask(c: Cluster, cpu: int) -> Assignment | None:
    cq = c.cqs["a"]
    ps = [PodSet("main", 1, {"cpu": cpu * 1000})]  # millicores
    return assign_if_fits(ps, cq.spec, cq.node, cq.rg_by_resource, c.flavors, None)


@pytest.mark.parametrize(
    ("when_can_borrow", "cpu", "expected"),
    [
        ("MayStopSearch", 2, ("f1", 0)),  # within nominal on the first flavor
        ("MayStopSearch", 3, ("f1", 1)),  # borrows on the first flavor and stops there
        ("TryNextFlavor", 2, ("f1", 0)),  # no borrowing: nothing to look past
        ("TryNextFlavor", 3, None),  # must weigh f2 too: the full assigner decides
        ("MayStopSearch", 5, None),  # f1 cannot hold it: the full assigner decides
    ],
)
def test_fast_assignment_answers_only_plain_fits(
    when_can_borrow: str, cpu: int, expected: tuple[str, int] | None
) -> None:
    a = _ask(_plain_cluster(when_can_borrow), cpu)
    if expected is None:
        assert a is None
    else:
        assert a is not None
        fc = a.pod_sets[0].flavors["cpu"]
        assert (fc.flavor, fc.borrow) == expected
        assert a.usage == {(expected[0], "cpu"): cpu * 1000}
