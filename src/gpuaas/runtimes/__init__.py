"""Runtimes: where admitted workloads really run. One small port, one module per adapter.

``base`` holds the port (``Runtime``, ``PodSpec``, ``RuntimeEvent``, ``RuntimeOptions``);
``podspecs`` turns an admitted workload and its manifest into pods; ``local`` runs them as process
groups on this machine; ``registry`` names the runtimes a server may choose (``--runtime``).
Runtimes depend on ``core`` and ``inventory`` only, never on the engine or the API.
"""

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
    WorkloadRun,
)
from gpuaas.runtimes.local import LocalRuntime
from gpuaas.runtimes.podspecs import PodSpecError, RunPlan, build_run_plan

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
    "WorkloadRun",
    "build_run_plan",
]
