"""``--fake-gpus`` declares GPUs: telemetry samples them with the simulated collector and never
tries NVML, so no "NVML init failed" warning (issue 17, item 11)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuaas.server import ServerOptions, build


def test_declared_gpus_are_sampled_without_nvml(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    srv = build(
        ServerOptions(tmp_path / "data", runtime="none", fake_gpus="2", telemetry_interval=0.001),
        say=lambda _: None,
    )
    try:
        assert srv.telemetry.collector is srv.telemetry.simulated
        srv.engine.tick()
        srv.engine.tick()
    finally:
        srv.close()
    assert not [r for r in caplog.records if "NVML" in r.getMessage()]
