"""The part of Kueue's Configuration (config.kueue.x-k8s.io) that changes scheduling decisions."""

from __future__ import annotations

from dataclasses import dataclass

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(slots=True, frozen=True)
class SchedulerConfig:
    """Defaults are Kueue's: classical preemption, fair sharing off."""

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = (
        LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        LESS_THAN_INITIAL_SHARE,
    )
