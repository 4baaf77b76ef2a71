"""Which queue a job lands in: Kueue's LocalQueueDefaulting and RHOAI's Kueue-managed namespaces.

Two admission rules run, in Kubernetes' order (mutating webhooks before validating ones):

1. Kueue's ``LocalQueueDefaulting`` (beta, on by default since Kueue 0.12;
   ``jobframework.ApplyDefaultLocalQueue``): a job with no ``kueue.x-k8s.io/queue-name`` label in a
   namespace that has a LocalQueue named ``default`` gets ``queue-name: default``.
2. RHOAI's Kueue label validator (opendatahub-operator v3.0.0,
   ``internal/webhook/kueue/validating.go``): in a namespace labelled
   ``kueue.openshift.io/managed=true`` (or the legacy ``kueue-managed=true``) a Notebook, RayJob or
   RayCluster (PyTorchJob and InferenceServices too, kinds gpuaas does not serve) without that
   label, or with it empty, is denied: ``Kueue label validation failed: missing required label
   "kueue.x-k8s.io/queue-name"``. So with no ``default`` LocalQueue such a workbench is refused,
   never held. (RHOAI's operator also creates that ``default`` LocalQueue in managed namespaces
   when its Kueue component names one; gpuaas does not create it: the admin does.)

Pure functions over documents; the caller says which labels the namespace has and whether the
``default`` LocalQueue exists.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gpuaas.core.manifest_common import ManifestError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
DEFAULT_LOCAL_QUEUE = "default"
MANAGED_LABEL = "kueue.openshift.io/managed"
LEGACY_MANAGED_LABEL = "kueue-managed"
JOB_KINDS = frozenset({"Job", "RayCluster", "RayJob", "Notebook"})
VALIDATED_KINDS = frozenset({"Notebook", "RayJob", "RayCluster"})


def is_managed(namespace_labels: Mapping[str, str]) -> bool:
    return (
        namespace_labels.get(MANAGED_LABEL) == "true"
        or namespace_labels.get(LEGACY_MANAGED_LABEL) == "true"
    )


def _labels(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = doc.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def default_local_queue(doc: Mapping[str, Any], default_queue_exists: bool) -> dict[str, Any]:
    """Kueue's LocalQueueDefaulting for a job kind: ``doc``, labelled ``default`` if it names no
    queue and that LocalQueue exists (else unchanged)."""
    out = dict(doc)
    if doc.get("kind") not in JOB_KINDS or not default_queue_exists:
        return out
    if _labels(doc).get(QUEUE_LABEL):
        return out
    out = copy.deepcopy(out)
    meta = out.setdefault("metadata", {})
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels[QUEUE_LABEL] = DEFAULT_LOCAL_QUEUE
    return out


def check_queue_label(doc: Mapping[str, Any], namespace_labels: Mapping[str, str]) -> None:
    """RHOAI's validator: raise ``ManifestError`` (its wording) when a managed namespace's
    workbench or Ray job names no LocalQueue."""
    kind = str(doc.get("kind", ""))
    if kind not in VALIDATED_KINDS or not is_managed(namespace_labels):
        return
    labels = _labels(doc)
    if QUEUE_LABEL not in labels:
        problem = f'missing required label "{QUEUE_LABEL}"'
    elif not labels[QUEUE_LABEL]:
        problem = f'label "{QUEUE_LABEL}" is set but empty'
    else:
        return
    meta = doc.get("metadata") or {}
    raise ManifestError(
        kind,
        meta.get("namespace"),
        meta.get("name"),
        f"metadata.labels[{QUEUE_LABEL}]",
        f"Kueue label validation failed: {problem} (namespace is labelled "
        f"{MANAGED_LABEL}=true; create a LocalQueue named {DEFAULT_LOCAL_QUEUE!r} there "
        "or name one)",
    )
