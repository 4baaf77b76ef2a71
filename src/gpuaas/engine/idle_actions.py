"""What acting on idle GPUs means for each kind of workload: the idle-action registry.

A hoarding rule whose ``action`` is ``Evict`` says "act on an idle holder"; how to act depends on
what owns the workload. This module owns the map from the owner kind (``Workload.kind``: Job,
RayCluster, Notebook, ...) to that kind's idle action, and the ``Stop`` implementations kinds
register. ``Evict`` (every kind by default) is Kueue's eviction with a growing requeue back-off
and, past the rule's ``backoffLimitCount``, deactivation; it needs nothing registered. ``Stop`` is
what RHOAI's notebook culler does to an idle Notebook (it sets ``kubeflow-resource-stopped``):
evicting a Notebook would only requeue it, readmit it and find it idle again. The kind's own
module registers the stop (``IDLE_ACTIONS.register_stop("Notebook", stop_notebook)``); until one
is registered, a kind whose default is ``Stop`` falls back to the rule's ``Evict``. A ``Notify``
rule only flags, whatever the kind. This module decides nothing about idleness and calls no
handler itself: the telemetry bridge looks the action up and carries it out.

A stop handler is called inside the engine's tick, under the engine lock, from the telemetry
bridge: ``handler(engine, workload, message, now) -> bool``. It must act through the engine's
observer actions (``set_condition``, ``record_event``, ``evict``, ``finish_now``...) or hand the
write to its own controller to do after the tick (a request to the engine from inside a tick would
nest a settle in a settle); it returns True when the workload is being stopped (its GPUs will be
released), False to let the bridge fall back to the rule's eviction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from gpuaas.engine.views import WorkloadView

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine


class IdleAction(StrEnum):
    EVICT = "Evict"  # Kueue's eviction with requeue back-off, then deactivation
    STOP = "Stop"  # the owner kind's own stop (Kubeflow's kubeflow-resource-stopped)


StopHandler = Callable[["Engine", WorkloadView, str, float], bool]

# RHOAI's culler stops idle Notebooks; every other kind is evicted.
DEFAULT_ACTIONS: Mapping[str, IdleAction] = {"Notebook": IdleAction.STOP}


class IdleActions:
    """Owner kind -> idle action, and the registered ``Stop`` implementations."""

    def __init__(self, defaults: Mapping[str, IdleAction] = DEFAULT_ACTIONS) -> None:
        self._defaults = dict(defaults)
        self._stops: dict[str, StopHandler] = {}
        self._lock = threading.Lock()

    def set_default(self, owner_kind: str, action: IdleAction) -> None:
        with self._lock:
            self._defaults[owner_kind] = action

    def default_action(self, owner_kind: str) -> IdleAction:
        with self._lock:
            return self._defaults.get(owner_kind, IdleAction.EVICT)

    def register_stop(self, owner_kind: str, handler: StopHandler) -> None:
        """Make ``handler`` the way an idle workload of ``owner_kind`` is stopped."""
        with self._lock:
            self._stops[owner_kind] = handler

    def unregister_stop(self, owner_kind: str) -> None:
        with self._lock:
            self._stops.pop(owner_kind, None)

    def resolve(self, owner_kind: str) -> tuple[IdleAction, StopHandler | None]:
        """The action for an idle workload of ``owner_kind`` under an ``Evict`` rule: its
        kind's ``Stop`` when one is registered, else ``Evict``."""
        with self._lock:
            action = self._defaults.get(owner_kind, IdleAction.EVICT)
            handler = self._stops.get(owner_kind) if action is IdleAction.STOP else None
        if handler is None:
            return IdleAction.EVICT, None
        return action, handler


IDLE_ACTIONS = IdleActions()
"""The server's registry: a kind's module registers its ``Stop`` here at import or start."""

__all__ = ["DEFAULT_ACTIONS", "IDLE_ACTIONS", "IdleAction", "IdleActions", "StopHandler"]
