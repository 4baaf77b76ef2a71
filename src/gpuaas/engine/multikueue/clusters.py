"""The MultiKueueClusters as the hub sees them: where each one's kubeconfig is, and the Active
conditions of the clusters and of the MultiKueue AdmissionChecks, written from what the
workers' watches say (Kueue's ``MultiKueueCluster`` reconciler and ``ACReconciler``). The
controller calls these on its full passes; they read and write the hub only, never a worker.
"""

from __future__ import annotations

import base64
import binascii
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaas.core import multikueue as plan_mk
from gpuaas.engine.errors import EngineError
from gpuaas.engine.multikueue import writes
from gpuaas.engine.multikueue.hub import AC_KIND, config_clusters
from gpuaas.engine.multikueue.remote import KubeConfigError
from gpuaas.engine.multikueue.workers import WorkerView
from gpuaas.vocab import multikueue as mk
from gpuaas.vocab.kinds import MULTIKUEUE_CLUSTER, SECRET
from gpuaas.vocab.render import rfc3339

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]


def _cond(doc: JsonDoc, type_: str) -> JsonDoc | None:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def kubeconfig(engine: Engine, doc: JsonDoc, namespace: str) -> bytes:
    """A MultiKueueCluster's kubeconfig, from its Secret in ``namespace`` or its path;
    ``KubeConfigError`` (the Active condition's reason and message) when it has none."""
    ref = mk.kubeconfig_ref(doc)
    if ref is None:
        raise KubeConfigError(
            "MultiKueueClusterProfileFeatureDisabled",
            "clusterProfileRef is not supported by gpuaas",
        )
    if ref.location_type == mk.LOCATION_PATH:
        try:
            return Path(ref.location).read_bytes()
        except OSError as exc:
            raise KubeConfigError("BadKubeConfig", str(exc)) from None
    try:
        secret = engine.get(SECRET, namespace, ref.location)
    except EngineError:
        raise KubeConfigError("BadKubeConfig", f'secrets "{ref.location}" not found') from None
    value = (secret.get("data") or {}).get(mk.SECRET_KEY)
    if value is None:
        raise KubeConfigError(
            "BadKubeConfig", f'key "{mk.SECRET_KEY}" not found in secret "{ref.location}"'
        )
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise KubeConfigError("BadKubeConfig", "kubeconfig: bad base64") from None


def write_cluster_status(engine: Engine, views: dict[str, WorkerView], now: float) -> None:
    """Each MultiKueueCluster's Active condition where it changed, then the checks'."""
    for w in views.values():
        try:
            doc = engine.get(MULTIKUEUE_CLUSTER, None, w.name)
        except EngineError:
            continue
        old = _cond(doc, "Active")
        status = "True" if w.active else "False"
        message = w.message
        seen = (old.get("status"), old.get("reason"), old.get("message")) if old else None
        if seen == (status, w.reason, message):
            continue
        cond = {
            "type": "Active",
            "status": status,
            "reason": w.reason,
            "message": message,
            "lastTransitionTime": rfc3339(now)
            if old is None or old.get("status") != status
            else old.get("lastTransitionTime"),
            "observedGeneration": doc["metadata"].get("generation", 1),
        }
        writes.write_status(engine, MULTIKUEUE_CLUSTER, None, w.name, {"conditions": [cond]})
    write_check_active(engine, views, now)


def write_check_active(engine: Engine, views: dict[str, WorkerView], now: float) -> None:
    """Kueue's ACReconciler: each MultiKueue AdmissionCheck's Active condition."""
    acs, _ = engine.list_objects(AC_KIND)
    for ac in acs:
        if (ac.get("spec") or {}).get("controllerName") != mk.CONTROLLER_NAME:
            continue
        error, clusters = config_clusters(engine, ac)
        active = {w.name: w.active for w in views.values()}
        status, reason, message = plan_mk.admission_check_active(error, clusters, active)
        cond = {
            "type": "Active",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(now),
            "observedGeneration": ac["metadata"].get("generation", 1),
        }
        try:
            writes.write_admission_check_active(engine, str(ac["metadata"]["name"]), cond)
        except EngineError as exc:
            log.warning("AdmissionCheck %s: %s", ac["metadata"]["name"], exc)


__all__ = ["kubeconfig", "write_check_active", "write_cluster_status"]
