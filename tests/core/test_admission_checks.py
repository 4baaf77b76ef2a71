"""Admission checks in the core, asserted on decision types and Kueue's conditions and events.

Follows Kueue's ``pkg/workload/admissionchecks.go`` (SyncAdmittedCondition), the workload
controller's ``reconcileCheckBasedEviction`` and ``pkg/workload/evict/evict.go``
(``resetChecksOnEviction``); the scenario cases in tests/scenarios/kueue/2xx-ac-* cover the
settled states.
"""

from __future__ import annotations

import pytest

from gpuaas.core.cluster import ApplyError, Cluster
from gpuaas.core.decisions import Admit, CheckState, Deactivate, Evict, Release, Requeue, Reserve
from gpuaas.core.objects import StopPolicy
from gpuaas.core.state import CheckStateValue, Phase
from gpuaas.testing.builders import ClusterQueueBuilder as CQ
from gpuaas.testing.builders import WorkloadBuilder as WL
from gpuaas.testing.builders import admission_check, flavor, local_queue


def _cluster(*, active: bool = True) -> Cluster:
    c = Cluster()
    for o in (
        flavor("default"),
        admission_check("prov"),
        CQ("cq").group(("default", {"cpu": "4"})).checks("prov").obj(),
        local_queue("lq", "cq"),
    ):
        c.apply(o, 0)
    if active:
        c.set_check_active("prov", True)
    c.schedule(0)
    return c


def _types(decisions: list[object]) -> list[str]:
    return [type(d).__name__ for d in decisions]


def test_reserve_first_admit_when_every_check_is_ready() -> None:
    c = _cluster()
    c.apply(WL("a").queue("lq").request(cpu="3").obj(), 1)
    first = c.schedule(1)
    assert _types(first) == ["Reserve"]
    wl = c.workloads["default/a"]
    assert wl.phase == Phase.ADMITTED and wl.awaiting_checks
    assert wl.conditions["QuotaReserved"].status == "True"
    assert "Admitted" not in wl.conditions  # Kueue writes none while checks are pending
    assert wl.admission_checks["prov"].state == CheckStateValue.PENDING

    c.set_check_state("default/a", "prov", "Ready", "capacity found", 2)
    then = c.schedule(2)
    assert [type(d) for d in then] == [CheckState, Admit]
    assert not wl.awaiting_checks
    assert wl.conditions["Admitted"].status == "True"
    assert [e.reason for e in c.take_events()][-2:] == ["AdmissionCheckUpdated", "Admitted"]


def test_retry_evicts_resets_checks_and_backs_off() -> None:
    c = _cluster()
    c.apply(WL("a").queue("lq").request(cpu="3").obj(), 1)
    c.schedule(1)
    c.set_check_state("default/a", "prov", "Retry", "try later", 2, requeue_after_seconds=10)
    decisions = c.schedule(2)
    evict = next(d for d in decisions if isinstance(d, Evict))
    assert evict.reason == "AdmissionCheck" and evict.preemptor is None
    assert evict.message == 'Evicted due to AdmissionCheck in Retry state: "prov" (try later)'
    assert [type(d) for d in decisions] == [CheckState, Evict, Release, Requeue]
    wl = c.workloads["default/a"]
    st = wl.admission_checks["prov"]
    assert (st.state, st.retry_count, st.requeue_after_seconds) == (CheckStateValue.PENDING, 1, 10)
    assert st.message == "Reset to Pending after eviction. Previously: Retry"
    assert wl.phase == Phase.PENDING and c.cluster_queue_usage("cq") == {}
    assert c.next_wakeup() == 12
    assert "back-off" in c.why_pending("default/a")
    assert c.schedule(11) == []  # still backing off
    assert _types(c.schedule(12)) == ["Reserve"]
    assert "default/a" not in c.preempted_keys  # not a preemption


def test_rejected_deactivates_and_reapplying_does_not_reactivate() -> None:
    c = _cluster()
    spec = WL("a").queue("lq").request(cpu="3").obj()
    c.apply(spec, 1)
    c.schedule(1)
    c.set_check_state("default/a", "prov", "Rejected", "never", 2)
    decisions = c.schedule(2)
    assert [type(d) for d in decisions] == [CheckState, Evict, Release, Deactivate]
    evict = decisions[1]
    assert isinstance(evict, Evict) and evict.reason == "DeactivatedDueToAdmissionCheck"
    assert c.workloads["default/a"].phase == Phase.INACTIVE
    c.apply(spec, 3)
    assert c.schedule(3) == [] and c.workloads["default/a"].phase == Phase.INACTIVE
    # spec.active set back to true, as a user does in Kueue: requeued, and its check runs anew
    again = WL("a").queue("lq").request(cpu="3").obj()
    again.active_given = True
    c.apply(again, 4)
    c.schedule(4)
    st = c.workloads["default/a"]
    assert st.phase == Phase.ADMITTED and st.awaiting_checks


def test_inactive_check_makes_the_cluster_queue_inactive() -> None:
    c = _cluster(active=False)
    c.apply(WL("a").queue("lq").request(cpu="1").obj(), 1)
    assert c.schedule(1) == []
    assert c.warnings() == [
        "ClusterQueue cq is inactive: references inactive AdmissionCheck(s): prov"
    ]
    c.set_check_active("prov", True)
    assert [type(d) for d in c.schedule(2)] == [Reserve]


MK = "kueue.x-k8s.io/multikueue"


@pytest.mark.parametrize(
    ("flavors", "checks", "stopped", "want"),
    [
        pytest.param(
            ["zeta", "default", "alpha"],
            [],
            False,
            ("FlavorNotFound", "references missing ResourceFlavor(s): zeta,alpha"),
            id="missing-flavors-in-spec-order",
        ),
        pytest.param(
            [],
            [("b", None), ("a", None), ("prov", "off")],
            True,
            (
                "Stopped",
                "is stopped, references missing AdmissionCheck(s): a,b, "
                "references inactive AdmissionCheck(s): prov",
            ),
            id="stopped-first-then-all",
        ),
        pytest.param(
            ["x"],
            [("m2", MK), ("m1", MK)],
            False,
            (
                "FlavorNotFound",
                "references missing ResourceFlavor(s): x, Cannot use "
                "multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: "
                "m1,m2",
            ),
            id="flavor-then-multikueue",
        ),
    ],
)
def test_an_inactive_cluster_queue_gives_every_reason_in_kueues_order(
    flavors: list[str], checks: list[tuple[str, str | None]], stopped: bool, want: tuple[str, str]
) -> None:
    """Kueue's clusterQueue.inactiveReason: the first reason, every message joined (stopped,
    missing flavors in the spec's order, missing, inactive and MultiKueue checks sorted)."""
    c = Cluster()
    c.apply(flavor("default"), 0)
    cq = CQ("cq").group(*((f, {"cpu": "1"}) for f in flavors or ["default"]))
    for name, controller in checks:
        if controller is not None:
            c.apply(admission_check(name, MK if controller == MK else "example.com/check"), 0)
            c.set_check_active(name, controller == MK)
        cq.checks(name)
    spec = cq.obj()
    if stopped:
        spec.stop_policy = StopPolicy.HOLD
    c.apply(spec, 0)
    c.schedule(0)
    state = c.cqs["cq"]
    assert (state.inactive_code, state.inactive_reason) == want


@pytest.mark.parametrize(
    ("key", "check", "state", "reason"),
    [
        ("default/b", "prov", "Ready", "holds no quota"),
        ("default/a", "nope", "Ready", "does not apply"),
        ("default/a", "prov", "Done", "must be one of Pending, Ready, Retry, Rejected"),
    ],
)
def test_bad_check_updates_are_refused_and_change_nothing(
    key: str, check: str, state: str, reason: str
) -> None:
    c = _cluster()
    c.apply(WL("a").queue("lq").request(cpu="3").obj(), 1)
    c.apply(WL("b").queue("lq").request(cpu="3").obj(), 1)
    c.schedule(1)
    version = c.version
    with pytest.raises(ApplyError, match=reason):
        c.set_check_state(key, check, state, "", 2)
    assert c.version == version and c.schedule(2) == []
