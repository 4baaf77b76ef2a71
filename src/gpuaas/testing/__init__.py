"""Builders and fakes shared by tests: fluent object builders, and ``fake_runtime`` (a ``Runtime``
that runs nothing, registered by name as any runtime is). No production code imports this package.
"""
