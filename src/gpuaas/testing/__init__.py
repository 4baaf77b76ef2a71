"""Builders and helpers shared by tests: fluent object builders (no fakes of real components)."""
