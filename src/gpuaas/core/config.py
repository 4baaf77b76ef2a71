"""The part of Kueue's Configuration (config.kueue.x-k8s.io) that changes scheduling decisions.

``SchedulerConfig`` holds fair sharing and ``waitForPodsReady`` with Kueue's defaults
(``apis/config/v1beta1/defaults.go``); ``parse_configuration`` reads a Kueue ``Configuration``
document (``gpuaas server --kueue-config FILE``), refusing what it cannot honour with the field and
the reason. Pure: no file is read here, the caller passes the parsed YAML.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaas.core.backoff import requeue_backoff_seconds
from gpuaas.core.errors import ApplyError

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
EVICTION_TIMESTAMP = "Eviction"
CREATION_TIMESTAMP = "Creation"

DEFAULT_PODS_READY_TIMEOUT = 300.0  # Kueue's defaultPodsReadyTimeout, 5 minutes
DEFAULT_BACKOFF_BASE_SECONDS = 60  # DefaultRequeuingBackoffBaseSeconds
DEFAULT_BACKOFF_MAX_SECONDS = 3600  # DefaultRequeuingBackoffMaxSeconds
API_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")


@dataclass(slots=True, frozen=True)
class RequeuingStrategy:
    """``waitForPodsReady.requeuingStrategy``: the queue-order timestamp after a PodsReady
    timeout, and the requeue back-off ``base * 2^(n-1)`` capped at ``max`` (Kueue adds a jitter of
    0.0001 of it; gpuaas does not, so decisions stay deterministic)."""

    timestamp: str = EVICTION_TIMESTAMP
    backoff_limit_count: int | None = None  # None: requeued forever
    backoff_base_seconds: int = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_max_seconds: int = DEFAULT_BACKOFF_MAX_SECONDS

    def backoff_seconds(self, count: int) -> float:
        """Kueue's ``UpdateRequeueState``: the wait before requeue number ``count`` (1, 2, ...)."""
        return requeue_backoff_seconds(count, self.backoff_base_seconds, self.backoff_max_seconds)


@dataclass(slots=True, frozen=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady``, with its defaults when enabled: timeout 5 min, the recovery
    timeout equal to the timeout, blockAdmission on."""

    timeout_seconds: float = DEFAULT_PODS_READY_TIMEOUT
    recovery_timeout_seconds: float | None = DEFAULT_PODS_READY_TIMEOUT
    block_admission: bool = True
    requeuing_strategy: RequeuingStrategy = field(default_factory=RequeuingStrategy)


@dataclass(slots=True, frozen=True)
class SchedulerConfig:
    """Defaults are Kueue's: classical preemption, fair sharing off, waitForPodsReady off."""

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = (
        LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        LESS_THAN_INITIAL_SHARE,
    )
    wait_for_pods_ready: WaitForPodsReady | None = None  # None: disabled


_OBJ = "Configuration"
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object, path: str) -> float:
    """A Kubernetes ``metav1.Duration`` (Go's syntax: ``5m``, ``1h30m``, ``90s``) in seconds."""
    text = value if isinstance(value, str) else ""
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ApplyError(_OBJ, path, f"must be a duration such as 5m, 90s or 1h30m, got {value!r}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    return seconds


def parse_configuration(doc: Mapping[str, Any]) -> SchedulerConfig:
    """A Kueue ``Configuration`` document; raises ``ApplyError`` naming the field and reason.

    Only ``fairSharing`` and ``waitForPodsReady`` change scheduling here; any other field is
    refused rather than silently ignored, so a setting the user relies on is never dropped.
    """
    if not isinstance(doc, Mapping):
        raise ApplyError(_OBJ, "(document)", "must be a mapping")
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if api not in API_VERSIONS:
        raise ApplyError(
            _OBJ, "apiVersion", f"must be one of {', '.join(API_VERSIONS)}, got {api!r}"
        )
    if kind != "Configuration":
        raise ApplyError(_OBJ, "kind", f"must be Configuration, got {kind!r}")
    unknown = sorted(set(doc) - {"apiVersion", "kind", "fairSharing", "waitForPodsReady"})
    if unknown:
        raise ApplyError(
            _OBJ, unknown[0], "not supported (gpuaas reads fairSharing and waitForPodsReady)"
        )
    fair, strategies = _fair_sharing(doc.get("fairSharing"))
    return SchedulerConfig(
        fair_sharing=fair,
        preemption_strategies=strategies,
        wait_for_pods_ready=parse_wait_for_pods_ready(doc.get("waitForPodsReady")),
    )


def _mapping(raw: object, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ApplyError(_OBJ, path, f"must be a mapping, got {type(raw).__name__}")
    return raw


def _known(raw: Mapping[str, Any], path: str, fields: set[str]) -> None:
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise ApplyError(
            _OBJ, f"{path}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(fields))})"
        )


def _bool(raw: Mapping[str, Any], name: str, path: str, default: bool) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise ApplyError(_OBJ, f"{path}.{name}", f"expected true or false, got {value!r}")
    return value


def _count(raw: Mapping[str, Any], name: str, path: str, default: int | None) -> int | None:
    value = raw.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ApplyError(
            _OBJ, f"{path}.{name}", f"must be a whole number, 0 or more, got {value!r}"
        )
    return value


def _fair_sharing(raw: object) -> tuple[bool, tuple[str, ...]]:
    default = SchedulerConfig().preemption_strategies
    if raw is None:
        return False, default
    fs = _mapping(raw, "fairSharing")
    _known(fs, "fairSharing", {"enable", "preemptionStrategies"})
    enable = _bool(fs, "enable", "fairSharing", False)
    strategies = fs.get("preemptionStrategies")
    if strategies is None:
        return enable, default
    if not isinstance(strategies, list) or not strategies:
        raise ApplyError(_OBJ, "fairSharing.preemptionStrategies", "must be a non-empty list")
    for s in strategies:
        if s not in STRATEGIES:
            raise ApplyError(
                _OBJ,
                "fairSharing.preemptionStrategies",
                f"unknown strategy {s!r} (known: {', '.join(STRATEGIES)})",
            )
    return enable, tuple(strategies)


def parse_wait_for_pods_ready(
    raw: object, path: str = "waitForPodsReady"
) -> WaitForPodsReady | None:
    """``waitForPodsReady`` with Kueue's defaults filled in; None when absent or not enabled."""
    if raw is None:
        return None
    w = _mapping(raw, path)
    _known(w, path, {"enable", "timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"})
    if not _bool(w, "enable", path, False):
        return None
    timeout = DEFAULT_PODS_READY_TIMEOUT
    if w.get("timeout") is not None:
        timeout = parse_duration(w["timeout"], f"{path}.timeout")
    recovery = timeout  # Kueue: recoveryTimeout defaults to timeout
    if w.get("recoveryTimeout") is not None:
        recovery = parse_duration(w["recoveryTimeout"], f"{path}.recoveryTimeout")
    block = _bool(w, "blockAdmission", path, True)
    strategy = RequeuingStrategy()
    if w.get("requeuingStrategy") is not None:
        rpath = f"{path}.requeuingStrategy"
        rs = _mapping(w["requeuingStrategy"], rpath)
        _known(
            rs, rpath, {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}
        )
        ts = rs.get("timestamp", EVICTION_TIMESTAMP)
        if ts not in (EVICTION_TIMESTAMP, CREATION_TIMESTAMP):
            raise ApplyError(
                _OBJ, f"{rpath}.timestamp", f"must be Eviction or Creation, got {ts!r}"
            )
        base = _count(rs, "backoffBaseSeconds", rpath, DEFAULT_BACKOFF_BASE_SECONDS)
        most = _count(rs, "backoffMaxSeconds", rpath, DEFAULT_BACKOFF_MAX_SECONDS)
        assert base is not None and most is not None
        strategy = RequeuingStrategy(ts, _count(rs, "backoffLimitCount", rpath, None), base, most)
    return WaitForPodsReady(timeout, recovery, block, strategy)


__all__ = [
    "CREATION_TIMESTAMP",
    "EVICTION_TIMESTAMP",
    "LESS_THAN_INITIAL_SHARE",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "RequeuingStrategy",
    "SchedulerConfig",
    "WaitForPodsReady",
    "parse_configuration",
    "parse_duration",
    "parse_wait_for_pods_ready",
]
