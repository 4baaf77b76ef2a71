"""OCM's placement controller in the hub: PlacementDecisions and Placement status from
``core.placement``, and what ``explain`` says about a workload's placement check.

One ``sync`` reads the hub's OCM objects (a ``Snapshot``), schedules every Placement with the pure
``core.placement.schedule`` and writes what changed, as OCM's ``schedulingController`` does: the
PlacementDecision ``<placement>-decision-1`` (label ``cluster.open-cluster-management.io/placement``,
owned by its Placement, ``status.decisions`` sorted by cluster name), redundant decisions deleted,
and the Placement's ``status`` (``numberOfSelectedClusters``, ``decisionGroups``, the
``PlacementMisconfigured`` and ``PlacementSatisfied`` conditions, OCM's reasons). It also keeps the
ManagedClusterSets ``default`` and ``global`` that an OCM hub always has. It runs on the placement
check controller's thread, never under the engine lock, and does no remote I/O.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpuaas.core import ocm
from gpuaas.core.manifest_common import ManifestError
from gpuaas.core.placement import PlacementResult, Snapshot, schedule
from gpuaas.core.state import Event
from gpuaas.engine import documents
from gpuaas.engine.errors import EngineError, Invalid
from gpuaas.engine.multikueue import writes
from gpuaas.vocab.kinds import (
    ADDON_PLACEMENT_SCORE,
    BY_KIND,
    CLUSTER_SET_BINDING,
    MANAGED_CLUSTER,
    MANAGED_CLUSTER_SET,
    PLACEMENT,
    PLACEMENT_DECISION,
    Kind,
)
from gpuaas.vocab.render import rfc3339

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]
DEFAULT_SETS: tuple[JsonDoc, ...] = (
    {"metadata": {"name": "default"}, "spec": {"clusterSelector": {
        "selectorType": "ExclusiveClusterSetLabel"}}},
    {"metadata": {"name": "global"}, "spec": {"clusterSelector": {
        "selectorType": "LabelSelector", "labelSelector": {}}}},
)  # fmt: skip


def ensure_default_sets(engine: Engine) -> None:
    """OCM's hub creates the ``default`` and ``global`` ManagedClusterSets; so does this one."""
    have = {d["metadata"]["name"] for d in engine.list_objects(MANAGED_CLUSTER_SET)[0]}
    for doc in DEFAULT_SETS:
        if doc["metadata"]["name"] not in have:
            with contextlib.suppress(EngineError):  # created meanwhile
                engine.create(MANAGED_CLUSTER_SET, None, {"apiVersion": f"{ocm.GROUP}/v1beta2",
                              "kind": "ManagedClusterSet", **doc})  # fmt: skip


def _parsed(docs: Iterable[JsonDoc], parse: Any) -> list[Any]:
    out = []
    for d in docs:
        try:
            out.append(parse(d))
        except ManifestError as exc:  # stored before a check existed: skipped, said once a pass
            log.warning("skipping %s", exc)
    return out


def snapshot(engine: Engine) -> tuple[Snapshot, list[ocm.Placement]]:
    """Every OCM object the scheduler reads, parsed, and the Placements to schedule."""
    clusters = _parsed(engine.list_objects(MANAGED_CLUSTER)[0], ocm.parse_managed_cluster)
    sets = {s.name: s for s in _parsed(engine.list_objects(MANAGED_CLUSTER_SET)[0],
                                          ocm.parse_cluster_set)}  # fmt: skip
    bindings = _parsed(engine.list_objects(CLUSTER_SET_BINDING)[0], ocm.parse_binding)
    scores = {(s.cluster, s.resource_name): s
              for s in _parsed(engine.list_objects(ADDON_PLACEMENT_SCORE)[0], ocm.parse_score)}  # fmt: skip
    decided: dict[tuple[str, str], tuple[str, ...]] = {}
    for d in engine.list_objects(PLACEMENT_DECISION)[0]:
        meta = d["metadata"]
        owner = (meta.get("labels") or {}).get(ocm.PLACEMENT_LABEL)
        if owner:
            key = (str(meta.get("namespace")), str(owner))
            try:
                decided[key] = decided.get(key, ()) + tuple(ocm.decision_clusters(d))
            except ManifestError:
                continue
    placements = _parsed(engine.list_objects(PLACEMENT)[0], ocm.parse_placement)
    return Snapshot(clusters, sets, bindings, scores, decided), placements


def decisions_of(engine: Engine, namespace: str, name: str) -> list[str] | None:
    """The clusters a Placement's PlacementDecisions list (None: the Placement does not exist)."""
    try:
        engine.get(PLACEMENT, namespace, name)
    except EngineError:
        return None
    out: list[str] = []
    for d in engine.list_objects(PLACEMENT_DECISION, {namespace})[0]:
        if (d["metadata"].get("labels") or {}).get(ocm.PLACEMENT_LABEL) == name:
            out.extend(c["clusterName"] for c in (d.get("status") or {}).get("decisions") or [])
    return sorted(set(out))


def _condition(old: JsonDoc | None, type_: str, status: bool, reason: str, message: str,
               now: float, generation: int) -> JsonDoc:  # fmt: skip
    prev = next((c for c in ((old or {}).get("conditions") or []) if c.get("type") == type_), None)
    value = "True" if status else "False"
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == value else None
    return {"type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": since or rfc3339(now), "observedGeneration": generation}  # fmt: skip


def _write_decision(engine: Engine, p: ocm.Placement, doc: JsonDoc, result: PlacementResult,
                    now: float) -> bool:  # fmt: skip
    """PlacementDecision ``<name>-decision-1``; True when its decisions changed."""
    name = f"{p.name}-decision-1"
    want = [{"clusterName": c, "reason": ""} for c in sorted(result.decisions)]
    try:
        old = engine.get(PLACEMENT_DECISION, p.namespace, name)
    except EngineError:
        owner = {"apiVersion": f"{ocm.GROUP}/v1beta1", "kind": "Placement", "name": p.name,
                 "uid": doc["metadata"].get("uid", ""), "controller": True,
                 "blockOwnerDeletion": True}  # fmt: skip
        old = engine.create(PLACEMENT_DECISION, p.namespace, {
            "apiVersion": f"{ocm.GROUP}/v1beta1", "kind": "PlacementDecision",
            "metadata": {"name": name, "namespace": p.namespace,
                         "labels": {ocm.PLACEMENT_LABEL: p.name,
                                    "cluster.open-cluster-management.io/decision-group-index": "0"},
                         "ownerReferences": [owner]}})  # fmt: skip
    if "status" in old and (old["status"] or {}).get("decisions") == want:
        return False
    writes.write_status(engine, PLACEMENT_DECISION, p.namespace, name, {"decisions": want})
    return True


def _write_placement_status(engine: Engine, p: ocm.Placement, doc: JsonDoc,
                            result: PlacementResult, now: float) -> None:  # fmt: skip
    old = doc.get("status")
    gen = int(doc["metadata"].get("generation", 1))
    mis = result.misconfigured
    status = {
        "numberOfSelectedClusters": len(result.decisions),
        "decisionGroups": [{"decisionGroupIndex": 0, "decisionGroupName": "",
                            "decisions": [f"{p.name}-decision-1"],
                            "clustersCount": len(result.decisions)}],
        "conditions": [
            _condition(old, "PlacementMisconfigured", bool(mis), "Misconfigured" if mis
                       else "Succeedconfigured", mis or "Placement configurations check pass",
                       now, gen),
            _condition(old, "PlacementSatisfied", result.satisfied, result.reason, result.message,
                       now, gen),
        ],
    }  # fmt: skip
    writes.write_status(engine, PLACEMENT, p.namespace, p.name, status)


def _write_set_status(engine: Engine, snap: Snapshot, now: float) -> None:
    """Each ManagedClusterSet's ``ClusterSetEmpty`` condition, as OCM's clusterset controller."""
    for name, cs in snap.sets.items():
        try:
            doc = engine.get(MANAGED_CLUSTER_SET, None, name)
        except EngineError:
            continue
        n = sum(1 for c in snap.clusters if cs.has(c))
        reason, message = ("ClustersSelected", f"{n} ManagedClusters selected") if n else (
            "NoClusterMatched", "No ManagedCluster selected")  # fmt: skip
        gen = int(doc["metadata"].get("generation", 1))
        cond = _condition(doc.get("status"), "ClusterSetEmpty", not n, reason, message, now, gen)
        writes.write_status(engine, MANAGED_CLUSTER_SET, None, name, {"conditions": [cond]})


def sync(engine: Engine, now: float) -> bool:
    """Schedule every Placement once; True when some PlacementDecision changed."""
    snap, placements = snapshot(engine)
    _write_set_status(engine, snap, now)
    changed = False
    for p in placements:
        try:
            doc = engine.get(PLACEMENT, p.namespace, p.name)
        except EngineError:
            continue
        result = schedule(p, snap, now)
        if _write_decision(engine, p, doc, result, now):
            changed = True
            scores = " ".join(f"{c}:{result.scores.get(c, 0)}" for c in sorted(result.scores))
            engine.record_event(Event(now, "Normal", "DecisionUpdate",
                                      f"Placement {p.namespace}/{p.name}",
                                      f"Decision {p.name}-decision-1 is updated with placement "
                                      f"{p.name} in namespace {p.namespace}: "
                                      f"[{', '.join(sorted(result.decisions))}]; scores {scores}"))  # fmt: skip
        _write_placement_status(engine, p, doc, result, now)
    for d in engine.list_objects(PLACEMENT_DECISION)[0]:  # decisions whose Placement is gone
        meta = d["metadata"]
        owner = (meta.get("labels") or {}).get(ocm.PLACEMENT_LABEL)
        if owner and not any(p.namespace == meta["namespace"] and p.name == owner
                             for p in placements):  # fmt: skip
            try:
                engine.delete(PLACEMENT_DECISION, meta["namespace"], meta["name"])
                changed = True
            except EngineError:
                pass
    return changed


def explain(engine: Engine, namespace: str, name: str, now: float) -> JsonDoc:
    """Where a Placement stands: its chosen clusters, each cluster's score, and why each other
    cluster was not chosen (the scheduler run again on the hub's current objects)."""
    snap, placements = snapshot(engine)
    p = next((p for p in placements if (p.namespace, p.name) == (namespace, name)), None)
    if p is None:
        return {"placement": f"{namespace}/{name}", "found": False}
    result = schedule(p, snap, now)
    return {
        "placement": f"{namespace}/{name}",
        "found": True,
        "decisions": list(result.decisions),
        "reason": result.reason,
        "message": result.message,
        "scores": dict(sorted(result.scores.items())),
        "excluded": dict(sorted(result.excluded.items())),
    }


ADDON_NOTE = (
    "The OCM add-on never sets this check on a Workload, so it stays Pending: on the hub the "
    "workload reserves quota, MultiKueue dispatches it to a worker of the MultiKueueConfig this "
    "Placement keeps, it runs and finishes there, and it is never Admitted here (as Kueue does "
    "with the add-on)."
)


def explain_checks(engine: Engine, info: JsonDoc, namespace: str, now: float) -> list[JsonDoc]:
    """For ``explain``: each ``open-cluster-management.io/placement`` check of the workload's
    ClusterQueue, with its Placement's decision and why each other cluster was not chosen."""
    cq = info.get("clusterQueue")
    if not cq:
        return []
    try:
        spec = engine.get(BY_KIND["ClusterQueue"], None, str(cq)).get("spec") or {}
    except EngineError:
        return []
    names = [str(n) for n in spec.get("admissionChecks") or []]
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    names += [str(c.get("name")) for c in strategy if isinstance(c, dict)]
    out = []
    for name in names:
        try:
            ac = engine.get(BY_KIND["AdmissionCheck"], None, name)
        except EngineError:
            continue
        if (ac.get("spec") or {}).get("controllerName") != "open-cluster-management.io/placement":
            continue
        placement = str(((ac.get("spec") or {}).get("parameters") or {}).get("name") or "")
        out.append({"check": name, **explain(engine, namespace, placement, now),
                    "note": ADDON_NOTE})  # fmt: skip
    return out


def update_status(engine: Engine, kind: Kind, namespace: str | None, name: str, body: Any,
                  *, merge: bool) -> JsonDoc:  # fmt: skip
    """An OCM object's ``status`` subresource written from outside (an add-on's agent writing its
    AddOnPlacementScore, a klusterlet's ManagedCluster status): replaced, or merge-patched,
    checked as the object is, then stored; the spec is left as it is."""
    old = engine.get(kind, namespace, name)
    where = f"{kind.kind} {namespace + '/' if namespace else ''}{name}"
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict):
        raise Invalid(f"{where}: status: required, an object")
    if merge:
        status = documents.merge_patch(copy.deepcopy(old.get("status") or {}), status)
    try:
        ocm.check({**old, "status": status})
    except ManifestError as exc:
        raise Invalid(str(exc)) from exc
    writes.write_status(engine, kind, namespace, name, status)
    return engine.get(kind, namespace, name)
