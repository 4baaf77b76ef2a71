"""The port an adapter implements to ride on the engine: the runtime bridge, telemetry, the
admission-check dispatcher. Only the Protocol lives here; the engine calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from gpuaas.core.decisions import Decision

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine


class EngineObserver(Protocol):
    """An adapter riding on the engine (runtime, telemetry). Both hooks run under the engine lock.

    ``on_attach`` runs once, when ``add_observer`` registers it: catch up with the engine's state
    (a restored admission comes with no decision). ``on_tick`` runs before each periodic settle:
    report what happened outside (pods stopped or finished) through the engine's observer
    actions (``confirm_stopped``, ``finish_now``, ``evict``, ``set_condition``,
    ``record_event``). ``on_decisions`` sees every core decision
    of a settle (``core.decisions``), in order, after scheduling, and dispatches on their types
    (``Admit``: start pods; ``Evict``: stop them; ...), never on reason text. It reads the engine
    through its views and acts through the same actions; what an action causes (an admission
    after a stop) comes back in a further ``on_decisions`` of the same settle. Neither hook may
    block for long or do network I/O inside a store transaction.
    """

    def on_attach(self, engine: Engine, now: float) -> None: ...

    def on_tick(self, engine: Engine, now: float) -> None: ...

    def on_decisions(self, engine: Engine, decisions: Sequence[Decision], now: float) -> None: ...
