"""What ``Stop`` does to an idle Notebook: set ``kubeflow-resource-stopped``, as RHOAI's culler does.

RHOAI's notebook culler (Kubeflow's ``culling_controller``) stops an idle workbench by annotating
its Notebook ``kubeflow-resource-stopped: <RFC 3339 time>``; the notebook controller then scales it
to zero, and Kueue's StatefulSet pod group loses its pods and its Workload (see
``core.manifest_notebook``): the GPU is free and nothing is requeued. The telemetry bridge calls the
handler from inside a tick, under the engine lock, where a write to the engine would nest a settle
in a settle; so the handler records the event at once and hands the patch to a short-lived thread
that writes it, through the engine's public ``patch``, as soon as the tick is over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from gpuaas.core.manifest_notebook import STOPPED_ANNOTATION
from gpuaas.core.state import Event
from gpuaas.engine.errors import EngineError
from gpuaas.engine.views import WorkloadView
from gpuaas.vocab.kinds import NOTEBOOK
from gpuaas.vocab.render import rfc3339

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)
REASON = "IdleStopped"


def stop_notebook(engine: Engine, workload: WorkloadView, message: str, now: float) -> bool:
    """The ``Stop`` of an idle Notebook's workload; False for a workload no Notebook owns."""
    wl = workload.workload
    if wl.kind != NOTEBOOK.kind:
        return False
    engine.record_event(
        Event(
            now,
            "Normal",
            REASON,
            f"Workload {wl.key}",
            f"Stopping Notebook {wl.namespace}/{wl.name} ({STOPPED_ANNOTATION}), as RHOAI's "
            f"culler does: {message}",
            workload=wl.key,
        )
    )
    patch = {"metadata": {"annotations": {STOPPED_ANNOTATION: rfc3339(now)}}}

    def write() -> None:
        try:
            engine.patch(NOTEBOOK, wl.namespace, wl.name, patch)
        except EngineError as exc:  # deleted meanwhile, or the store refused: said, not raised
            log.warning("Notebook %s: idle stop not written: %s", wl.key, exc)

    threading.Thread(target=write, name=f"stop-{wl.key}", daemon=True).start()
    return True


class StopRegistry(Protocol):
    """Where owner kinds register their idle ``Stop`` (the telemetry bridge's idle actions)."""

    def register_stop(
        self, owner_kind: str, handler: Callable[[Engine, WorkloadView, str, float], bool]
    ) -> None: ...


def register(registry: StopRegistry) -> None:
    """Make ``stop_notebook`` the ``Stop`` of idle Notebooks in ``registry``."""
    registry.register_stop(NOTEBOOK.kind, stop_notebook)
