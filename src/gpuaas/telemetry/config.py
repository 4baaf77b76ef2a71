"""The ``GpuaasConfiguration`` object (gpuaas.dev/v1alpha1): hoarding rules, prices, sampling.

This module owns the shape of that object, its defaults and its validation from a plain dict
(as ``apply`` reads it from YAML or JSON). Every error names the object, the field path and the
reason. It decides nothing: the hoarding detector and the usage report read the parsed value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpuaas.core.backoff import DEFAULT_BACKOFF_BASE_SECONDS, DEFAULT_BACKOFF_MAX_SECONDS
from gpuaas.telemetry.collectors import DEFAULT_INTERVAL_SECONDS, TelemetryInputError

API_VERSION = "gpuaas.dev/v1alpha1"
KIND = "GpuaasConfiguration"
DEFAULT_THRESHOLD_PERCENT = 5.0
DEFAULT_WINDOW_SECONDS = 1800.0
# Idle evictions, as Kueue's waitForPodsReady.requeuingStrategy: requeued after 60 s, 120 s,
# 240 s ... (at most an hour); the 4th idle finding after 3 such evictions deactivates it.
DEFAULT_BACKOFF_LIMIT_COUNT = 3
COLLECTORS = ("auto", "nvml", "simulated")


class ConfigurationError(TelemetryInputError):
    def __init__(self, obj: str, field_path: str, reason: str) -> None:
        super().__init__(f"{obj}: {field_path}: {reason}")
        self.object = obj
        self.field = field_path
        self.reason = reason


class HoardingAction(StrEnum):
    NOTIFY = "Notify"
    EVICT = "Evict"


@dataclass(slots=True, frozen=True)
class HoardingRule:
    """Which ClusterQueues a rule covers: listed ones, a tier's, or (neither given) all."""

    cluster_queues: tuple[str, ...] = ()
    tier: str | None = None
    utilization_threshold_percent: float = DEFAULT_THRESHOLD_PERCENT
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    action: HoardingAction = HoardingAction.NOTIFY
    # Evict only: requeue with Kueue's growing back-off, deactivate past this many idle evictions
    backoff_limit_count: int = DEFAULT_BACKOFF_LIMIT_COUNT
    backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_max_seconds: float = DEFAULT_BACKOFF_MAX_SECONDS

    def matches(self, cluster_queue: str, tiers: Mapping[str, tuple[str, ...]]) -> bool:
        if self.cluster_queues:
            return cluster_queue in self.cluster_queues
        if self.tier is not None:
            return cluster_queue in tiers.get(self.tier, ())
        return True


@dataclass(slots=True, frozen=True)
class FlavorPrice:
    """Price per hour of one unit of each resource on a flavor (memory: per GiB)."""

    gpu_hour: float = 0.0
    cpu_core_hour: float = 0.0
    memory_gb_hour: float = 0.0


@dataclass(slots=True, frozen=True)
class TelemetrySettings:
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    collector: str = "auto"  # auto: NVML if present, else simulated


DEFAULT_RULES: tuple[HoardingRule, ...] = (HoardingRule(),)


@dataclass(slots=True, frozen=True)
class GpuaasConfiguration:
    name: str = "default"
    hoarding: tuple[HoardingRule, ...] = DEFAULT_RULES
    tiers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    prices: dict[str, FlavorPrice] = field(default_factory=dict)
    currency: str = "USD"
    telemetry: TelemetrySettings = TelemetrySettings()

    def rule_for(self, cluster_queue: str) -> HoardingRule | None:
        """The first rule covering this ClusterQueue; ``None`` when it is not watched."""
        for rule in self.hoarding:
            if rule.matches(cluster_queue, self.tiers):
                return rule
        return None

    def price(self, flavor: str) -> FlavorPrice:
        return self.prices.get(flavor, FlavorPrice())

    def to_dict(self) -> dict[str, Any]:
        rules: list[dict[str, Any]] = []
        for rule in self.hoarding:
            item: dict[str, Any] = {}
            if rule.cluster_queues:
                item["clusterQueues"] = list(rule.cluster_queues)
            if rule.tier is not None:
                item["tier"] = rule.tier
            item["utilizationThresholdPercent"] = rule.utilization_threshold_percent
            item["windowSeconds"] = rule.window_seconds
            item["action"] = rule.action.value
            item["backoffLimitCount"] = rule.backoff_limit_count
            item["backoffBaseSeconds"] = rule.backoff_base_seconds
            item["backoffMaxSeconds"] = rule.backoff_max_seconds
            rules.append(item)
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.name},
            "spec": {
                "hoarding": rules,
                "tiers": {name: list(cqs) for name, cqs in self.tiers.items()},
                "prices": {
                    flavor: {
                        "gpuHour": p.gpu_hour,
                        "cpuCoreHour": p.cpu_core_hour,
                        "memoryGBHour": p.memory_gb_hour,
                    }
                    for flavor, p in self.prices.items()
                },
                "currency": self.currency,
                "telemetry": {
                    "intervalSeconds": self.telemetry.interval_seconds,
                    "collector": self.telemetry.collector,
                },
            },
        }


class _Reader:
    """Field access that turns every mistake into a ConfigurationError naming the path."""

    def __init__(self, obj: str) -> None:
        self.obj = obj

    def fail(self, path: str, reason: str) -> ConfigurationError:
        return ConfigurationError(self.obj, path, reason)

    def mapping(
        self, value: object, path: str, allowed: tuple[str, ...] | None
    ) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be an object, got {type(value).__name__}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(
                        f"{path}.{key}", f"unknown field (allowed: {', '.join(allowed)})"
                    )
        return value

    def number(self, value: object, path: str, *, default: float, positive: bool) -> float:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"must be a number, got {value!r}")
        number = float(value)
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            need = "greater than 0" if positive else "0 or more"
            raise self.fail(path, f"must be {need}, got {value!r}")
        return number

    def string_list(self, value: object, path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(path, "must be a list of non-empty names")
        return tuple(value)


def parse_configuration(doc: Mapping[str, Any]) -> GpuaasConfiguration:
    """Validate and default a ``GpuaasConfiguration`` document."""
    raw_name = (
        doc.get("metadata", {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
    )
    name = raw_name if isinstance(raw_name, str) and raw_name else "default"
    r = _Reader(f"{KIND} {name}")
    if doc.get("apiVersion") != API_VERSION:
        raise r.fail("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise r.fail("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    spec = r.mapping(
        doc.get("spec"), "spec", ("hoarding", "tiers", "prices", "currency", "telemetry")
    )

    # 1. tiers: name -> ClusterQueues
    tiers: dict[str, tuple[str, ...]] = {}
    for tier, cqs in r.mapping(spec.get("tiers"), "spec.tiers", None).items():
        tiers[str(tier)] = r.string_list(cqs, f"spec.tiers.{tier}")

    # 2. hoarding rules; absent means the default rule, an empty list means no watching
    rules: tuple[HoardingRule, ...] = DEFAULT_RULES
    if "hoarding" in spec:
        raw_rules = spec["hoarding"]
        if not isinstance(raw_rules, list):
            raise r.fail("spec.hoarding", "must be a list of rules")
        rules = tuple(
            _parse_rule(r, item, f"spec.hoarding[{i}]", tiers) for i, item in enumerate(raw_rules)
        )

    # 3. prices per flavor-hour
    prices: dict[str, FlavorPrice] = {}
    for flavor, raw in r.mapping(spec.get("prices"), "spec.prices", None).items():
        path = f"spec.prices.{flavor}"
        p = r.mapping(raw, path, ("gpuHour", "cpuCoreHour", "memoryGBHour"))
        prices[str(flavor)] = FlavorPrice(
            gpu_hour=r.number(p.get("gpuHour"), f"{path}.gpuHour", default=0.0, positive=False),
            cpu_core_hour=r.number(
                p.get("cpuCoreHour"), f"{path}.cpuCoreHour", default=0.0, positive=False
            ),
            memory_gb_hour=r.number(
                p.get("memoryGBHour"), f"{path}.memoryGBHour", default=0.0, positive=False
            ),
        )
    currency = spec.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise r.fail("spec.currency", f"must be a non-empty string, got {currency!r}")

    # 4. telemetry
    t = r.mapping(spec.get("telemetry"), "spec.telemetry", ("intervalSeconds", "collector"))
    interval = r.number(
        t.get("intervalSeconds"),
        "spec.telemetry.intervalSeconds",
        default=DEFAULT_INTERVAL_SECONDS,
        positive=True,
    )
    collector = t.get("collector", "auto")
    if collector not in COLLECTORS:
        raise r.fail(
            "spec.telemetry.collector", f"must be one of {', '.join(COLLECTORS)}, got {collector!r}"
        )
    return GpuaasConfiguration(
        name=name,
        hoarding=rules,
        tiers=tiers,
        prices=prices,
        currency=currency,
        telemetry=TelemetrySettings(interval_seconds=interval, collector=str(collector)),
    )


def _parse_rule(
    r: _Reader, raw: object, path: str, tiers: Mapping[str, tuple[str, ...]]
) -> HoardingRule:
    item = r.mapping(
        raw,
        path,
        (
            "clusterQueues",
            "tier",
            "utilizationThresholdPercent",
            "windowSeconds",
            "action",
            "backoffLimitCount",
            "backoffBaseSeconds",
            "backoffMaxSeconds",
        ),
    )
    cluster_queues = r.string_list(item.get("clusterQueues"), f"{path}.clusterQueues")
    tier = item.get("tier")
    if tier is not None:
        if not isinstance(tier, str) or not tier:
            raise r.fail(f"{path}.tier", "must be a tier name")
        if cluster_queues:
            raise r.fail(path, "set clusterQueues or tier, not both")
        if tier not in tiers:
            known = ", ".join(sorted(tiers)) or "none defined"
            raise r.fail(f"{path}.tier", f"unknown tier {tier!r} (spec.tiers: {known})")
    threshold = r.number(
        item.get("utilizationThresholdPercent"),
        f"{path}.utilizationThresholdPercent",
        default=DEFAULT_THRESHOLD_PERCENT,
        positive=False,
    )
    if threshold > 100:
        raise r.fail(
            f"{path}.utilizationThresholdPercent", f"must be at most 100, got {threshold:g}"
        )
    window = r.number(
        item.get("windowSeconds"),
        f"{path}.windowSeconds",
        default=DEFAULT_WINDOW_SECONDS,
        positive=True,
    )
    raw_action = item.get("action", HoardingAction.NOTIFY.value)
    try:
        action = HoardingAction(raw_action)
    except ValueError:
        raise r.fail(f"{path}.action", f"must be Notify or Evict, got {raw_action!r}") from None
    limit = item.get("backoffLimitCount", DEFAULT_BACKOFF_LIMIT_COUNT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise r.fail(f"{path}.backoffLimitCount", f"must be an integer 0 or more, got {limit!r}")
    base = r.number(
        item.get("backoffBaseSeconds"),
        f"{path}.backoffBaseSeconds",
        default=DEFAULT_BACKOFF_BASE_SECONDS,
        positive=True,
    )
    most = r.number(
        item.get("backoffMaxSeconds"),
        f"{path}.backoffMaxSeconds",
        default=DEFAULT_BACKOFF_MAX_SECONDS,
        positive=True,
    )
    if most < base:
        raise r.fail(
            f"{path}.backoffMaxSeconds",
            f"must be at least backoffBaseSeconds ({base:g}), got {most:g}",
        )
    return HoardingRule(
        cluster_queues,
        tier if isinstance(tier, str) else None,
        threshold,
        window,
        action,
        limit,
        base,
        most,
    )
