"""Kueue's waitForPodsReady in the core: the PodsReady condition, the timeout, back-off, the limit.

Follows Kueue's workload controller (``reconcileNotReadyTimeout``, ``admittedNotReadyWorkload``,
``triggerDeactivation``), ``pkg/workload.UpdateRequeueState`` (``base * 2^(n-1)`` capped, no
jitter here), the job reconciler's ``generatePodsReadyCondition`` and the scheduler's
``waitForPodsReadyIfNeeded`` (blockAdmission); defaults from ``apis/config/v1beta1/defaults.go``.
Time is passed in: no clock is read.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core.cluster import Cluster
from gpuaas.core.config import (
    RequeuingStrategy,
    SchedulerConfig,
    WaitForPodsReady,
    parse_configuration,
    parse_duration,
)
from gpuaas.core.decisions import Deactivate, Evict, Requeue, Reserve
from gpuaas.core.errors import ApplyError
from gpuaas.core.podsready import next_condition
from gpuaas.core.state import Phase
from gpuaas.testing.builders import ClusterQueueBuilder as CQ
from gpuaas.testing.builders import WorkloadBuilder as WL
from gpuaas.testing.builders import flavor, local_queue

KEY = "default/a"


def _cluster(cfg: WaitForPodsReady | None, cpu: str = "4") -> Cluster:
    c = Cluster(SchedulerConfig(wait_for_pods_ready=cfg), instant_evictions=False)
    for o in (flavor("default"), CQ("cq").group(("default", {"cpu": cpu})).obj()):
        c.apply(o, 0)
    c.apply(local_queue("lq", "cq"), 0)
    return c


def _admit(c: Cluster, name: str = "a", at: float = 0, cpu: str = "3") -> None:
    c.apply(WL(name).queue("lq").request(cpu=cpu).obj(), at)
    c.schedule(at)


def _cond(c: Cluster, type_: str, key: str = KEY) -> tuple[str, str] | None:
    cond = c.workloads[key].conditions.get(type_)
    return None if cond is None else (cond.status, cond.reason)


def _wfpr(timeout: float = 10, **strategy: Any) -> WaitForPodsReady:
    return WaitForPodsReady(
        timeout_seconds=timeout,
        recovery_timeout_seconds=timeout,
        block_admission=False,
        requeuing_strategy=RequeuingStrategy(**strategy),
    )


@pytest.mark.parametrize(
    ("current", "admitted", "ready", "expected"),
    [
        pytest.param(None, False, False, ("False", "WaitForStart"), id="not-admitted"),
        pytest.param(("True", "Started"), False, True, ("False", "WaitForStart"), id="evicted"),
        pytest.param(None, True, False, ("False", "WaitForStart"), id="admitted-waiting"),
        pytest.param(None, True, True, ("True", "Started"), id="started"),
        pytest.param(("True", "Started"), True, False, ("False", "WaitForRecovery"), id="failed"),
        pytest.param(
            ("False", "WaitForRecovery"), True, False, ("False", "WaitForRecovery"), id="still"
        ),
        pytest.param(("False", "WaitForRecovery"), True, True, ("True", "Recovered"), id="back"),
        pytest.param(("True", "Recovered"), True, True, ("True", "Recovered"), id="recovered"),
        pytest.param(("False", "WaitForStart"), True, True, ("True", "Started"), id="first"),
    ],
)
def test_pods_ready_condition_follows_kueue(
    current: tuple[str, str] | None, admitted: bool, ready: bool, expected: tuple[str, str]
) -> None:
    assert next_condition(current, admitted, ready)[:2] == expected


@pytest.mark.parametrize(
    ("base", "most", "counts", "waits"),
    [
        pytest.param(60, 3600, [1, 2, 3, 7, 8], [60, 120, 240, 3600, 3600], id="defaults"),
        pytest.param(1, 5, [1, 2, 3, 4], [1, 2, 4, 5], id="capped"),
        pytest.param(0, 10, [1, 5], [0, 0], id="zero-base"),
    ],
)
def test_backoff_doubles_from_base_up_to_max(
    base: int, most: int, counts: list[int], waits: list[float]
) -> None:
    s = RequeuingStrategy(backoff_base_seconds=base, backoff_max_seconds=most)
    assert [s.backoff_seconds(n) for n in counts] == waits


def test_disabled_writes_no_condition_and_never_times_out() -> None:
    c = _cluster(None)
    _admit(c)
    assert c.set_pods_ready(KEY, False, 1) is False
    assert _cond(c, "PodsReady") is None
    c.schedule(10_000)
    assert c.workloads[KEY].phase == Phase.ADMITTED
    assert c.next_wakeup() is None


def test_timeout_evicts_then_requeues_with_backoff() -> None:
    c = _cluster(_wfpr(10, backoff_base_seconds=5))
    _admit(c)
    assert _cond(c, "PodsReady") == ("False", "WaitForStart")
    assert c.next_wakeup() == 10
    assert not any(isinstance(d, Evict) for d in c.schedule(9.5))
    decisions = c.schedule(10)
    (evict,) = [d for d in decisions if isinstance(d, Evict)]
    assert (evict.reason, evict.message) == (
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout default/a",
    )
    wl = c.workloads[KEY]
    assert wl.phase == Phase.EVICTING  # its pods must stop first
    assert (wl.requeue_state_count, wl.requeue_at) == (1, 15)
    c.confirm_stopped(KEY, 11)
    after = c.schedule(11)
    assert [type(d) for d in after if isinstance(d, (Requeue, Reserve))] == [Requeue]
    assert _cond(c, "Requeued") == ("False", "PodsReadyTimeout")
    assert _cond(c, "Evicted") == ("True", "PodsReadyTimeout")
    assert c.next_wakeup() == 15
    assert "back-off" in c.why_pending(KEY)
    assert wl.queued_at == 10  # requeuingStrategy.timestamp Eviction: ordered by the eviction
    readmit = c.schedule(15)
    assert any(isinstance(d, Reserve) for d in readmit)
    assert _cond(c, "Requeued") == ("True", "BackoffFinished")
    assert wl.queued_at == wl.created_at  # Evicted is False again: ordered by its creation
    # the second timeout waits base * 2
    c.schedule(25)
    assert (wl.requeue_state_count, wl.requeue_at) == (2, 35)


def test_ready_pods_stop_the_timeout_and_a_failure_starts_recovery() -> None:
    c = _cluster(_wfpr(10))
    _admit(c)
    assert c.set_pods_ready(KEY, True, 3)
    assert _cond(c, "PodsReady") == ("True", "Started")
    c.schedule(50)
    assert c.workloads[KEY].phase == Phase.ADMITTED
    assert c.set_pods_ready(KEY, False, 60)  # a pod failed: recoveryTimeout from now
    assert _cond(c, "PodsReady") == ("False", "WaitForRecovery")
    assert c.set_pods_ready(KEY, False, 61) is False  # nothing new
    c.schedule(69)
    assert c.workloads[KEY].phase == Phase.ADMITTED
    c.set_pods_ready(KEY, True, 69.5)
    assert _cond(c, "PodsReady") == ("True", "Recovered")
    c.schedule(100)
    assert c.workloads[KEY].phase == Phase.ADMITTED
    c.set_pods_ready(KEY, False, 100)
    c.schedule(110)
    assert c.workloads[KEY].phase == Phase.EVICTING
    assert _cond(c, "PodsReady") == ("False", "WaitForStart")


@pytest.mark.parametrize(
    ("limit", "timeouts_before_deactivation"),
    [pytest.param(0, 0, id="limit-0"), pytest.param(2, 2, id="limit-2")],
)
def test_deactivated_once_count_plus_one_exceeds_the_limit(
    limit: int, timeouts_before_deactivation: int
) -> None:
    c = _cluster(_wfpr(10, backoff_limit_count=limit, backoff_base_seconds=1))
    _admit(c)
    now = 0.0
    wl = c.workloads[KEY]
    for n in range(1, timeouts_before_deactivation + 1):
        now = wl.admitted_at + 10  # type: ignore[operator]
        c.schedule(now)
        assert wl.requeue_state_count == n and wl.phase == Phase.EVICTING
        c.confirm_stopped(KEY, now)
        c.schedule(now)
        c.schedule(wl.requeue_at)  # type: ignore[arg-type]
        assert wl.phase == Phase.ADMITTED
    now = wl.admitted_at + 10  # type: ignore[operator]
    decisions = c.schedule(now)
    (evict,) = [d for d in decisions if isinstance(d, Evict)]
    assert evict.reason == "DeactivatedDueToRequeuingLimitExceeded"
    assert "exceeding the maximum number of re-queuing retries" in evict.message
    c.confirm_stopped(KEY, now)
    (deact,) = [d for d in c.schedule(now) if isinstance(d, Deactivate)]
    assert deact.after_eviction and wl.phase == Phase.INACTIVE
    assert wl.requeue_state_count == 0  # Kueue clears requeueState


def test_creation_timestamp_keeps_queue_order() -> None:
    c = _cluster(_wfpr(10, timestamp="Creation", backoff_base_seconds=1))
    _admit(c, at=2)
    c.schedule(12)
    assert c.workloads[KEY].queued_at == 2


def test_block_admission_waits_until_admitted_workloads_are_ready() -> None:
    cfg = WaitForPodsReady(timeout_seconds=100, recovery_timeout_seconds=100, block_admission=True)
    c = _cluster(cfg, cpu="8")
    c.apply(WL("a").queue("lq").request(cpu="3").obj(), 0)
    c.apply(WL("b").queue("lq").request(cpu="3").obj(), 0)
    reserved = [d.workload for d in c.schedule(0) if isinstance(d, Reserve)]
    assert reserved == ["default/a"]  # b fits, but a is not PodsReady
    b = c.workloads["default/b"]
    assert _cond(c, "QuotaReserved", "default/b") == ("False", "WaitingForPodsReady")
    assert b.conditions["QuotaReserved"].message == (
        "waiting for all admitted workloads to be in PodsReady condition"
    )
    assert not [d for d in c.schedule(1) if isinstance(d, Reserve)]
    assert b.phase == Phase.PENDING
    c.set_pods_ready("default/a", True, 2)
    assert [d.workload for d in c.schedule(2) if isinstance(d, Reserve)] == ["default/b"]


def test_without_block_admission_both_are_admitted() -> None:
    c = _cluster(_wfpr(100), cpu="8")
    c.apply(WL("a").queue("lq").request(cpu="3").obj(), 0)
    c.apply(WL("b").queue("lq").request(cpu="3").obj(), 0)
    assert len([d for d in c.schedule(0) if isinstance(d, Reserve)]) == 2


# --- the configuration file ---------------------------------------------------------------------
def _doc(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", **fields}


def test_configuration_defaults_are_kueues() -> None:
    cfg = parse_configuration(_doc(waitForPodsReady={"enable": True}))
    w = cfg.wait_for_pods_ready
    assert w is not None
    assert (w.timeout_seconds, w.recovery_timeout_seconds, w.block_admission) == (300, 300, True)
    s = w.requeuing_strategy
    assert (s.timestamp, s.backoff_limit_count, s.backoff_base_seconds, s.backoff_max_seconds) == (
        "Eviction",
        None,
        60,
        3600,
    )
    assert parse_configuration(_doc(waitForPodsReady={"enable": False})).wait_for_pods_ready is None
    assert parse_configuration(_doc()) == SchedulerConfig()


def test_configuration_reads_every_field() -> None:
    cfg = parse_configuration(
        _doc(
            fairSharing={"enable": True},
            waitForPodsReady={
                "enable": True,
                "timeout": "1m30s",
                "recoveryTimeout": "2m",
                "blockAdmission": False,
                "requeuingStrategy": {
                    "timestamp": "Creation",
                    "backoffLimitCount": 3,
                    "backoffBaseSeconds": 5,
                    "backoffMaxSeconds": 40,
                },
            },
        )
    )
    assert cfg.fair_sharing
    assert cfg.wait_for_pods_ready == WaitForPodsReady(
        90, 120, False, RequeuingStrategy("Creation", 3, 5, 40)
    )


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param(_doc(manageJobsWithoutQueueName=True), "manageJobsWithoutQueueName", id="top"),
        pytest.param({**_doc(), "kind": "Other"}, "kind", id="kind"),
        pytest.param({**_doc(), "apiVersion": "v1"}, "apiVersion", id="api"),
        pytest.param(
            _doc(waitForPodsReady={"enable": True, "timeout": "ten"}),
            "waitForPodsReady.timeout",
            id="duration",
        ),
        pytest.param(
            _doc(waitForPodsReady={"enable": "yes"}), "waitForPodsReady.enable", id="enable"
        ),
        pytest.param(
            _doc(waitForPodsReady={"enable": True, "requeuingStrategy": {"timestamp": "Now"}}),
            "waitForPodsReady.requeuingStrategy.timestamp",
            id="timestamp",
        ),
        pytest.param(
            _doc(waitForPodsReady={"requeuingStrategy": {"backoffLimitCount": -1}, "enable": 1}),
            "waitForPodsReady.enable",
            id="enable-int",
        ),
        pytest.param(
            _doc(waitForPodsReady={"enable": True, "requeuingStrategy": {"backoffLimitCount": -1}}),
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            id="negative",
        ),
        pytest.param(
            _doc(waitForPodsReady={"enable": True, "timout": "1m"}),
            "waitForPodsReady.timout",
            id="typo",
        ),
    ],
)
def test_configuration_refuses_bad_input_naming_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ApplyError) as err:
        parse_configuration(doc)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("1h30m", 5400), ("90s", 90), ("1.5s", 1.5), ("250ms", 0.25), ("0s", 0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "x") == pytest.approx(seconds)
