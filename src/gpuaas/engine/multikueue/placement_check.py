"""The OCM kueue-addon's admission check controller (``open-cluster-management.io/placement``).

As the add-on's ``admissioncheck`` controller (addon-contrib ``kueue-addon/pkg/hub/controllers``):
for each AdmissionCheck with this controllerName it adds the finalizer
``kueue-addon.open-cluster-management.io/admissioncheck-cleanup``, reads the Placement named by
``parameters.name`` in Kueue's namespace only (the add-on's ``KUEUE_NAMESPACE``: the server's
``--multikueue-namespace``), and keeps the MultiKueueConfig of the same name listing the
Placement's decided clusters (deleted when there are none), with the check's ``Active``
condition and the add-on's reasons (``Active``; ``PlacementNotFound``, ``NoClustersAvailable``,
``MultiKueueConfigError``, ``MultiKueueConfigDeleteError``). On the check's deletion it deletes
the MultiKueueConfig and removes its finalizer. It never sets a Workload's state for its check,
as the add-on never does: on the hub a workload of a ClusterQueue listing both checks reserves
quota, is dispatched by MultiKueue, runs and finishes on a worker, and stays not Admitted there
(its placement check Pending), as Kueue does with the add-on.

Its thread also runs the placement scheduler (``placements.sync``) and, when given, the score
collector (``scores.ScoreCollector``: every pass while a Placement exists, else every 10 s), so
a change of labels, scores or workers reaches the MultiKueueConfig within one pass (``interval``
seconds, or at once when woken). A pass with no Placement and nothing it reads changed since the
last (``versions``) does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gpuaas.engine.errors import EngineError
from gpuaas.engine.multikueue import placements, writes
from gpuaas.engine.views import WorkloadView
from gpuaas.vocab.kinds import (
    ADDON_PLACEMENT_SCORE,
    BY_KIND,
    CLUSTER_SET_BINDING,
    MANAGED_CLUSTER,
    MANAGED_CLUSTER_SET,
    MULTIKUEUE_CONFIG,
    PLACEMENT,
    PLACEMENT_DECISION,
)
from gpuaas.vocab.multikueue import DEFAULT_NAMESPACE
from gpuaas.vocab.render import rfc3339

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]
AC_KIND = BY_KIND["AdmissionCheck"]
CONTROLLER_NAME = "open-cluster-management.io/placement"
FINALIZER = "kueue-addon.open-cluster-management.io/admissioncheck-cleanup"
IDLE_COLLECT = 10.0  # seconds between score readings while no Placement exists


Versions = tuple[tuple[tuple[Any, int], ...], ...]
# What a pass reads: Placements first (a pass with one is never skipped: scheduling reads the
# clock), then the rest of what ``placements.sync`` and ``_reconcile`` read.
_READ = (PLACEMENT, MANAGED_CLUSTER, MANAGED_CLUSTER_SET, CLUSTER_SET_BINDING,
         ADDON_PLACEMENT_SCORE, PLACEMENT_DECISION, AC_KIND, MULTIKUEUE_CONFIG)  # fmt: skip


def versions(engine: Engine) -> Versions:
    """The key and resourceVersion of every object a pass reads, under one hold of the engine
    lock, where reading them all (listed, decoded, and each set's status compared) was most of
    a pass, twice a second on a hub busy with workloads and none of these changing."""
    with engine._lock:
        return tuple(
            tuple((key, r.rv) for key, r in engine.objects.of_kind(kind.gk).items())
            for kind in _READ
        )


class Collector(Protocol):
    """What refreshes AddOnPlacementScores before a pass (``scores.ScoreCollector``)."""

    def collect(self, engine: Engine, now: float) -> bool: ...

    def close(self) -> None: ...


class PlacementCheckController:
    """The ``CheckController`` for ``open-cluster-management.io/placement``."""

    sets_active = True  # Active comes from the Placement's decisions

    def __init__(
        self,
        namespace: str = DEFAULT_NAMESPACE,
        interval: float = 0.5,
        collector: Collector | None = None,
    ) -> None:
        self.namespace = namespace
        self.interval = interval
        self.collector = collector
        self.engine: Engine | None = None
        self.clock: Callable[[], float] = time.time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._collected = float("-inf")  # when the collector last ran
        self._seen: Versions | None = None  # what the last pass read (``versions``)

    # -- CheckController ------------------------------------------------------------------------
    def on_reserved(self, engine: Engine, workload: WorkloadView, check: str, now: float) -> None:
        """The add-on never answers for a workload: its check stays Pending (see the module)."""
        return None

    def start(self, engine: Engine) -> None:
        self.engine = engine
        engine.placement_namespace = self.namespace  # explain reads its Placements there
        placements.ensure_default_sets(engine)
        self._thread = threading.Thread(target=self._loop, name="ocm-placement", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.collector is not None:
            self.collector.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            try:
                self.sync_once()
            except Exception:  # keep going: the next pass reads everything again
                log.exception("placement pass failed")

    # -- one pass ---------------------------------------------------------------------------------
    def sync_once(self) -> None:
        engine = self.engine
        assert engine is not None
        now = self.clock()
        # Scores are read on every pass while a Placement may use them, else every IDLE_COLLECT
        # seconds (the dashboard's view): a hub without Placements does not poll its workers.
        seen = versions(engine)
        busy = bool(seen[0])
        if self.collector is not None and (busy or now - self._collected >= IDLE_COLLECT):
            self._collected = now
            if self.collector.collect(engine, now):
                seen = versions(engine)
        if not busy and seen == self._seen:
            return  # nothing it reads changed, and without a Placement the clock moves nothing
        self._seen = None  # until this pass is done: one that fails is not skipped next time
        placements.sync(engine, now)
        for ac in engine.list_objects(AC_KIND)[0]:
            if (ac.get("spec") or {}).get("controllerName") == CONTROLLER_NAME:
                self._reconcile(engine, ac, now)
        # Read before the pass: its own writes change them, so the next pass runs once more
        # (and writes nothing), and a change made by another meanwhile is never taken as seen.
        self._seen = seen

    def _reconcile(self, engine: Engine, ac: JsonDoc, now: float) -> None:
        name = str(ac["metadata"]["name"])
        finalizers = list(ac["metadata"].get("finalizers") or [])
        params = (ac.get("spec") or {}).get("parameters") or {}
        placement = str(params.get("name") or "")
        if ac["metadata"].get("deletionTimestamp"):
            if FINALIZER in finalizers:
                self._delete_config(engine, placement)
                self._set_finalizer(engine, name, add=False)
            return
        if FINALIZER not in finalizers:
            self._set_finalizer(engine, name, add=True)
        clusters = placements.decisions_of(engine, self.namespace, placement)
        if clusters is None:
            self._active(engine, name, False, "PlacementNotFound",
                         f"Placement {placement} not found", now)  # fmt: skip
            return
        if not clusters:
            if not self._delete_config(engine, placement):
                self._active(engine, name, False, "MultiKueueConfigDeleteError",
                             f"Failed to delete multi kueue config {placement}", now)  # fmt: skip
                return
            self._active(engine, name, False, "NoClustersAvailable",
                         f"No clusters available for placement {placement}", now)  # fmt: skip
            return
        try:
            self._put_config(engine, placement, clusters)
        except EngineError as exc:
            self._active(engine, name, False, "MultiKueueConfigError",
                         f"Failed to create/update multi kueue config {placement}: {exc}", now)  # fmt: skip
            return
        self._active(engine, name, True, "Active",
                     f"MultiKueueConfig {placement} is generated successfully", now)  # fmt: skip

    def _put_config(self, engine: Engine, name: str, clusters: list[str]) -> None:
        def compute(old: JsonDoc | None) -> JsonDoc:
            doc = old or {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
                          "metadata": {"name": name}}  # fmt: skip
            doc["spec"] = {**(doc.get("spec") or {}), "clusters": clusters}
            return doc

        try:
            current = engine.get(MULTIKUEUE_CONFIG, None, name)
            if (current.get("spec") or {}).get("clusters") == clusters:
                return
        except EngineError:
            pass
        engine.write(MULTIKUEUE_CONFIG, None, name, compute, create_missing=True)

    def _delete_config(self, engine: Engine, name: str) -> bool:
        try:
            engine.get(MULTIKUEUE_CONFIG, None, name)
        except EngineError:
            return True
        try:
            engine.delete(MULTIKUEUE_CONFIG, None, name)
        except EngineError as exc:
            log.warning("deleting MultiKueueConfig %s: %s", name, exc)
            return False
        return True

    def _set_finalizer(self, engine: Engine, name: str, *, add: bool) -> None:
        def compute(old: JsonDoc | None) -> JsonDoc:
            assert old is not None
            have = [f for f in old["metadata"].get("finalizers") or [] if f != FINALIZER]
            old["metadata"]["finalizers"] = [*have, FINALIZER] if add else have
            return old

        try:
            engine.write(AC_KIND, None, name, compute)
        except EngineError as exc:
            log.warning("AdmissionCheck %s: finalizer: %s", name, exc)

    def _active(self, engine: Engine, name: str, ok: bool, reason: str, message: str,
                now: float) -> None:  # fmt: skip
        writes.write_admission_check_active(engine, name, {
            "type": "Active", "status": "True" if ok else "False", "reason": reason,
            "message": message, "lastTransitionTime": rfc3339(now)})  # fmt: skip
