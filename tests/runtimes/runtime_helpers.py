"""Helpers shared by the runtime tests (a plain module: the tests directories are not packages)."""

from __future__ import annotations

import time
from collections.abc import Callable

from gpuaas.runtimes.base import EventKind, PodSpec, RuntimeEvent
from gpuaas.runtimes.local import LocalRuntime

MakeRuntime = Callable[..., LocalRuntime]


def wait_for(
    runtime: LocalRuntime, kind: EventKind, key: str, timeout: float = 10.0
) -> tuple[RuntimeEvent, list[RuntimeEvent]]:
    """Poll until ``kind`` happens to ``key``; return it and every event seen on the way."""
    seen: list[RuntimeEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in runtime.poll():
            seen.append(event)
            if event.kind == kind and event.workload == key:
                return event, seen
        time.sleep(0.01)
    raise AssertionError(f"no {kind} for {key} within {timeout}s; saw {seen}")


def sh(script: str, name: str = "p-0", **kwargs: object) -> PodSpec:
    """A pod whose command is a shell script."""
    return PodSpec(name, ("sh", "-c", script), **kwargs)  # type: ignore[arg-type]
