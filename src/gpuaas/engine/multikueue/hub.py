"""What a MultiKueue pass reads of the manager: its MultiKueue checks, the workers each names,
and the workloads they apply to, each workload decoded once per change.

A stored record decodes its document anew on every read (``store.records``), and a full pass
reads every workload at least every ``idle_interval``: at 1,000 workloads the decoding was most
of a full pass, and a workload woken by a worker's watch was decoded again although nothing of
it changed on the manager. Here each workload is kept as last decoded, with the resourceVersion
it was decoded at, and decoded again only when its record changed (records are never edited in
place, so one read outside the engine lock is as good as one under it). What is kept is the
document without its ``spec`` and ``managedFields`` (the controller reads the metadata and the
status; a copy's body reads the whole document again, ``full_docs``), so the cache costs a
fraction of what the engine keeps compact. The documents are shared between passes: nothing
may change them. It reads only: no write, no remote I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuaas.core import multikueue as plan_mk
from gpuaas.engine.errors import EngineError
from gpuaas.engine.multikueue.reads import read_docs
from gpuaas.vocab import multikueue as mk
from gpuaas.vocab.kinds import BY_KIND, MULTIKUEUE_CONFIG, WORKLOAD

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine
    from gpuaas.store.records import ObjectRecord

JsonDoc = dict[str, Any]
AC_KIND = BY_KIND["AdmissionCheck"]


@dataclass(slots=True)
class Hub:
    """What a pass read of the manager: each workload's doc and its MultiKueue check."""

    workloads: dict[str, JsonDoc] = field(default_factory=dict)
    check_of: dict[str, str] = field(default_factory=dict)  # workload key -> MK check name
    clusters_of: dict[str, list[str]] = field(default_factory=dict)  # MK check -> clusters


def config_clusters(engine: Engine, ac: JsonDoc) -> tuple[str | None, list[str]]:
    """The workers a MultiKueue AdmissionCheck's config names, or why it names none."""
    params = (ac.get("spec") or {}).get("parameters")
    error = plan_mk.config_ref_error(params if isinstance(params, dict) else None)
    if error is not None:
        return error, []
    name = str(params["name"]) if isinstance(params, dict) else ""
    try:
        cfg = engine.get(MULTIKUEUE_CONFIG, None, name)
    except EngineError:
        return f'multikueueconfigs.kueue.x-k8s.io "{name}" not found', []
    return None, mk.config_clusters(cfg)


def _slim(doc: JsonDoc) -> JsonDoc:
    """The document as a pass reads it: without its spec and managedFields."""
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "managedFields"}
    return {k: v for k, v in doc.items() if k != "spec"} | {"metadata": meta}


class HubReader:
    """Reads the manager for the controller's passes, keeping each workload as last decoded."""

    def __init__(self) -> None:
        self._docs: dict[str, tuple[int, JsonDoc]] = {}  # ns/name -> (resourceVersion, slim doc)
        self.decoded = 0  # workloads decoded so far (what the cache saves is seen in tests)
        # The MultiKueue checks and their workers, with the (name, resourceVersion) of every
        # AdmissionCheck and MultiKueueConfig they were read from: read again only when one
        # of those records changed (each pass read and decoded them all, under the lock
        # twice more: a pass's largest fixed cost after its commit).
        self._checks: tuple[tuple[Any, ...], dict[str, list[str]]] = ((), {})
        self.checks_read = 0  # times the checks were read (seen in tests)
        self.walked = 0  # full passes that walked every workload (seen in tests)

    def read(self, engine: Engine, keys: set[str] | None) -> Hub:
        """The MultiKueue checks and the workloads they apply to: all (``keys`` None: a full
        pass, which also forgets workloads gone), or those of ``keys`` (one gone since is
        left to the next full pass)."""
        hub = Hub()
        versions, recs = self._records(engine, keys)
        if versions != self._checks[0]:
            self._checks = versions, self._read_checks(engine)
        hub.clusters_of = self._checks[1]
        if not hub.clusters_of:
            return hub
        for key, doc in self._workloads(recs, keys is None):
            for entry in (doc.get("status") or {}).get("admissionChecks") or []:
                if entry.get("name") in hub.clusters_of:
                    hub.workloads[key] = doc
                    hub.check_of[key] = str(entry["name"])
        return hub

    def _read_checks(self, engine: Engine) -> dict[str, list[str]]:
        """Each MultiKueue AdmissionCheck's workers (read and decoded)."""
        self.checks_read += 1
        clusters_of: dict[str, list[str]] = {}
        acs, _ = engine.list_objects(AC_KIND)
        for ac in acs:
            if (ac.get("spec") or {}).get("controllerName") == mk.CONTROLLER_NAME:
                _, clusters = config_clusters(engine, ac)
                clusters_of[str(ac["metadata"]["name"])] = clusters
        return clusters_of

    def _records(
        self, engine: Engine, keys: set[str] | None
    ) -> tuple[tuple[Any, ...], list[tuple[str, ObjectRecord]]]:
        """Under one hold of the lock: the versions of the checks and configs, and the
        workloads' records (all, or those of ``keys``). None while the checks are those of
        last read and none of them is a MultiKueue check: a server that dispatches nothing
        walked every workload each second, a few per cent of its time at 20,000 workloads."""
        known = self._checks
        recs: list[tuple[str, ObjectRecord]] = []
        with engine._lock:
            versions = tuple(
                (gk, k.name, rec.rv)
                for gk in (AC_KIND.gk, MULTIKUEUE_CONFIG.gk)
                for k, rec in engine.objects.of_kind(gk).items()
            )
            if versions == known[0] and not known[1]:
                return versions, recs
            if keys is None:
                self.walked += 1
                for k, rec in engine.objects.of_kind(WORKLOAD.gk).items():
                    recs.append((f"{k.namespace}/{k.name}", rec))
            else:
                for key in sorted(keys):
                    ns, _, name = key.partition("/")
                    found = engine.objects.get(engine.key_of(WORKLOAD, ns, name))
                    if found is not None:
                        recs.append((key, found))
        return versions, recs

    def _workloads(
        self, recs: list[tuple[str, ObjectRecord]], full: bool
    ) -> Iterable[tuple[str, JsonDoc]]:
        """Each record's slim document, decoded only when it changed since (outside the lock)."""
        if full:
            present = {key for key, _ in recs}
            for gone in [k for k in self._docs if k not in present]:
                del self._docs[gone]
        out = []
        for key, rec in recs:
            seen = self._docs.get(key)
            if seen is None or seen[0] != rec.rv:
                self.decoded += 1
                seen = (rec.rv, _slim(rec.doc))  # a Workload is shown as stored
                self._docs[key] = seen
            out.append((key, seen[1]))
        out.sort(key=lambda kd: kd[0])
        return out

    @staticmethod
    def full_docs(engine: Engine, keys: Iterable[str]) -> dict[str, JsonDoc]:
        """The whole documents of these workloads (a copy's body needs the spec)."""
        return read_docs(engine, ((WORKLOAD, key) for key in keys))


__all__ = ["AC_KIND", "Hub", "HubReader", "config_clusters"]
