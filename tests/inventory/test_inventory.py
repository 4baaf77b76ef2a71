"""Node inventory: fake GPU specs, the YAML node config, and NVML's absence reported, not raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.core.objects import Taint
from gpuaas.inventory import (
    InventoryError,
    detect_node,
    parse_bytes,
    parse_fake_gpus,
    read_nvml_gpus,
)


@pytest.mark.parametrize(
    ("spec", "count", "model", "memory"),
    [
        ("4", 4, "NVIDIA-Fake-GPU", 16 * 2**30),
        ("4:NVIDIA-L4", 4, "NVIDIA-L4", 16 * 2**30),
        ("2:NVIDIA-H100-80GB-HBM3:80Gi", 2, "NVIDIA-H100-80GB-HBM3", 80 * 2**30),
        ("0", 0, "", 0),
    ],
)
def test_parse_fake_gpus(spec: str, count: int, model: str, memory: int) -> None:
    gpus = parse_fake_gpus(spec)
    assert [g.index for g in gpus] == list(range(count))
    assert all(g.model == model and g.memory_bytes == memory and g.fake for g in gpus)
    assert len({g.uuid for g in gpus}) == count
    assert parse_fake_gpus(spec) == gpus  # deterministic UUIDs


def test_fake_uuid_shape() -> None:
    assert parse_fake_gpus("2")[1].uuid == "GPU-fake-0001-0000-0000-000000000000"


@pytest.mark.parametrize("spec", ["", "x", "-1", "4:L4:lots", "1:a:2Gi:extra"])
def test_parse_fake_gpus_rejects(spec: str) -> None:
    with pytest.raises(InventoryError, match="--fake-gpus"):
        parse_fake_gpus(spec)


@pytest.mark.parametrize(
    ("text", "want"), [("24Gi", 24 * 2**30), ("512Mi", 512 * 2**20), ("1G", 10**9), (1000, 1000)]
)
def test_parse_bytes(text: str | int, want: int) -> None:
    assert parse_bytes(text, "x") == want


def test_nvml_absent_is_a_reason_not_an_error() -> None:
    gpus, reason = read_nvml_gpus()
    if gpus:
        pytest.skip("this machine has GPUs")
    assert reason is not None and "NVML" in reason


def test_detect_without_gpus_reports_nvml_once() -> None:
    node = detect_node()
    if node.gpu_source == "nvml":
        pytest.skip("this machine has GPUs")
    assert node.gpu_source.startswith("none: ")
    assert node.gpus == [] and node.capacity()["nvidia.com/gpu"] == 0
    assert node.cpu_millis > 0 and node.memory_bytes > 0


def test_fake_gpus_label_the_node() -> None:
    node = detect_node(fake_gpus="4:NVIDIA-L4")
    assert node.gpu_source == "fake"
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-L4"
    assert node.labels["nvidia.com/gpu.count"] == "4"
    assert node.capacity()["nvidia.com/gpu"] == 4


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(
        """
name: box
cpus: 8
memory: 32Gi
gpus:
  - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi}
  - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, uuid: GPU-1234}
labels:
  node.kubernetes.io/instance-type: p4d.24xlarge
taints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
"""
    )
    node = detect_node(config_path=path)
    assert node.name == "box" and node.cpu_millis == 8000 and node.memory_bytes == 32 * 2**30
    assert [g.uuid for g in node.gpus] == ["GPU-fake-0000-0000-0000-000000000000", "GPU-1234"]
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert node.labels["node.kubernetes.io/instance-type"] == "p4d.24xlarge"
    assert node.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    # --fake-gpus wins over the config's GPUs
    assert len(detect_node(fake_gpus="1", config_path=path).gpus) == 1


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("gpu: 4\n", "unknown field"),
        ("[1, 2]\n", "must be a mapping"),
        ("cpus: lots\n", "cpus: not a CPU quantity"),
        ("taints: [{key: a, effect: Sometimes}]\n", r"taints\[0\].effect"),
        ("memory: 12 parsecs\n", "memory: not a memory size"),
        ("gpus: {a: 1}\n", "gpus must be"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_config_errors_name_the_field(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError, match=match) as info:
        detect_node(config_path=path)
    assert str(path) in str(info.value)
