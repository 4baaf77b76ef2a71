"""Where GPU samples come from: the collector port, the sampling interval and the simulator.

This module owns the ``GpuCollector`` protocol (one method, ``sample(now)``), the ``Sampler``
that says when a sample is due, and ``SimulatedCollector``, a deterministic stand-in for
machines without GPUs and for tests. It must not read the wall clock, sleep, or use the global
``random``: time is an argument and every number comes from a seeded ``random.Random``, so a
scenario replays the same on any machine. The NVML collector lives in ``telemetry.nvml``, the
only module that touches the driver.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from gpuaas.telemetry.process_load import CpuTimes, ProcessReading, cores_busy, reading_for_gpu
from gpuaas.telemetry.samples import GpuSample

DEFAULT_INTERVAL_SECONDS = 15.0
PROFILE_ANNOTATION = "gpuaas.dev/simulated-gpu-profile"
SIMULATED_MODEL = "NVIDIA-Simulated-GPU"
SIMULATED_MEMORY = 80 * 2**30
SIMULATED_MAX_POWER_WATTS = 700.0
SIMULATED_IDLE_POWER_WATTS = 70.0


class TelemetryInputError(ValueError):
    """Bad telemetry input; the message names the object, the field and the reason."""


class GpuCollector(Protocol):
    """A source of GPU samples. Implementations never raise: a broken device yields no sample."""

    def sample(self, now: float) -> list[GpuSample]: ...


class Sampler:
    """Says whether a sample is due, so any loop (asyncio, thread, virtual clock) can drive it."""

    def __init__(self, interval_seconds: float = DEFAULT_INTERVAL_SECONDS) -> None:
        if not interval_seconds > 0:
            raise TelemetryInputError(
                f"Sampler: intervalSeconds: must be greater than 0, got {interval_seconds}"
            )
        self.interval_seconds = float(interval_seconds)
        self.last: float | None = None

    def due(self, now: float) -> bool:
        return self.last is None or now - self.last >= self.interval_seconds

    def next_due(self) -> float | None:
        """When the next sample is due; ``None`` means now (nothing sampled yet)."""
        return None if self.last is None else self.last + self.interval_seconds

    def poll(self, collector: GpuCollector, now: float) -> list[GpuSample] | None:
        """Sample when due and remember it; ``None`` when it is not time yet."""
        if not self.due(now):
            return None
        self.last = now
        return collector.sample(now)


class Profile(StrEnum):
    BUSY = "busy"
    IDLE = "idle"
    BURSTY = "bursty"
    PROCESSES = "processes"  # read from the holding pod's CPU time (``telemetry.process_load``)


def parse_profile(value: str, where: str) -> Profile:
    try:
        return Profile(value.strip().lower())
    except ValueError:
        allowed = ", ".join(p.value for p in Profile)
        raise TelemetryInputError(
            f"{where}: unknown profile {value!r} (allowed: {allowed})"
        ) from None


def profile_from_annotations(
    workload_key: str, annotations: Mapping[str, str], default: Profile = Profile.BUSY
) -> Profile:
    """The profile a workload asked for with ``gpuaas.dev/simulated-gpu-profile``."""
    value = annotations.get(PROFILE_ANNOTATION)
    if value is None:
        return default
    return parse_profile(
        value, f"Workload {workload_key}: metadata.annotations[{PROFILE_ANNOTATION}]"
    )


@dataclass(slots=True, frozen=True)
class SimulatedGpu:
    index: int
    uuid: str
    model: str = SIMULATED_MODEL
    memory_total_bytes: int = SIMULATED_MEMORY


def simulated_uuid(index: int) -> str:
    """Same shape as the inventory's fake GPUs, so pinning by UUID lines up with them."""
    return f"GPU-fake-{index:04d}-0000-0000-000000000000"


@dataclass(slots=True, frozen=True)
class _Reading:
    util: float
    sm_active: float
    sm_occupancy: float
    memory_fraction: float
    copy_util: float


BURST_PERIOD_SECONDS = 600.0
BURST_ACTIVE_FRACTION = 0.25


PodKey = tuple[str, str]
"""(workload key, pod name): how a runtime names the pod holding a GPU."""

Assignment = tuple[str, Profile | str] | tuple[str, Profile | str, str]
"""(workload key, profile) or (workload key, profile, pod): the ``processes`` profile needs the
pod, whose CPU time it reads."""


class SimulatedCollector:
    """Deterministic GPUs whose load follows the workload holding them.

    A GPU nobody holds reads as an empty card (0 %, no memory used). ``bursty`` is busy for the
    first quarter of every 10-minute period (phase shifted per GPU) and idle otherwise, so it
    never stays idle for a 30-minute hoarding window. ``processes`` reads the holding pod's CPU
    time through ``cpu_source`` (``pod -> CpuTimes``, the runtime's reading) and turns it into
    utilization (``telemetry.process_load``); a held GPU whose pod has no reading (not started
    yet, or its runtime cannot read it) gives no sample, as a GPU that does not answer: nothing
    is made up, and the hoarding detector never counts missing data as idle.
    """

    def __init__(
        self,
        gpus: int | Sequence[SimulatedGpu],
        *,
        seed: int = 0,
        hostname: str = "simulated",
        cpu_source: Callable[[], Mapping[PodKey, CpuTimes]] | None = None,
    ) -> None:
        if isinstance(gpus, int):
            gpus = [SimulatedGpu(i, simulated_uuid(i)) for i in range(gpus)]
        self.gpus: list[SimulatedGpu] = list(gpus)
        self.seed = seed
        self.hostname = hostname
        self.cpu_source = cpu_source
        self._assigned: dict[int, tuple[str, Profile]] = {}
        self._pods: dict[int, str] = {}  # gpu index -> pod, for the processes profile
        self._cpu_seen: dict[PodKey, CpuTimes] = {}  # each pod's previous reading

    # -- the mapping gpu -> (workload, profile[, pod]) that the caller keeps up to date -------
    def assign(
        self, gpu_index: int, workload_key: str, profile: Profile | str, pod: str | None = None
    ) -> None:
        if gpu_index not in {g.index for g in self.gpus}:
            raise TelemetryInputError(
                f"SimulatedCollector {self.hostname}: gpu: no GPU with index {gpu_index}"
            )
        if isinstance(profile, str) and not isinstance(profile, Profile):
            profile = parse_profile(profile, f"Workload {workload_key}: profile")
        self._assigned[gpu_index] = (workload_key, profile)
        if pod is not None:
            self._pods[gpu_index] = pod
        else:
            self._pods.pop(gpu_index, None)

    def release(self, gpu_index: int) -> None:
        self._assigned.pop(gpu_index, None)
        self._pods.pop(gpu_index, None)

    def set_assignments(self, mapping: Mapping[int, Assignment]) -> None:
        """Replace every assignment at once (the runtime's current pinning)."""
        self._assigned.clear()
        self._pods.clear()
        for index, assignment in mapping.items():
            pod = assignment[2] if len(assignment) == 3 else None
            self.assign(index, assignment[0], assignment[1], pod)

    def assignments(self) -> dict[int, tuple[str, Profile]]:
        return dict(self._assigned)

    # -- sampling ------------------------------------------------------------------------------
    def _process_readings(self) -> dict[int, ProcessReading]:
        """Per GPU held under the ``processes`` profile: its reading from the pod's CPU time."""
        pods: dict[PodKey, list[int]] = {}
        for index, (key, profile) in self._assigned.items():
            if profile is Profile.PROCESSES and index in self._pods:
                pods.setdefault((key, self._pods[index]), []).append(index)
        if not pods or self.cpu_source is None:
            self._cpu_seen.clear()
            return {}
        current = self.cpu_source()
        memory = {g.index: g.memory_total_bytes for g in self.gpus}
        out: dict[int, ProcessReading] = {}
        for pod, indexes in pods.items():
            now_cpu = current.get(pod)
            if now_cpu is None:
                continue
            cores = cores_busy(self._cpu_seen.get(pod), now_cpu)
            for index in indexes:
                out[index] = reading_for_gpu(cores, now_cpu.rss_bytes, len(indexes), memory[index])
        # Only pods read now are remembered: a pod that comes back later starts afresh.
        self._cpu_seen = {pod: current[pod] for pod in pods if pod in current}
        return out

    def sample(self, now: float) -> list[GpuSample]:
        out: list[GpuSample] = []
        from_processes = self._process_readings()
        for gpu in self.gpus:
            held = self._assigned.get(gpu.index)
            if held is not None and held[1] is Profile.PROCESSES:
                measured = from_processes.get(gpu.index)
                if measured is None:
                    continue  # no reading of its pod: no sample rather than a made-up one
                out.append(self._from_processes(gpu, measured, now))
                continue
            reading = self._reading(gpu, held[1] if held else None, now)
            power = _power(reading.util)
            out.append(
                GpuSample(
                    time=now,
                    index=gpu.index,
                    uuid=gpu.uuid,
                    model=gpu.model,
                    utilization_percent=round(reading.util, 3),
                    memory_used_bytes=int(gpu.memory_total_bytes * reading.memory_fraction),
                    memory_total_bytes=gpu.memory_total_bytes,
                    power_watts=round(power, 3),
                    sm_active=round(reading.sm_active, 4),
                    sm_occupancy=round(reading.sm_occupancy, 4),
                    memory_copy_util_percent=round(reading.copy_util, 3),
                    hostname=self.hostname,
                )
            )
        return out

    def _from_processes(self, gpu: SimulatedGpu, m: ProcessReading, now: float) -> GpuSample:
        return GpuSample(
            time=now,
            index=gpu.index,
            uuid=gpu.uuid,
            model=gpu.model,
            utilization_percent=round(m.utilization_percent, 3),
            memory_used_bytes=m.memory_used_bytes,
            memory_total_bytes=gpu.memory_total_bytes,
            power_watts=round(_power(m.utilization_percent), 3),
            sm_active=round(m.sm_active, 4),
            sm_occupancy=round(m.sm_occupancy, 4),
            memory_copy_util_percent=round(m.memory_copy_util_percent, 3),
            hostname=self.hostname,
        )

    def _reading(self, gpu: SimulatedGpu, profile: Profile | None, now: float) -> _Reading:
        # A string seed is hashed with SHA-512 by random.Random: stable across processes.
        rng = random.Random(f"{self.seed}/{gpu.uuid}/{int(now)}")
        if profile is None:
            return _Reading(0.0, 0.0, 0.0, 0.0, 0.0)
        if profile is Profile.BURSTY:
            phase = (now + gpu.index * 97.0) % BURST_PERIOD_SECONDS
            busy = phase < BURST_PERIOD_SECONDS * BURST_ACTIVE_FRACTION
            profile = Profile.BUSY if busy else Profile.IDLE
        if profile is Profile.BUSY:
            util = rng.uniform(85.0, 100.0)
            return _Reading(
                util=util,
                sm_active=rng.uniform(0.70, 0.95),
                sm_occupancy=rng.uniform(0.35, 0.65),
                memory_fraction=rng.uniform(0.70, 0.90),
                copy_util=rng.uniform(20.0, 60.0),
            )
        # idle: a model still loaded in memory, no kernels running -- the hoarding picture.
        return _Reading(
            util=rng.uniform(0.0, 2.0),
            sm_active=rng.uniform(0.0, 0.01),
            sm_occupancy=rng.uniform(0.0, 0.005),
            memory_fraction=rng.uniform(0.20, 0.40),
            copy_util=rng.uniform(0.0, 1.0),
        )


def _power(util_percent: float) -> float:
    """Simulated board power: idle draw plus the rest of the range in proportion to load."""
    span = SIMULATED_MAX_POWER_WATTS - SIMULATED_IDLE_POWER_WATTS
    return SIMULATED_IDLE_POWER_WATTS + span * (util_percent / 100.0)
