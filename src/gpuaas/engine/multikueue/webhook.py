"""What Kueue's job webhook and job reconciler do for MultiKueue when a Job is created.

On a manager: a Job (or RayJob, RayCluster) whose LocalQueue leads to a ClusterQueue with a
MultiKueue AdmissionCheck gets ``spec.managedBy: kueue.x-k8s.io/multikueue``
(``jobframework.ApplyDefaultForManagedBy``), so the manager never runs its pods. On a worker: a Job
labelled ``kueue.x-k8s.io/prebuilt-workload-name`` uses that existing Workload (the copy the
manager sent) instead of deriving its own. gpuaas names a job's Workload after the job, so the
label must name the job itself. Functions over stored documents, called by the engine under its
lock; they never change state, only say what to do or raise ``Invalid``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuaas.engine.errors import Invalid
from gpuaas.store import ObjectKey, ObjectRecord
from gpuaas.vocab import multikueue as mk
from gpuaas.vocab.kinds import BY_KIND, WORKLOAD, Kind

JsonDoc = dict[str, Any]
_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _check_names(cq_spec: JsonDoc) -> list[str]:
    names = [str(n) for n in cq_spec.get("admissionChecks") or []]
    strategy = cq_spec.get("admissionChecksStrategy") or {}
    names += [str(r.get("name")) for r in strategy.get("admissionChecks") or []]
    return names


# (namespace, LocalQueue) -> the records the last answer was read from, and that answer. Asked on
# every job created: decoding the LocalQueue, ClusterQueue and AdmissionChecks each time was
# about 3 % of a MultiKueue hub's CPU under a burst of Jobs. A record never changes its document
# (a write makes a new one), so the answer holds while the same records are stored.
_Read = tuple[tuple[ObjectKey, ObjectRecord | None], ...]  # each record looked up, None if absent
_answers: dict[tuple[str, str], tuple[_Read, str | None]] = {}
_MAX_ANSWERS = 4096


def multikueue_check_of_queue(
    objects: Mapping[ObjectKey, ObjectRecord], namespace: str, queue: str
) -> str | None:
    """The MultiKueue AdmissionCheck of the ClusterQueue a LocalQueue points at, if any."""
    known = _answers.get((namespace, queue))
    if known is not None and all(objects.get(k) is rec for k, rec in known[0]):
        return known[1]
    read: list[tuple[ObjectKey, ObjectRecord | None]] = []

    def doc(kind: str, ns: str, name: str) -> JsonDoc:
        key = ObjectKey(BY_KIND[kind].gk, ns, name)
        rec = objects.get(key)
        read.append((key, rec))
        return rec.doc if rec is not None else {}

    found = _check_of_queue(doc, namespace, queue)
    if len(_answers) >= _MAX_ANSWERS:
        _answers.clear()
    _answers[(namespace, queue)] = (tuple(read), found)
    return found


def _check_of_queue(
    doc: Callable[[str, str, str], JsonDoc], namespace: str, queue: str
) -> str | None:
    lq = doc("LocalQueue", namespace, queue)
    cq_name = (lq.get("spec") or {}).get("clusterQueue")
    if not cq_name:
        return None
    cq = doc("ClusterQueue", "", str(cq_name))
    for name in _check_names(cq.get("spec") or {}):
        ac = doc("AdmissionCheck", "", name)
        if (ac.get("spec") or {}).get("controllerName") == mk.CONTROLLER_NAME:
            return name
    return None


def default_managed_by(
    objects: Mapping[ObjectKey, ObjectRecord], kind: Kind, namespace: str | None, doc: JsonDoc
) -> None:
    """Set ``spec.managedBy`` on a new job of a MultiKueue ClusterQueue (unless it says one)."""
    if not kind.job or namespace is None:
        return
    meta = doc.get("metadata") or {}
    labels = meta.get("labels") or {}
    queue = labels.get(_QUEUE_LABEL)
    if not isinstance(queue, str) or mk.prebuilt_workload_name(meta) is not None:
        return
    spec = doc.get("spec")
    if not isinstance(spec, dict) or spec.get("managedBy"):
        return
    if multikueue_check_of_queue(objects, namespace, queue) is not None:
        spec["managedBy"] = mk.MANAGED_BY


def prebuilt_workload(
    objects: Mapping[ObjectKey, ObjectRecord], kind: Kind, namespace: str | None, doc: JsonDoc
) -> ObjectRecord | None:
    """The existing Workload a new job names with the prebuilt label, or None when it names
    none. Raises ``Invalid`` when the named Workload is not one this job can take."""
    named = mk.prebuilt_workload_name(doc.get("metadata") or {})
    if not kind.job or named is None:
        return None
    target, field = named
    name = str(doc["metadata"]["name"])
    where = f"{kind.kind} {namespace}/{name}"
    if target != name:
        raise Invalid(
            f"{where}: {field}: must name the job itself ({name}); gpuaas names a job's "
            "Workload after its job"
        )
    rec = objects.get(ObjectKey(WORKLOAD.gk, namespace or "", name))
    if rec is None:
        raise Invalid(f"{where}: {field}: prebuilt Workload {namespace}/{name} not found")
    if rec.internal.get("owner"):
        raise Invalid(
            f"{where}: {field}: Workload {namespace}/{name} already belongs to its "
            f"{rec.internal['owner']}"
        )
    return rec


__all__ = ["default_managed_by", "multikueue_check_of_queue", "prebuilt_workload"]
