"""Invariants of the engine under random configurations and random arrivals and finishes.

- usage never exceeds what the quota tree allows (per CQ: nominal + borrowingLimit; per cohort:
  its subtree quota), and the tree's usage equals the sum of the admitted workloads';
- no workload is admitted twice (one CQ holds it, admissions only count up);
- LowerPriority never evicts an equal or higher priority workload;
- the same inputs always give the same decisions.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import KueueObject
from gpuaas.core.state import Phase
from gpuaas.testing.builders import ClusterQueueBuilder, WorkloadBuilder, flavor, local_queue

POLICIES = ["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]


@st.composite
def configurations(draw: st.DrawFn) -> tuple[list[KueueObject], list[str], bool]:
    n_cq = draw(st.integers(1, 4))
    two_flavors = draw(st.booleans())
    only_lower_priority = draw(st.booleans())
    objs: list[KueueObject] = [flavor("f1"), flavor("f2")]
    names = []
    for i in range(n_cq):
        name = f"cq{i}"
        names.append(name)
        b = ClusterQueueBuilder(name)
        if draw(st.booleans()):
            b.cohort("co")
        cohorted = b.obj().cohort is not None
        nominal = draw(st.integers(0, 8))
        borrow = draw(st.one_of(st.none(), st.integers(0, 8))) if cohorted else None
        lend = draw(st.one_of(st.none(), st.integers(0, nominal))) if cohorted else None
        flavors: list[tuple[str, dict[str, object]]] = [("f1", {"cpu": (nominal, borrow, lend)})]
        if two_flavors:
            flavors.append(("f2", {"cpu": (draw(st.integers(0, 4)), None, None)}))
        b.group(*flavors)  # type: ignore[arg-type]
        if draw(st.booleans()):
            b.strict_fifo()
        if only_lower_priority:
            b.preemption("LowerPriority", "LowerPriority" if cohorted else "Never")
        else:
            b.preemption(
                draw(st.sampled_from(POLICIES)),
                draw(st.sampled_from(POLICIES)) if cohorted else "Never",
                draw(st.sampled_from(["Never", "LowerPriority"])) if cohorted else "Never",
                draw(st.one_of(st.none(), st.integers(0, 3))),
            )
        objs.append(b.obj())
        objs.append(local_queue(name, name))
    return objs, names, only_lower_priority


events_st = st.lists(
    st.tuples(
        st.sampled_from(["submit", "submit", "submit", "finish"]),
        st.integers(0, 3),  # cq index / finish index
        st.integers(1, 6),  # cpu
        st.integers(0, 3),  # priority
    ),
    min_size=1,
    max_size=25,
)


def _play(
    objs: list[KueueObject], names: list[str], events: list[tuple[str, int, int, int]]
) -> tuple[Cluster, list[tuple[float, str, str | None, str | None]]]:
    c = Cluster()
    for o in objs:
        c.apply(o, 0)
    c.schedule(0)
    submitted: list[str] = []
    log = []
    for t, (kind, idx, cpu, prio) in enumerate(events, start=1):
        if kind == "submit":
            name = f"w{t}"
            c.apply(
                WorkloadBuilder(name)
                .queue(names[idx % len(names)])
                .priority(prio)
                .request(cpu=str(cpu))
                .obj(),
                t,
            )
            submitted.append(f"default/{name}")
        elif submitted:
            c.finish(submitted[idx % len(submitted)], t)
        c.schedule(t)
        for e in c.take_events():
            log.append((e.time, e.reason, e.workload, e.related))
        check_invariants(c)
    return c, log


def check_invariants(c: Cluster) -> None:
    holders: dict[str, str] = {}
    for cq in c.cqs.values():
        total: dict[tuple[str, str], int] = {}
        for key, wl in cq.admitted.items():
            assert key not in holders, f"{key} admitted in {holders.get(key)} and {cq.name}"
            holders[key] = cq.name
            assert wl.phase in (Phase.ADMITTED, Phase.EVICTING)
            assert wl.admission is not None and wl.usage == wl.admission.usage()
            for fr, v in wl.usage.items():
                total[fr] = total.get(fr, 0) + v
        for fr in set(total) | set(cq.node.usage):
            assert cq.node.usage.get(fr, 0) == total.get(fr, 0), (cq.name, fr)
            q = cq.node.quotas.get(fr)
            nominal = q.nominal if q else 0
            if cq.node.parent is None:
                assert total.get(fr, 0) <= nominal, (cq.name, fr, total)
            elif q is not None and q.borrowing_limit is not None:
                assert total.get(fr, 0) <= nominal + q.borrowing_limit, (cq.name, fr)
    for node in c.cohort_nodes.values():
        if node.parent is None:
            for fr, used in node.usage.items():
                assert used <= node.subtree_quota.get(fr, 0), (node.name, fr)
    for key, wl in c.workloads.items():
        if wl.phase in (Phase.ADMITTED, Phase.EVICTING):
            assert holders.get(key) == wl.cluster_queue
        else:
            assert key not in holders


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), events_st)
def test_quota_and_single_admission_invariants(
    cfg: tuple[list[KueueObject], list[str], bool], events: list[tuple[str, int, int, int]]
) -> None:
    objs, names, _ = cfg
    _play(objs, names, events)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), events_st)
def test_lower_priority_never_evicts_equal_or_higher(
    cfg: tuple[list[KueueObject], list[str], bool], events: list[tuple[str, int, int, int]]
) -> None:
    objs, names, only_lower = cfg
    c, log = _play(objs, names, events)
    if not only_lower:
        return
    for _, reason, victim, preemptor in log:
        if reason == "Preempted":
            assert victim is not None and preemptor is not None
            vp = c.workloads[victim].priority
            pp = c.workloads[preemptor].priority
            assert vp < pp, f"{victim} ({vp}) evicted by {preemptor} ({pp})"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), events_st)
def test_same_inputs_same_decisions(
    cfg: tuple[list[KueueObject], list[str], bool], events: list[tuple[str, int, int, int]]
) -> None:
    objs, names, _ = cfg
    import copy

    _, log1 = _play(copy.deepcopy(objs), names, events)
    _, log2 = _play(copy.deepcopy(objs), names, events)
    assert log1 == log2
