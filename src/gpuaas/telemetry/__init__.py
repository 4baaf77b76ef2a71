"""GPU telemetry, hoarding detection, usage accounting and the ``/metrics`` exposition.

This package is an adapter: it depends on ``gpuaas.core`` only, never on the engine, the API or
other adapters. The engine fills the plain records defined here (``MetricsSnapshot``,
``KueueCounters``, ``UsageLedger`` calls, the GPU pinning) and acts on the decisions returned
(``HoardingDecision``). Only ``telemetry.nvml`` touches the NVIDIA driver, and only
``telemetry.metrics`` imports ``prometheus_client``: it is not re-exported here, so that importing
the package (the engine checks a ``GpuaasConfiguration`` with it) never loads Prometheus.
"""

from gpuaas.telemetry.accounting import (
    GroupBy,
    UsageInterval,
    UsageLedger,
    UsageRow,
    is_gpu,
    parse_group_by,
    usage_report,
)
from gpuaas.telemetry.collectors import (
    DEFAULT_INTERVAL_SECONDS,
    PROFILE_ANNOTATION,
    GpuCollector,
    Profile,
    Sampler,
    SimulatedCollector,
    SimulatedGpu,
    TelemetryInputError,
    profile_from_annotations,
)
from gpuaas.telemetry.config import (
    API_VERSION,
    KIND,
    ConfigurationError,
    FlavorPrice,
    GpuaasConfiguration,
    HoardingAction,
    HoardingRule,
    TelemetrySettings,
    parse_configuration,
)
from gpuaas.telemetry.hoarding import (
    DecisionKind,
    HoardingDecision,
    HoardingDetector,
    HoardingRow,
)
from gpuaas.telemetry.nvml import NvmlCollector
from gpuaas.telemetry.report import parse_time, render_hoarding, render_usage
from gpuaas.telemetry.samples import AttributedSample, GpuHolder, GpuSample, Pinning, attribute
from gpuaas.telemetry.snapshot import (
    ClusterQueueStatus,
    KueueCounters,
    LocalQueueStatus,
    LocalQueueUsageRow,
    MetricsSnapshot,
    QuotaRow,
)
from gpuaas.telemetry.usage_store import MemoryUsageStore, SqliteUsageStore, UsageStore

__all__ = [
    "API_VERSION",
    "DEFAULT_INTERVAL_SECONDS",
    "KIND",
    "PROFILE_ANNOTATION",
    "AttributedSample",
    "ClusterQueueStatus",
    "ConfigurationError",
    "DecisionKind",
    "FlavorPrice",
    "GpuCollector",
    "GpuHolder",
    "GpuSample",
    "GpuaasConfiguration",
    "GroupBy",
    "HoardingAction",
    "HoardingDecision",
    "HoardingDetector",
    "HoardingRow",
    "HoardingRule",
    "KueueCounters",
    "LocalQueueStatus",
    "LocalQueueUsageRow",
    "MemoryUsageStore",
    "MetricsSnapshot",
    "NvmlCollector",
    "Pinning",
    "Profile",
    "QuotaRow",
    "Sampler",
    "SimulatedCollector",
    "SimulatedGpu",
    "SqliteUsageStore",
    "TelemetryInputError",
    "TelemetrySettings",
    "UsageInterval",
    "UsageLedger",
    "UsageRow",
    "UsageStore",
    "attribute",
    "is_gpu",
    "parse_configuration",
    "parse_group_by",
    "parse_time",
    "profile_from_annotations",
    "render_hoarding",
    "render_usage",
    "usage_report",
]
