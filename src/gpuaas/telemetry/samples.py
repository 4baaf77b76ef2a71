"""GPU samples and their attribution to the workload holding each GPU.

This module owns the plain records that every collector produces (``GpuSample``), the holder of
a GPU as the local runtime pins it (``GpuHolder``), and the pure join of the two
(``attribute``). It reads no clock, touches no device and never imports the engine: the caller
passes the pinning it got from the runtime, keyed by GPU index or UUID.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MIB = 2**20


@dataclass(slots=True, frozen=True)
class GpuSample:
    """One reading of one GPU. Fields the device cannot give are ``None``, never a made-up 0.

    Ratios follow DCGM: ``sm_active`` and ``sm_occupancy`` are 0..1 (DCGM_FI_PROF_SM_*), while
    ``utilization_percent`` and ``memory_copy_util_percent`` are 0..100 (DCGM_FI_DEV_*_UTIL).
    """

    time: float
    index: int
    uuid: str
    model: str
    utilization_percent: float
    memory_used_bytes: int
    memory_total_bytes: int
    power_watts: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    memory_copy_util_percent: float | None = None
    hostname: str = ""

    @property
    def memory_free_bytes(self) -> int:
        return max(0, self.memory_total_bytes - self.memory_used_bytes)


@dataclass(slots=True, frozen=True)
class GpuHolder:
    """Who holds a GPU: the runtime's pinning of one GPU to one pod of one workload."""

    namespace: str
    workload: str  # the workload's name (its key is namespace/workload)
    pod: str
    cluster_queue: str
    local_queue: str = ""

    @property
    def workload_key(self) -> str:
        return f"{self.namespace}/{self.workload}"


@dataclass(slots=True, frozen=True)
class AttributedSample:
    """A sample and its holder; ``holder`` is ``None`` for a GPU that nobody holds."""

    sample: GpuSample
    holder: GpuHolder | None = None


Pinning = Mapping[int | str, GpuHolder]
"""GPU index or GPU UUID -> holder, as the local runtime reports its pinning."""


def attribute(samples: Iterable[GpuSample], pinning: Pinning) -> list[AttributedSample]:
    """Tie each sample to the holder of its GPU.

    A UUID key wins over an index key because indexes are per node and can be reordered by the
    driver (``CUDA_DEVICE_ORDER``), while a UUID names one physical GPU.
    """
    out: list[AttributedSample] = []
    for sample in samples:
        holder = pinning.get(sample.uuid)
        if holder is None:
            holder = pinning.get(sample.index)
        out.append(AttributedSample(sample, holder))
    return out


def by_workload(samples: Iterable[AttributedSample]) -> dict[str, list[AttributedSample]]:
    """Group held GPUs by workload key; unheld GPUs are left out."""
    out: dict[str, list[AttributedSample]] = {}
    for item in samples:
        if item.holder is not None:
            out.setdefault(item.holder.workload_key, []).append(item)
    return out
