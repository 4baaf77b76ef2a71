"""The NVML collector on this machine: the real GPU where there is one, the fallback elsewhere."""

from __future__ import annotations

import logging
import os
import time

import pytest

from gpuaas.telemetry import (
    GpuHolder,
    MetricsSnapshot,
    NvmlCollector,
    SimulatedCollector,
    attribute,
)
from gpuaas.telemetry.metrics import build_registry, render


def _nvml_present() -> bool:
    probe = NvmlCollector(hostname="probe")
    try:
        return probe.available()
    finally:
        probe.close()


HAVE_NVML = _nvml_present()
# A GPU is not a service CI can start: GPU tests run where one exists, and are mandatory only
# where GPUAAS_REQUIRE_GPU=1 says one must be there (the GPU machine's check script sets it).
REQUIRE = os.environ.get("GPUAAS_REQUIRE_GPU") == "1"


@pytest.mark.skipif(HAVE_NVML, reason="NVML is present here: the fallback path cannot be reached")
def test_without_nvml_falls_back_logs_once_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = SimulatedCollector(2, hostname="sim")
    collector = NvmlCollector(fallback=sim, fallback_name="simulated GPUs", hostname="node-a")
    with caplog.at_level(logging.INFO, logger="gpuaas.telemetry.nvml"):
        first = collector.sample(0.0)
        for t in range(1, 20):
            collector.sample(float(t * 15))
    assert [s.uuid for s in first] == [s.uuid for s in sim.sample(0.0)]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "falling back to simulated GPUs" in warnings[0].getMessage()
    assert collector.unavailable_reason is not None
    assert not collector.available()


@pytest.mark.skipif(HAVE_NVML, reason="NVML is present here: the fallback path cannot be reached")
def test_without_nvml_and_without_fallback_returns_no_samples() -> None:
    collector = NvmlCollector(hostname="node-a")
    assert collector.sample(0.0) == []
    collector.close()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_NVML and not REQUIRE, reason="no NVIDIA GPU with NVML on this machine")
def test_real_nvml_reads_every_gpu_and_exposes_dcgm_metrics() -> None:
    collector = NvmlCollector(hostname="gpu-node")
    try:
        assert collector.available(), collector.unavailable_reason
        first = collector.sample(time.time())
        time.sleep(1.2)  # GPM metrics are a difference of two snapshots
        second = collector.sample(time.time())
    finally:
        collector.close()
    assert first and len(first) == len(second)
    for s in second:
        assert s.uuid.startswith(("GPU-", "MIG-"))
        assert s.model
        assert 0.0 <= s.utilization_percent <= 100.0
        assert 0 <= s.memory_used_bytes <= s.memory_total_bytes and s.memory_total_bytes > 0
        assert s.power_watts is None or 0.0 < s.power_watts < 2000.0
        for ratio in (s.sm_active, s.sm_occupancy):
            assert ratio is None or 0.0 <= ratio <= 1.0
        print(
            f"GPU {s.index} {s.model} {s.uuid}: util={s.utilization_percent}% "
            f"mem={s.memory_used_bytes}/{s.memory_total_bytes} power={s.power_watts}W "
            f"sm_active={s.sm_active} sm_occupancy={s.sm_occupancy} copy={s.memory_copy_util_percent}"
        )
    held = attribute(second, {0: GpuHolder("ns", "w", "w-0", "cq")})
    body = render(build_registry(lambda: MetricsSnapshot(gpus=tuple(held)))).decode()
    assert f'UUID="{second[0].uuid}"' in body
    assert "DCGM_FI_DEV_GPU_UTIL{" in body and 'workload="w"' in body
