"""Runtimes: where admitted workloads really run. One small port, one module per adapter.

``base`` holds the port (``Runtime``, ``PodSpec``, ``RuntimeEvent``, ``RuntimeOptions``);
``podspecs`` turns an admitted workload and its manifest into pods; ``local`` runs them as process
groups on this machine; ``registry`` names the runtimes a server may choose (``--runtime``).
Runtimes depend on ``core`` and ``inventory`` only, never on the engine or the API.

The names below are loaded on first use (PEP 562), not when the package is imported: on Ray
every pod start imports this package in a fresh process (the pod's group leader
``ray_podproc``), and importing the core with it cost about 0.4 s on a busy machine
(``python -X importtime``), on the critical path of every preemption.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaas.runtimes.base import (
        DEFAULT_BACKOFF_LIMIT,
        DEFAULT_GRACE_SECONDS,
        AlreadyRunning,
        EventKind,
        NotEnoughGpus,
        PodCpu,
        PodSpec,
        PodStatus,
        Runtime,
        RuntimeEvent,
        RuntimeOptions,
        RuntimeRequestError,
        RuntimeUnavailable,
        WorkloadRun,
    )
    from gpuaas.runtimes.local import LocalRuntime
    from gpuaas.runtimes.podspecs import PodSpecError, RunPlan, build_run_plan

_HOME = {
    **dict.fromkeys(
        (
            "DEFAULT_BACKOFF_LIMIT",
            "DEFAULT_GRACE_SECONDS",
            "AlreadyRunning",
            "EventKind",
            "NotEnoughGpus",
            "PodCpu",
            "PodSpec",
            "PodStatus",
            "Runtime",
            "RuntimeEvent",
            "RuntimeOptions",
            "RuntimeRequestError",
            "RuntimeUnavailable",
            "WorkloadRun",
        ),
        "base",
    ),
    "LocalRuntime": "local",
    "PodSpecError": "podspecs",
    "RunPlan": "podspecs",
    "build_run_plan": "podspecs",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "DEFAULT_GRACE_SECONDS",
    "AlreadyRunning",
    "EventKind",
    "LocalRuntime",
    "NotEnoughGpus",
    "PodCpu",
    "PodSpec",
    "PodSpecError",
    "PodStatus",
    "RunPlan",
    "Runtime",
    "RuntimeEvent",
    "RuntimeOptions",
    "RuntimeRequestError",
    "RuntimeUnavailable",
    "WorkloadRun",
    "build_run_plan",
]
