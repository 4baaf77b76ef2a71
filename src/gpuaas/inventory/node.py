"""This node as the scheduler sees it: CPUs, memory, GPUs, labels and taints.

This module owns building a ``NodeInventory`` from what the machine reports (psutil, NVML) and
what the operator declares (``--fake-gpus``, a YAML node config). Declared values win over
detected ones, so a laptop can pose as an 8-GPU node. It does not decide which flavor a node
serves (see ``inventory.matching``) and does not hand GPUs to pods (see ``runtimes.gpus``).
NVML's error on a machine without GPUs is kept in ``gpu_source`` and reported once by the caller.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from gpuaas.core.objects import Taint
from gpuaas.inventory.gpus import (
    DEFAULT_FAKE_MEMORY,
    DEFAULT_FAKE_MODEL,
    GpuDevice,
    InventoryError,
    fake_uuid,
    parse_bytes,
    parse_fake_gpus,
    product_label,
    read_nvml_gpus,
)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_CONFIG_KEYS = {"name", "cpus", "memory", "gpus", "labels", "taints"}


@dataclass(slots=True)
class NodeInventory:
    name: str
    cpu_millis: int
    memory_bytes: int
    gpus: list[GpuDevice]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpu_source: str = "nvml"  # nvml, fake, config, or "none: <NVML's reason>"

    def capacity(self) -> dict[str, int]:
        """Allocatable resources in core units (CPU in millicores)."""
        return {
            "cpu": self.cpu_millis,
            "memory": self.memory_bytes,
            "nvidia.com/gpu": len(self.gpus),
        }

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "capacity": self.capacity(),
            "gpus": [g.to_dict() for g in self.gpus],
            "gpuSource": self.gpu_source,
            "labels": dict(self.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
        }


def detect_node(
    fake_gpus: str | None = None, config_path: str | Path | None = None
) -> NodeInventory:
    """Build the inventory: detected values, then the config file, then ``--fake-gpus``.

    Real GPUs are listed through NVML unless the config or ``fake_gpus`` declares them.
    """
    config = load_node_config(config_path) if config_path is not None else {}
    where = f"node config {config_path}"
    cpus = config.get("cpus", os.cpu_count() or 1)
    cpu_millis = _parse_cpus(cpus, f"{where}: cpus")
    memory = (
        parse_bytes(config["memory"], f"{where}: memory")
        if "memory" in config
        else int(psutil.virtual_memory().total)
    )
    if fake_gpus is not None:
        gpus, source = parse_fake_gpus(fake_gpus), "fake"
    elif "gpus" in config:
        gpus, source = _config_gpus(config["gpus"], where), "config"
    else:
        gpus, reason = read_nvml_gpus()
        source = "nvml" if reason is None else f"none: {reason}"
    name = str(config.get("name") or socket.gethostname())
    labels = default_labels(name, gpus)
    labels.update(_string_map(config.get("labels", {}), f"{where}: labels"))
    taints = _taints(config.get("taints", []), where)
    return NodeInventory(name, cpu_millis, memory, gpus, labels, taints, source)


def default_labels(name: str, gpus: list[GpuDevice]) -> dict[str, str]:
    """The labels Kubernetes and GPU feature discovery would put on this node."""
    labels = {"kubernetes.io/hostname": name}
    if gpus:
        labels["nvidia.com/gpu.product"] = product_label(gpus[0].model)
        labels["nvidia.com/gpu.count"] = str(len(gpus))
        labels["nvidia.com/gpu.memory"] = str(gpus[0].memory_bytes // 2**20)
    return labels


def load_node_config(path: str | Path) -> dict[str, Any]:
    """Read and shape-check the YAML node config; unknown keys are errors, not silence."""
    where = f"node config {path}"
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InventoryError(f"{where}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{where}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: must be a mapping, got {type(data).__name__}")
    if "node" in data and len(data) == 1 and isinstance(data["node"], dict):
        data = data["node"]
    unknown = sorted(set(data) - _CONFIG_KEYS)
    if unknown:
        raise InventoryError(f"{where}: unknown field(s) {unknown}; known: {sorted(_CONFIG_KEYS)}")
    return data


def _parse_cpus(value: object, where: str) -> int:
    text = str(value).strip()
    try:
        millis = int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)
    except ValueError:
        raise InventoryError(f"{where}: not a CPU quantity: {value!r}") from None
    if millis <= 0:
        raise InventoryError(f"{where}: must be positive, got {value!r}")
    return millis


def _config_gpus(value: object, where: str) -> list[GpuDevice]:
    if isinstance(value, int | str) and not isinstance(value, bool):
        return parse_fake_gpus(str(value))
    if not isinstance(value, list):
        raise InventoryError(f"{where}: gpus must be a spec like '4:NVIDIA-L4' or a list")
    gpus = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InventoryError(f"{where}: gpus[{index}] must be a mapping")
        model = str(item.get("model", DEFAULT_FAKE_MODEL))
        memory = parse_bytes(
            item.get("memory", DEFAULT_FAKE_MEMORY), f"{where}: gpus[{index}].memory"
        )
        uuid = str(item.get("uuid", fake_uuid(index)))
        gpus.append(GpuDevice(index, uuid, model, memory, fake="uuid" not in item))
    if len({g.uuid for g in gpus}) != len(gpus):
        raise InventoryError(f"{where}: gpus: duplicate uuid")
    return gpus


def _string_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InventoryError(f"{where}: must be a mapping of strings")
    return {str(k): str(v) for k, v in value.items()}


def _taints(value: object, where: str) -> tuple[Taint, ...]:
    if not isinstance(value, list):
        raise InventoryError(f"{where}: taints must be a list")
    taints = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or not item.get("key"):
            raise InventoryError(f"{where}: taints[{index}] needs a key")
        effect = str(item.get("effect", "NoSchedule"))
        if effect not in TAINT_EFFECTS:
            raise InventoryError(
                f"{where}: taints[{index}].effect: {effect!r} is not one of {list(TAINT_EFFECTS)}"
            )
        taints.append(Taint(str(item["key"]), str(item.get("value", "")), effect))
    return tuple(taints)
