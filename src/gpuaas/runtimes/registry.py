"""Runtimes by name: what ``gpuaas server --runtime NAME`` may choose, and how each is built.

This module owns the table from a runtime's name to its factory (``RuntimeOptions -> Runtime``)
and one line of help. Adding a runtime is one module with a ``create(options)`` factory plus one
line in ``_ENTRIES``; tests add theirs with ``register``/``unregister``. ``none`` is the entry
with no factory: admission only, nothing runs and evictions complete at once. It builds runtimes
and nothing else: it never starts pods and never imports the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuaas.runtimes import local, ray_runtime
from gpuaas.runtimes.base import Runtime, RuntimeOptions, RuntimeRequestError

RuntimeFactory = Callable[[RuntimeOptions], Runtime]


class UnknownRuntime(RuntimeRequestError):
    """No runtime is registered under that name."""


@dataclass(slots=True, frozen=True)
class RuntimeEntry:
    create: RuntimeFactory | None  # None: admission only, no pods run anywhere
    help: str


_ENTRIES: dict[str, RuntimeEntry] = {
    "local": RuntimeEntry(local.create, "admitted workloads run as processes on this node"),
    "none": RuntimeEntry(None, "admission only: nothing runs, evicted quota is freed at once"),
    "ray": RuntimeEntry(
        ray_runtime.create, "pods run on the nodes of a Ray cluster (--ray-address; gpuaas[ray])"
    ),
}


def names() -> tuple[str, ...]:
    """Registered names, in registration order (the first is the default)."""
    return tuple(_ENTRIES)


def entry(name: str) -> RuntimeEntry:
    try:
        return _ENTRIES[name]
    except KeyError:
        raise UnknownRuntime(
            f"no runtime named {name!r} (registered: {', '.join(_ENTRIES)})"
        ) from None


def create(name: str, options: RuntimeOptions) -> Runtime | None:
    """The runtime ``name`` built on ``options``, or None for an admission-only server."""
    factory = entry(name).create
    return factory(options) if factory is not None else None


def register(name: str, factory: RuntimeFactory | None, help: str) -> None:
    """Add a runtime under a new name; a name already taken is refused, not replaced."""
    if name in _ENTRIES:
        raise ValueError(f"a runtime named {name!r} is already registered")
    _ENTRIES[name] = RuntimeEntry(factory, help)


def unregister(name: str) -> None:
    """Remove a runtime added with ``register`` (tests undo theirs)."""
    entry(name)
    del _ENTRIES[name]


def describe() -> str:
    """``name: help`` for every runtime, for ``--runtime``'s help text."""
    return "; ".join(f"{name}: {e.help}" for name, e in _ENTRIES.items())
