"""GpuaasConfiguration: defaults, round trip and errors that name object, field and reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.telemetry import (
    ConfigurationError,
    FlavorPrice,
    HoardingAction,
    HoardingRule,
    parse_configuration,
)


def doc(spec: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "gpuaas.dev/v1alpha1",
        "kind": "GpuaasConfiguration",
        "metadata": {"name": "tiers"},
    }
    if spec is not None:
        out["spec"] = spec
    out.update(top)
    return out


def test_defaults() -> None:
    cfg = parse_configuration(doc())
    assert cfg.name == "tiers"
    assert cfg.hoarding == (HoardingRule(),)
    rule = cfg.rule_for("any-cq")
    assert rule is not None
    assert (rule.utilization_threshold_percent, rule.window_seconds, rule.action) == (
        5.0,
        1800.0,
        HoardingAction.NOTIFY,
    )
    assert cfg.telemetry.interval_seconds == 15.0
    assert cfg.price("h100") == FlavorPrice()


def test_full_document_and_round_trip() -> None:
    spec = {
        "tiers": {"reserved": ["team-a-cq"], "on-demand": ["team-b-cq", "spot-cq"]},
        "hoarding": [
            {"tier": "reserved", "action": "Notify"},
            {
                "tier": "on-demand",
                "utilizationThresholdPercent": 10,
                "windowSeconds": 600,
                "action": "Evict",
            },
            {"clusterQueues": ["research-cq"], "windowSeconds": 3600},
        ],
        "prices": {"h100": {"gpuHour": 2.5, "cpuCoreHour": 0.04, "memoryGBHour": 0.005}},
        "currency": "EUR",
        "telemetry": {"intervalSeconds": 30, "collector": "simulated"},
    }
    cfg = parse_configuration(doc(spec))
    assert cfg.rule_for("team-a-cq") == HoardingRule(tier="reserved")
    spot = cfg.rule_for("spot-cq")
    assert spot is not None and spot.action is HoardingAction.EVICT and spot.window_seconds == 600
    research = cfg.rule_for("research-cq")
    assert research is not None and research.window_seconds == 3600
    assert cfg.rule_for("unlisted-cq") is None
    assert cfg.price("h100") == FlavorPrice(2.5, 0.04, 0.005)
    assert cfg.telemetry.interval_seconds == 30 and cfg.telemetry.collector == "simulated"
    assert parse_configuration(cfg.to_dict()) == cfg


def test_idle_eviction_back_off_defaults_follow_kueue_and_can_be_set() -> None:
    rule = parse_configuration(doc({"hoarding": [{"action": "Evict"}]})).rule_for("cq")
    assert rule is not None
    # Kueue's requeuingStrategy defaults (60 s base, 1 h max); 3 idle requeues, then deactivated
    assert (rule.backoff_limit_count, rule.backoff_base_seconds, rule.backoff_max_seconds) == (
        3,
        60.0,
        3600.0,
    )
    spec = {
        "hoarding": [
            {
                "action": "Evict",
                "backoffLimitCount": 0,
                "backoffBaseSeconds": 30,
                "backoffMaxSeconds": 300,
            }
        ]
    }
    cfg = parse_configuration(doc(spec))
    rule = cfg.rule_for("cq")
    assert rule is not None
    assert (rule.backoff_limit_count, rule.backoff_base_seconds, rule.backoff_max_seconds) == (
        0,
        30.0,
        300.0,
    )
    assert parse_configuration(cfg.to_dict()) == cfg


def test_empty_hoarding_list_watches_nothing() -> None:
    assert parse_configuration(doc({"hoarding": []})).rule_for("cq") is None


@pytest.mark.parametrize(
    ("document", "field", "reason"),
    [
        (doc(apiVersion="v1"), "apiVersion", "must be 'gpuaas.dev/v1alpha1'"),
        (doc(kind="Config"), "kind", "must be 'GpuaasConfiguration'"),
        (doc({"hoardng": []}), "spec.hoardng", "unknown field"),
        (doc({"hoarding": {"action": "Evict"}}), "spec.hoarding", "must be a list of rules"),
        (
            doc({"hoarding": [{"action": "Kill"}]}),
            "spec.hoarding[0].action",
            "must be Notify or Evict",
        ),
        (
            doc({"hoarding": [{}, {"utilizationThresholdPercent": 150}]}),
            "spec.hoarding[1].utilizationThresholdPercent",
            "must be at most 100",
        ),
        (
            doc({"hoarding": [{"windowSeconds": 0}]}),
            "spec.hoarding[0].windowSeconds",
            "greater than 0",
        ),
        (
            doc({"hoarding": [{"windowSeconds": "30m"}]}),
            "spec.hoarding[0].windowSeconds",
            "must be a number",
        ),
        (doc({"hoarding": [{"tier": "gold"}]}), "spec.hoarding[0].tier", "unknown tier 'gold'"),
        (
            doc({"tiers": {"gold": ["a"]}, "hoarding": [{"tier": "gold", "clusterQueues": ["a"]}]}),
            "spec.hoarding[0]",
            "not both",
        ),
        (doc({"hoarding": [{"clusterQueues": "a"}]}), "spec.hoarding[0].clusterQueues", "list of"),
        (doc({"prices": {"h100": {"gpuHour": -1}}}), "spec.prices.h100.gpuHour", "0 or more"),
        (doc({"prices": {"h100": {"gpu": 1}}}), "spec.prices.h100.gpu", "unknown field"),
        (
            doc({"telemetry": {"intervalSeconds": -5}}),
            "spec.telemetry.intervalSeconds",
            "greater than 0",
        ),
        (doc({"telemetry": {"collector": "dcgm"}}), "spec.telemetry.collector", "must be one of"),
        (doc({"tiers": {"gold": [1]}}), "spec.tiers.gold", "list of non-empty names"),
        (
            doc({"hoarding": [{"backoffLimitCount": -1}]}),
            "spec.hoarding[0].backoffLimitCount",
            "integer 0 or more",
        ),
        (
            doc({"hoarding": [{"backoffLimitCount": 2.5}]}),
            "spec.hoarding[0].backoffLimitCount",
            "integer 0 or more",
        ),
        (
            doc({"hoarding": [{"backoffBaseSeconds": 0}]}),
            "spec.hoarding[0].backoffBaseSeconds",
            "greater than 0",
        ),
        (
            doc({"hoarding": [{"backoffBaseSeconds": 120, "backoffMaxSeconds": 60}]}),
            "spec.hoarding[0].backoffMaxSeconds",
            "at least backoffBaseSeconds (120)",
        ),
    ],
)
def test_errors_name_object_field_reason(document: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        parse_configuration(document)
    assert err.value.object == "GpuaasConfiguration tiers"
    assert err.value.field == field
    assert reason in err.value.reason
    assert str(err.value).startswith(f"GpuaasConfiguration tiers: {field}: ")
