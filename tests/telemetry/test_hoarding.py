"""Hoarding policy driven by the simulated collector in virtual time (no sleeping)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.telemetry import (
    DecisionKind,
    GpuaasConfiguration,
    GpuHolder,
    HoardingAction,
    HoardingDecision,
    HoardingDetector,
    HoardingRule,
    Profile,
    Sampler,
    SimulatedCollector,
    attribute,
    render_hoarding,
)
from gpuaas.telemetry.hoarding import CONDITION_TYPE

TIERS = GpuaasConfiguration(
    tiers={"reserved": ("team-a-cq",), "best-effort": ("team-b-cq",)},
    hoarding=(
        HoardingRule(tier="reserved", action=HoardingAction.NOTIFY),
        HoardingRule(tier="best-effort", action=HoardingAction.EVICT),
    ),
)


class World:
    """A node with 4 simulated GPUs, a pinning, a sampler and a detector on a virtual clock."""

    def __init__(self, config: GpuaasConfiguration = TIERS) -> None:
        self.sim = SimulatedCollector(4, seed=3)
        self.pinning: dict[int | str, GpuHolder] = {}
        self.sampler = Sampler(config.telemetry.interval_seconds)
        self.detector = HoardingDetector(config)
        self.log: list[HoardingDecision] = []

    def hold(self, gpus: list[int], ns: str, name: str, cq: str, profile: Profile) -> None:
        for i in gpus:
            self.pinning[i] = GpuHolder(ns, name, f"{name}-{i}", cq)
            self.sim.assign(i, f"{ns}/{name}", profile)

    def drop(self, gpus: list[int]) -> None:
        for i in gpus:
            self.pinning.pop(i, None)
            self.sim.release(i)

    def run(self, start: float, end: float) -> list[HoardingDecision]:
        out: list[HoardingDecision] = []
        t = start
        while t <= end:
            samples = self.sampler.poll(self.sim, t)
            if samples is not None:
                out += self.detector.observe(attribute(samples, self.pinning), t)
            t += 5.0
        self.log += out
        return out


def test_best_effort_idle_workload_is_flagged_then_evicted_after_the_window() -> None:
    w = World()
    w.hold([0, 1], "team-b", "notebook", "team-b-cq", Profile.IDLE)
    assert w.run(0.0, 1795.0) == []  # 29m55s idle: not yet
    decisions = w.run(1800.0, 1800.0)
    assert [d.kind for d in decisions] == [DecisionKind.FLAG, DecisionKind.EVICT]
    flag, evict = decisions
    assert flag.workload_key == "team-b/notebook" and flag.gpus == 2
    assert flag.wasted_gpu_hours == 1.0  # 2 GPUs x 30 min
    assert evict.reason == "IdleGPU" and evict.action is HoardingAction.EVICT
    assert flag.condition()[:3] == (CONDITION_TYPE, "True", "IdleGPU")
    event = evict.event()
    assert (event.type, event.reason, event.object) == (
        "Warning",
        "IdleGPU",
        "Workload team-b/notebook",
    )
    (row,) = w.detector.offenders(1800.0)
    assert (row.state, row.gpus, row.wasted_gpu_hours, row.idle_seconds) == (
        "Evicting",
        2,
        1.0,
        1800.0,
    )
    assert "team-b" in render_hoarding([row]) and "1.00" in render_hoarding([row])
    # The engine evicts it: its pods stop, the runtime unpins the GPUs; the flag clears.
    assert w.run(1815.0, 1830.0) == []  # still pinned while it stops: no second eviction
    w.drop([0, 1])
    cleared = w.run(1845.0, 1845.0)
    assert [(d.kind, d.reason) for d in cleared] == [(DecisionKind.CLEAR, "GPUsReleased")]
    assert w.detector.offenders(1845.0) == []


def test_reserved_tier_is_only_notified_and_recovers() -> None:
    w = World()
    w.hold([2], "team-a", "serve", "team-a-cq", Profile.IDLE)
    decisions = w.run(0.0, 3600.0)
    assert [d.kind for d in decisions] == [DecisionKind.FLAG]
    assert w.detector.offenders(3600.0)[0].wasted_gpu_hours == 1.0
    w.hold([2], "team-a", "serve", "team-a-cq", Profile.BUSY)
    recovered = w.run(3615.0, 3615.0)
    assert [(d.kind, d.reason) for d in recovered] == [(DecisionKind.CLEAR, "GPUActive")]
    assert recovered[0].condition()[1] == "False"
    assert not w.detector.is_flagged("team-a/serve")


def test_one_busy_gpu_keeps_a_multi_gpu_workload_from_being_flagged() -> None:
    w = World()
    w.hold([0, 1, 2], "team-b", "train", "team-b-cq", Profile.IDLE)
    w.hold([3], "team-b", "train", "team-b-cq", Profile.BUSY)
    assert w.run(0.0, 7200.0) == []


def test_bursty_workload_is_never_flagged() -> None:
    w = World()
    w.hold([0], "team-b", "jupyter", "team-b-cq", Profile.BURSTY)
    assert w.run(0.0, 4 * 3600.0) == []


def test_unwatched_cluster_queue_is_ignored() -> None:
    w = World()
    w.hold([0], "ops", "idle", "ops-cq", Profile.IDLE)
    assert w.run(0.0, 7200.0) == []


def test_telemetry_gap_restarts_the_idle_stretch() -> None:
    w = World()
    w.hold([0], "team-b", "nb", "team-b-cq", Profile.IDLE)
    w.run(0.0, 1200.0)
    w.sampler.last = None
    assert w.run(1500.0, 2700.0) == []  # 300 s without data: the window restarts at 1500
    assert [d.kind for d in w.run(2705.0, 3300.0)] == [DecisionKind.FLAG, DecisionKind.EVICT]


@settings(max_examples=40, deadline=None)
@given(
    window=st.integers(min_value=60, max_value=3600),
    threshold=st.integers(min_value=1, max_value=100),
    profile=st.sampled_from(list(Profile)),
)
def test_never_flagged_before_a_full_window_of_idle_samples(
    window: int, threshold: int, profile: Profile
) -> None:
    config = GpuaasConfiguration(
        hoarding=(HoardingRule(utilization_threshold_percent=threshold, window_seconds=window),)
    )
    w = World(config)
    w.hold([0], "ns", "w", "cq", profile)
    history: list[float] = []
    t = 0.0
    while t <= window * 2:
        samples = w.sampler.poll(w.sim, t)
        if samples is not None:
            idle = samples[0].utilization_percent < threshold
            history = [*history, t] if idle else []
            for d in w.detector.observe(attribute(samples, w.pinning), t):
                if d.kind is DecisionKind.FLAG:
                    assert history and t - history[0] >= window
        t += 15.0
