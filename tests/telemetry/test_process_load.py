"""GPU load from the holding pod's processes (``telemetry.process_load``) and the simulated
collector's ``processes`` profile: CPU time over the interval, one busy core = one GPU at 100 %,
spread evenly over a pod's GPUs. Readings are given, so every case is exact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from gpuaas.telemetry import Profile, SimulatedCollector
from gpuaas.telemetry.collectors import PodKey
from gpuaas.telemetry.process_load import CpuTimes, cores_busy, utilization_percent


@dataclass(frozen=True)
class Cpu:
    cpu_seconds: float
    read_at: float
    started_at: float = 0.0
    rss_bytes: int = 0


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        pytest.param(Cpu(1.0, 100), Cpu(1.0, 115), 0.0, id="sleep-no-cpu-in-interval"),
        pytest.param(Cpu(1.0, 100), Cpu(16.0, 115), 1.0, id="busy-loop-one-core"),
        pytest.param(Cpu(1.0, 100), Cpu(31.0, 115), 2.0, id="two-threads-two-cores"),
        pytest.param(Cpu(1.0, 100), Cpu(4.0, 115), 0.2, id="a-fifth-of-a-core"),
        pytest.param(None, Cpu(5.0, 10), 0.5, id="first-reading-averages-since-start"),
        pytest.param(Cpu(50.0, 100, 0), Cpu(2.0, 110, 105), 0.4, id="restarted-pod-starts-afresh"),
        pytest.param(Cpu(9.0, 100), Cpu(5.0, 115), 0.0, id="cpu-went-down-reads-zero"),
        pytest.param(Cpu(1.0, 100), Cpu(2.0, 100), 0.0, id="no-time-passed"),
    ],
)
def test_cores_busy(previous: Cpu | None, current: Cpu, expected: float) -> None:
    assert cores_busy(previous, current) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("cores", "gpus", "expected"),
    [
        pytest.param(0.0, 1, 0.0, id="idle"),
        pytest.param(1.0, 1, 100.0, id="one-core-one-gpu-full"),
        pytest.param(3.0, 1, 100.0, id="capped-at-100"),
        pytest.param(1.0, 4, 25.0, id="one-core-spread-over-four"),
        pytest.param(2.0, 4, 50.0, id="two-cores-over-four"),
        pytest.param(0.02, 1, 2.0, id="background-noise"),
        pytest.param(1.0, 0, 0.0, id="no-gpus"),
    ],
)
def test_utilization_percent(cores: float, gpus: int, expected: float) -> None:
    assert utilization_percent(cores, gpus) == pytest.approx(expected)


class Readings:
    """A cpu source the test drives: what each pod's processes used so far."""

    def __init__(self) -> None:
        self.now: dict[PodKey, Cpu] = {}

    def __call__(self) -> Mapping[PodKey, CpuTimes]:
        return dict(self.now)


def test_collector_reads_each_pods_gpus_from_its_processes() -> None:
    src = Readings()
    col = SimulatedCollector(4, cpu_source=src)
    col.set_assignments(
        {
            0: ("ns/idle", Profile.PROCESSES, "idle-0"),
            1: ("ns/busy", Profile.PROCESSES, "busy-0"),
            2: ("ns/busy", Profile.PROCESSES, "busy-0"),
            3: ("ns/fixed", Profile.BUSY),
        }
    )
    src.now = {
        ("ns/idle", "idle-0"): Cpu(0.05, 100, 90, rss_bytes=4 * 2**20),
        ("ns/busy", "busy-0"): Cpu(10.0, 100, 90, rss_bytes=2 * 2**30),
    }
    col.sample(100)  # first reading: averages since start
    src.now = {
        ("ns/idle", "idle-0"): Cpu(0.05, 115, 90, rss_bytes=4 * 2**20),
        ("ns/busy", "busy-0"): Cpu(25.0, 115, 90, rss_bytes=2 * 2**30),  # one core for 15 s
    }
    by_gpu = {s.index: s for s in col.sample(115)}
    assert by_gpu[0].utilization_percent == 0.0
    assert by_gpu[0].memory_used_bytes == 4 * 2**20
    assert by_gpu[1].utilization_percent == by_gpu[2].utilization_percent == 50.0
    assert by_gpu[1].memory_used_bytes == 2**30  # its RSS split over its two GPUs
    assert by_gpu[1].power_watts is not None and by_gpu[0].power_watts is not None
    assert by_gpu[1].power_watts > by_gpu[0].power_watts
    assert 85.0 <= by_gpu[3].utilization_percent <= 100.0  # the fixed profile is untouched


def test_a_held_gpu_without_a_reading_gives_no_sample_and_a_return_starts_afresh() -> None:
    src = Readings()
    col = SimulatedCollector(2, cpu_source=src)
    col.set_assignments({0: ("ns/a", Profile.PROCESSES, "a-0")})
    assert [s.index for s in col.sample(0)] == [1]  # not started yet: GPU 0 says nothing
    src.now = {("ns/a", "a-0"): Cpu(100.0, 200, 0)}
    col.sample(200)
    src.now = {}
    assert [s.index for s in col.sample(215)] == [1]
    # back with the same start time but an old previous reading forgotten: average since start
    src.now = {("ns/a", "a-0"): Cpu(100.0, 400, 0)}
    (gpu0, _) = col.sample(400)
    assert gpu0.utilization_percent == pytest.approx(25.0)


def test_processes_without_a_cpu_source_give_no_sample() -> None:
    col = SimulatedCollector(1)
    col.set_assignments({0: ("ns/a", "processes", "a-0")})
    assert col.sample(0) == []
