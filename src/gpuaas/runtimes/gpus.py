"""Which GPU belongs to which running pod on this node.

This module owns the allocator: one owner per GPU, lowest free index first so that placement is
deterministic and testable, and all-or-nothing per workload so a half-started workload never
holds GPUs. It does not start processes; the runtime releases a pod's GPUs only once every
process of that pod is gone, so no GPU ever goes to two live pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuaas.inventory.gpus import GpuDevice
from gpuaas.runtimes.base import NotEnoughGpus, RuntimeRequestError

Owner = tuple[str, str]
"""(workload key, pod name)."""


class GpuAllocator:
    def __init__(self, gpus: Sequence[GpuDevice]) -> None:
        self._gpus = {g.index: g for g in gpus}
        self._owner: dict[int, Owner] = {}

    @property
    def devices(self) -> list[GpuDevice]:
        return [self._gpus[i] for i in sorted(self._gpus)]

    def free(self) -> list[int]:
        return [i for i in sorted(self._gpus) if i not in self._owner]

    def owners(self) -> dict[int, Owner]:
        return dict(self._owner)

    def allocate(self, key: str, requests: Sequence[tuple[str, int]]) -> dict[str, tuple[int, ...]]:
        """GPUs for every (pod, count) of one workload, or ``NotEnoughGpus`` and nothing taken."""
        wanted = sum(count for _, count in requests)
        free = self.free()
        if wanted > len(free):
            raise NotEnoughGpus(
                f"Workload {key}: its pods request {wanted} GPU(s), this node has {len(free)} "
                f"free of {len(self._gpus)}"
            )
        out: dict[str, tuple[int, ...]] = {}
        for pod, count in requests:
            taken, free = free[:count], free[count:]
            out[pod] = tuple(taken)
            for index in taken:
                self._owner[index] = (key, pod)
        return out

    def claim(self, key: str, pod: str, indices: Iterable[int]) -> None:
        """Re-take GPUs recorded in a state file (adoption after a restart)."""
        for index in indices:
            if index not in self._gpus:
                raise RuntimeRequestError(
                    f"Workload {key}: pod {pod} holds GPU {index}, which this node does not have"
                )
            holder = self._owner.get(index)
            if holder is not None and holder != (key, pod):
                raise RuntimeRequestError(
                    f"Workload {key}: pod {pod} holds GPU {index}, already held by {holder[0]} "
                    f"pod {holder[1]}"
                )
            self._owner[index] = (key, pod)

    def release(self, key: str, pod: str) -> None:
        for index, holder in list(self._owner.items()):
            if holder == (key, pod):
                del self._owner[index]

    def visible_devices(self, indices: Sequence[int]) -> tuple[str, str]:
        """(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES) for these GPUs.

        CUDA takes indices; the NVIDIA container toolkit takes UUIDs. A pod without GPUs gets
        empty CUDA devices (no GPU visible) and ``void``, the toolkit's word for none.
        """
        if not indices:
            return "", "void"
        cuda = ",".join(str(i) for i in indices)
        nvidia = ",".join(self._gpus[i].uuid for i in indices)
        return cuda, nvidia
