"""GPU load read from what a pod's processes do, for machines without GPUs.

Where NVML is missing the simulated collector would otherwise make up a load from a profile; this
module turns a pod's CPU time into the utilization of the GPUs it holds instead, so that idle
detection follows what the pod really does: a pod running ``sleep`` reads about 0 %, a busy loop
about 100 %. The rule is one core busy for the whole interval = one GPU at 100 %; a pod holding N
GPUs spreads its busy cores evenly over them (2 busy cores on 4 GPUs read 50 % each), capped at
100 %. Memory, SM activity and power are simulated from that: the pod's resident host memory
stands for the GPU memory it uses (split over its GPUs), SM activity and occupancy follow the
utilization. It is pure: readings come in (the runtime's, taken with the runtime's own clock),
numbers come out; it reads no process and no clock itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# What the simulated SM counters read at 100 % utilization (DCGM ratios 0..1), and the share of
# the utilization the memory-copy engine shows: plausible values for a compute-bound kernel.
SM_ACTIVE_AT_FULL = 0.85
SM_OCCUPANCY_AT_FULL = 0.5
COPY_SHARE = 0.3


class CpuTimes(Protocol):
    """One reading of a pod's processes (``runtimes.base.PodCpu`` has this shape).

    ``cpu_seconds``: user + system time of every live process of the pod plus what its reaped
    children used; ``started_at`` and ``read_at``: when the pod's leader started and when this
    reading was taken, both on the same clock (the runtime's).
    """

    @property
    def cpu_seconds(self) -> float: ...

    @property
    def rss_bytes(self) -> int: ...

    @property
    def started_at(self) -> float: ...

    @property
    def read_at(self) -> float: ...


def cores_busy(previous: CpuTimes | None, current: CpuTimes) -> float:
    """Cores kept busy between two readings of the same pod.

    Without a previous reading of this same process (a new pod, or a pod restarted since:
    ``started_at`` differs) the average since the pod started is used; it includes the pod's
    start-up, so a fresh pod reads busier than it is, which can only delay an idle flag, never
    cause one. A negative difference (a process left the tree without being reaped inside it)
    reads as 0.
    """
    if previous is not None and previous.started_at == current.started_at:
        span = current.read_at - previous.read_at
        used = current.cpu_seconds - previous.cpu_seconds
    else:
        span = current.read_at - current.started_at
        used = current.cpu_seconds
    if span <= 0:
        return 0.0
    return max(0.0, used / span)


def utilization_percent(cores: float, gpus: int) -> float:
    """Each of ``gpus`` GPUs' utilization when the pod keeps ``cores`` cores busy."""
    if gpus <= 0:
        return 0.0
    return min(100.0, max(0.0, 100.0 * cores / gpus))


@dataclass(slots=True, frozen=True)
class ProcessReading:
    """What one GPU of a pod shows, simulated from the pod's processes."""

    utilization_percent: float
    memory_used_bytes: int
    sm_active: float
    sm_occupancy: float
    memory_copy_util_percent: float


def reading_for_gpu(cores: float, rss_bytes: int, gpus: int, memory_total: int) -> ProcessReading:
    util = utilization_percent(cores, gpus)
    share = rss_bytes // max(gpus, 1)
    return ProcessReading(
        utilization_percent=util,
        memory_used_bytes=max(0, min(memory_total, share)),
        sm_active=SM_ACTIVE_AT_FULL * util / 100.0,
        sm_occupancy=SM_OCCUPANCY_AT_FULL * util / 100.0,
        memory_copy_util_percent=COPY_SHARE * util,
    )
