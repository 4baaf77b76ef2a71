"""The runtime registry: names for ``--runtime``, factories, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.inventory import detect_node
from gpuaas.runtimes import LocalRuntime, Runtime, RuntimeOptions, registry
from gpuaas.runtimes.registry import UnknownRuntime
from gpuaas.testing.fake_runtime import FakeRuntime


def _options(tmp_path: Path) -> RuntimeOptions:
    return RuntimeOptions(tmp_path / "runtime", detect_node("2", None))


def test_local_is_the_default_and_none_builds_nothing(tmp_path: Path) -> None:
    assert registry.names()[:2] == ("local", "none")
    local = registry.create("local", _options(tmp_path))
    assert isinstance(local, LocalRuntime) and isinstance(local, Runtime)
    assert registry.create("none", _options(tmp_path)) is None


def test_unknown_and_duplicate_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnknownRuntime, match="registered: local, none"):
        registry.create("ray-someday", _options(tmp_path))
    with pytest.raises(ValueError, match="already registered"):
        registry.register("local", FakeRuntime.create, "again")
    with pytest.raises(UnknownRuntime):
        registry.unregister("ray-someday")


def test_registering_a_runtime_is_one_line_and_undone(tmp_path: Path) -> None:
    registry.register("fake", FakeRuntime.create, "a test runtime")
    try:
        assert "fake: a test runtime" in registry.describe()
        fake = registry.create("fake", _options(tmp_path))
        assert isinstance(fake, FakeRuntime) and isinstance(fake, Runtime)
    finally:
        registry.unregister("fake")
    assert "fake" not in registry.names()
