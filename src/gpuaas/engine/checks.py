"""Admission-check controllers inside the engine: one Protocol, one registry by controllerName.

Kueue's admission checks are run by controllers outside its scheduler (provisioning requests,
MultiKueue, placement add-ons). Here a controller that runs in the server implements
``CheckController`` and registers under its AdmissionCheck ``controllerName``; the
``CheckDispatcher`` (an engine observer) marks the checks it serves Active and shows it every
workload that reserves quota with one of its checks Pending, and the controller answers through
``engine.set_check_state``. A controller outside the server does the same through the API: the
Workload's ``status`` subresource for states, the AdmissionCheck's for its Active condition.
This module holds no check logic of its own; the states' consequences are the core's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from gpuaas.core.decisions import Decision, Reserve
from gpuaas.engine.views import WorkloadView

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine


class CheckController(Protocol):
    """Decides one kind of admission check (one ``controllerName``)."""

    def on_reserved(self, engine: Engine, workload: WorkloadView, check: str, now: float) -> None:
        """``workload`` reserved quota and ``check`` is Pending on it; answer now or later with
        ``engine.set_check_state`` (Pending, Ready, Retry with requeueAfterSeconds, Rejected)."""
        ...


CheckControllerFactory = Callable[[], CheckController]

# controllerName -> factory. Tests register fakes; the server adds MultiKueue's with its options.
REGISTRY: dict[str, CheckControllerFactory] = {}


def register(controller_name: str, factory: CheckControllerFactory) -> None:
    REGISTRY[controller_name] = factory


class CheckDispatcher:
    """The engine observer that runs the in-process check controllers."""

    def __init__(self, controllers: Mapping[str, CheckController]) -> None:
        self.controllers = dict(controllers)

    @classmethod
    def from_registry(cls, names: Sequence[str] | None = None) -> CheckDispatcher:
        chosen = REGISTRY if names is None else {n: REGISTRY[n] for n in names}
        return cls({name: factory() for name, factory in chosen.items()})

    def on_attach(self, engine: Engine, now: float) -> None:
        for name, controller in self.controllers.items():
            # A controller that decides its checks' Active itself (MultiKueue: from its
            # workers) writes that condition; the others are Active for running here.
            if not getattr(controller, "sets_active", False):
                engine.serve_checks(name)

    def on_tick(self, engine: Engine, now: float) -> None:
        return None

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None:
        for d in decisions:
            if not isinstance(d, Reserve):
                continue
            w = engine.workload(d.workload)
            if w is None or not w.awaiting_checks:
                continue
            for check, state, _ in w.admission_checks:
                controller = self.controllers.get(engine.check_controller_name(check) or "")
                if controller is not None and state == "Pending":
                    controller.on_reserved(engine, w, check, now)


__all__ = ["REGISTRY", "CheckController", "CheckDispatcher", "register"]
