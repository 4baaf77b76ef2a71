"""Fixtures for runtime tests: a LocalRuntime on fake GPUs, shut down after each test, and a
check that the test left no child process behind (zombies included)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from runtime_helpers import MakeRuntime

from gpuaas.inventory import parse_fake_gpus
from gpuaas.runtimes.local import LocalRuntime


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    children = psutil.Process().children(recursive=True)
    while children and time.monotonic() < deadline:
        time.sleep(0.05)
        children = [c for c in psutil.Process().children(recursive=True) if c.is_running()]
    assert children == [], f"processes left behind: {children}"


@pytest.fixture
def make_runtime(tmp_path: Path) -> Iterator[MakeRuntime]:
    made: list[LocalRuntime] = []

    def make(gpus: str = "4", root: Path | None = None, **kwargs: object) -> LocalRuntime:
        runtime = LocalRuntime(root or tmp_path / "rt", parse_fake_gpus(gpus), **kwargs)  # type: ignore[arg-type]
        made.append(runtime)
        return runtime

    yield make
    for runtime in reversed(made):
        runtime.shutdown(grace_seconds=0)


@pytest.fixture(params=[True, False], ids=["launcher", "spawn"])
def runtime(make_runtime: MakeRuntime, request: pytest.FixtureRequest) -> LocalRuntime:
    """Both ways a pod's leader starts: forked by the runtime's pod launcher (the default) and
    spawned as a fresh ``pod_init`` (where no launcher runs, or once it is gone)."""
    made = make_runtime(launcher=request.param)
    assert (made._launcher is not None) is request.param
    return made
