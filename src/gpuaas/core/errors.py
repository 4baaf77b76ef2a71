"""Errors the core raises for input it refuses (as Kueue's webhooks refuse it)."""

from __future__ import annotations


class ApplyError(ValueError):
    """An update the engine refuses (as Kueue's webhooks would), with the field and reason."""

    def __init__(self, obj: str, field: str, reason: str) -> None:
        super().__init__(f"{obj}: {field}: {reason}")
        self.obj, self.field, self.reason = obj, field, reason
