"""Simulated collector, sampling interval and GPU attribution."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.telemetry import (
    PROFILE_ANNOTATION,
    GpuHolder,
    Profile,
    Sampler,
    SimulatedCollector,
    TelemetryInputError,
    attribute,
    profile_from_annotations,
)
from gpuaas.telemetry.samples import by_workload


def test_simulated_is_deterministic_across_instances() -> None:
    a, b = SimulatedCollector(4, seed=7), SimulatedCollector(4, seed=7)
    for c in (a, b):
        c.assign(0, "ns/w", Profile.BUSY)
        c.assign(1, "ns/w", "bursty")
    assert a.sample(1234.0) == b.sample(1234.0)
    assert a.sample(1234.0) != SimulatedCollector(4, seed=8).sample(1234.0)


@pytest.mark.parametrize(
    ("profile", "low", "high"),
    [(Profile.BUSY, 85.0, 100.0), (Profile.IDLE, 0.0, 2.0)],
)
def test_profiles_stay_in_their_band(profile: Profile, low: float, high: float) -> None:
    sim = SimulatedCollector(1)
    sim.assign(0, "ns/w", profile)
    for t in range(0, 7200, 15):
        (s,) = sim.sample(float(t))
        assert low <= s.utilization_percent <= high
        assert 0 < s.memory_used_bytes < s.memory_total_bytes
        assert s.sm_active is not None and 0.0 <= s.sm_active <= 1.0


def test_bursty_is_busy_a_quarter_of_the_time_and_never_idle_for_30_minutes() -> None:
    sim = SimulatedCollector(1)
    sim.assign(0, "ns/w", Profile.BURSTY)
    utils = [sim.sample(float(t))[0].utilization_percent for t in range(0, 3600, 15)]
    busy = sum(u > 50 for u in utils)
    assert busy == len(utils) // 4
    longest_idle = run = 0
    for u in utils:
        run = run + 1 if u < 5 else 0
        longest_idle = max(longest_idle, run)
    assert longest_idle * 15 < 1800


def test_unassigned_gpu_reads_empty_and_release_works() -> None:
    sim = SimulatedCollector(2)
    sim.assign(1, "ns/w", Profile.BUSY)
    free, held = sim.sample(0.0)
    assert free.utilization_percent == 0.0 and free.memory_used_bytes == 0
    assert held.utilization_percent > 50
    sim.release(1)
    assert sim.sample(0.0)[1].utilization_percent == 0.0


def test_set_assignments_replaces_the_mapping() -> None:
    sim = SimulatedCollector(3)
    sim.assign(0, "ns/a", Profile.BUSY)
    sim.set_assignments({2: ("ns/b", "idle")})
    assert sim.assignments() == {2: ("ns/b", Profile.IDLE)}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.assign(9, "ns/w", Profile.BUSY), "gpu: no GPU with index 9"),
        (
            lambda s: s.assign(0, "ns/w", "sleepy"),
            "Workload ns/w: profile: unknown profile 'sleepy'",
        ),
    ],
)
def test_bad_assignment_names_field(call: object, message: str) -> None:
    sim = SimulatedCollector(1)
    with pytest.raises(TelemetryInputError, match=message):
        call(sim)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, Profile.BUSY),
        ({PROFILE_ANNOTATION: "idle"}, Profile.IDLE),
        ({PROFILE_ANNOTATION: " Bursty "}, Profile.BURSTY),
    ],
)
def test_profile_annotation(annotations: dict[str, str], expected: Profile) -> None:
    assert profile_from_annotations("ns/w", annotations) is expected


def test_profile_annotation_error_names_object_and_field() -> None:
    with pytest.raises(TelemetryInputError) as err:
        profile_from_annotations("team-a/train", {PROFILE_ANNOTATION: "warm"})
    assert str(err.value).startswith(
        f"Workload team-a/train: metadata.annotations[{PROFILE_ANNOTATION}]: unknown profile 'warm'"
    )


def test_sampler_default_interval_and_due() -> None:
    sampler = Sampler()
    assert sampler.interval_seconds == 15.0
    sim = SimulatedCollector(1)
    assert sampler.next_due() is None
    assert sampler.poll(sim, 100.0) is not None
    assert sampler.poll(sim, 110.0) is None
    assert sampler.next_due() == 115.0
    assert sampler.poll(sim, 115.0) is not None


def test_sampler_rejects_non_positive_interval() -> None:
    with pytest.raises(TelemetryInputError, match="intervalSeconds: must be greater than 0"):
        Sampler(0)


@given(st.floats(min_value=1, max_value=600), st.lists(st.floats(0, 10_000), max_size=50))
def test_sampler_never_samples_twice_within_an_interval(
    interval: float, times: list[float]
) -> None:
    sampler = Sampler(interval)
    taken: list[float] = []
    for t in sorted(times):
        if sampler.due(t):
            sampler.last = t
            taken.append(t)
    assert all(b - a >= interval for a, b in itertools.pairwise(taken))


def test_attribute_prefers_uuid_over_index() -> None:
    sim = SimulatedCollector(3)
    samples = sim.sample(0.0)
    by_uuid = GpuHolder("ns", "a", "a-0", "cq")
    by_index = GpuHolder("ns", "b", "b-0", "cq")
    pinning = {samples[0].uuid: by_uuid, 0: by_index, 1: by_index}
    out = attribute(samples, pinning)
    assert [a.holder for a in out] == [by_uuid, by_index, None]
    grouped = by_workload(out)
    assert sorted(grouped) == ["ns/a", "ns/b"]
    assert [a.sample.index for a in grouped["ns/b"]] == [1]
