"""One kept copy of equal shapes and admissions (``core.interning``): equal values, fewer copies.

A workload keeps its scheduling shape and its admission for its life; equal ones share one
object. The table is bounded, and an evicted workload's admission goes without touching the
others that shared it (the core replaces an admission, never changes it in place).
"""

from __future__ import annotations

from gpuaas.core.cluster import Cluster
from gpuaas.core.interning import Shared, admission_key
from gpuaas.core.state import Admission, Phase, PodSetAssignment
from gpuaas.testing.builders import ClusterQueueBuilder, WorkloadBuilder, flavor, local_queue


def test_equal_values_share_the_first_copy() -> None:
    table = Shared()
    a, b = ("x", (1, 2)), ("x", (1, 2))
    assert table.shared(a, a) is a
    assert table.shared(b, b) is a


def test_the_table_is_bounded() -> None:
    table = Shared(limit=3)
    for i in range(10):
        table.shared(i * 1000, object())
    fresh, again = tuple(["late"]), tuple(["late"])
    assert table.shared(fresh, fresh) is fresh
    assert table.shared(again, again) is again  # past the bound nothing more is kept
    assert table.shared(0, object()) is not None


def test_admission_key_tells_every_field_apart() -> None:
    def adm(cq: str, flavor: str, count: int, cpu: int) -> Admission:
        return Admission(cq, [PodSetAssignment("main", {"cpu": flavor}, count, {"cpu": cpu})])

    base = admission_key(adm("cq", "rf", 1, 1000))
    assert base == admission_key(adm("cq", "rf", 1, 1000))
    others = [adm("cq2", "rf", 1, 1000), adm("cq", "rf2", 1, 1000), adm("cq", "rf", 2, 1000)]
    others.append(adm("cq", "rf", 1, 2000))
    assert all(admission_key(o) != base for o in others)


def test_workloads_of_one_shape_share_shape_and_admission_and_evicting_one_leaves_others() -> None:
    c = Cluster()
    c.apply(flavor("rf"), 0.0)
    c.apply(ClusterQueueBuilder("cq").group(("rf", {"cpu": "10"})).obj(), 0.0)
    c.apply(local_queue("lq", "cq", "ns"), 0.0)
    for name in ("a", "b", "c"):
        c.apply(WorkloadBuilder(name, "ns").queue("lq").request(cpu="1").obj(), 1.0)
    c.schedule(1.0)
    a, b, w3 = (c.workloads[f"ns/{n}"] for n in ("a", "b", "c"))
    assert a.phase == b.phase == w3.phase == Phase.ADMITTED
    assert a.shape is b.shape is w3.shape
    assert a.admission is b.admission is w3.admission
    kept = admission_key(b.admission)
    assert c.finish("ns/a", 2.0)
    c.schedule(2.0)
    assert a.phase == Phase.FINISHED
    assert b.admission is not None and admission_key(b.admission) == kept
    assert b.phase == w3.phase == Phase.ADMITTED
