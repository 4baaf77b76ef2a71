"""Node inventory: the CPUs, memory, GPUs, labels and taints of the machine gpuaas runs on.

The public names are re-exported here; the modules behind them are ``gpus`` (NVML and fake
GPUs), ``node`` (detection and the YAML node config) and ``matching`` (flavor-to-node matching).
Nothing here starts processes or hands GPUs to pods; that is ``gpuaas.runtimes``.
"""

from gpuaas.inventory.gpus import (
    GpuDevice,
    InventoryError,
    parse_bytes,
    parse_fake_gpus,
    read_nvml_gpus,
)
from gpuaas.inventory.matching import NodeMatch, flavor_matches_node, untolerated_taint
from gpuaas.inventory.node import NodeInventory, default_labels, detect_node, load_node_config

__all__ = [
    "GpuDevice",
    "InventoryError",
    "NodeInventory",
    "NodeMatch",
    "default_labels",
    "detect_node",
    "flavor_matches_node",
    "load_node_config",
    "parse_bytes",
    "parse_fake_gpus",
    "read_nvml_gpus",
    "untolerated_taint",
]
