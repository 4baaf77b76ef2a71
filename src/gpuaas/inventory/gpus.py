"""The GPUs of this node: read through NVML, or declared as fakes when no GPU exists.

This module owns the GPU record and the two ways to get one: ``read_nvml_gpus`` (nvidia-ml-py)
and ``parse_fake_gpus`` (``--fake-gpus N[:MODEL[:MEMORY]]``). It never allocates GPUs to pods
(see ``runtimes.gpus``) and never raises on a machine without a GPU: NVML's error is returned as
a reason so the caller can report it once and fall back to fakes.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

DEFAULT_FAKE_MODEL = "NVIDIA-Fake-GPU"
DEFAULT_FAKE_MEMORY = 16 * 2**30

_BINARY = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_QUANTITY = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti|k|M|G|T)?\s*$")


class InventoryError(ValueError):
    """Bad node inventory input; the message names the source, the field and the reason."""


@dataclass(slots=True, frozen=True)
class GpuDevice:
    index: int
    uuid: str
    model: str
    memory_bytes: int
    fake: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "memoryBytes": self.memory_bytes,
            "fake": self.fake,
        }


def parse_bytes(text: str | int, where: str) -> int:
    """A memory size as Kubernetes writes it (``24Gi``, ``512M``, ``1000``)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise InventoryError(f"{where}: must not be negative, got {text}")
        return text
    match = _QUANTITY.match(str(text))
    if match is None:
        raise InventoryError(f"{where}: not a memory size: {text!r} (examples: 24Gi, 512Mi)")
    number, suffix = int(match.group(1)), match.group(2) or ""
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


def fake_uuid(index: int) -> str:
    """Deterministic, so that state files and logs agree across restarts."""
    return f"GPU-fake-{index:04d}-0000-0000-000000000000"


def parse_fake_gpus(spec: str) -> list[GpuDevice]:
    """``"4"``, ``"4:NVIDIA-L4"`` or ``"4:NVIDIA-L4:24Gi"`` -> that many fake GPUs."""
    where = f"--fake-gpus {spec!r}"
    parts = spec.strip().split(":")
    if not parts[0].strip().isdigit():
        raise InventoryError(
            f"{where}: count must be a non-negative integer (form N[:MODEL[:MEMORY]])"
        )
    if len(parts) > 3:
        raise InventoryError(f"{where}: too many ':' parts (form N[:MODEL[:MEMORY]])")
    count = int(parts[0])
    model = parts[1].strip() if len(parts) > 1 and parts[1].strip() else DEFAULT_FAKE_MODEL
    memory = parse_bytes(parts[2], where) if len(parts) > 2 else DEFAULT_FAKE_MEMORY
    return [GpuDevice(i, fake_uuid(i), model, memory, fake=True) for i in range(count)]


def read_nvml_gpus() -> tuple[list[GpuDevice], str | None]:
    """The real GPUs, or ``([], reason)`` when NVML cannot be loaded or answers with an error."""
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py is a dependency, but keep the node usable
        return [], f"nvidia-ml-py is not importable: {exc}"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], f"NVML unavailable: {exc}"
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            model = _text(pynvml.nvmlDeviceGetName(handle))
            memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
            gpus.append(GpuDevice(index, uuid, model, memory))
        return gpus, None
    except pynvml.NVMLError as exc:
        return [], f"NVML error while listing GPUs: {exc}"
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def product_label(model: str) -> str:
    """GPU feature discovery's ``nvidia.com/gpu.product`` value: spaces become dashes."""
    return "-".join(model.split())


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
