"""MultiKueue's names and documents: labels, controller and dispatcher names, the two kinds.

Facts from Kueue (``apis/kueue/v1beta2/multikueue_types.go``, ``constants.go``,
``apis/config/v1beta2``): the AdmissionCheck controllerName, the labels a manager puts on what it
copies to a worker, the dispatcher names, and the shapes of ``MultiKueueConfig`` (``spec.clusters``,
at most 20) and ``MultiKueueCluster`` (v1beta1 ``spec.kubeConfig``, v1beta2
``spec.clusterSource.kubeConfig`` or ``clusterProfileRef``, exactly one). ``check_*`` raise
``ValueError`` naming the object and field. ``runs_pods_here`` says whether a manifest's pods run
on this server: not a Job a MultiKueue manager manages, nor a worker's copy of a Workload still
waiting for its Job. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JsonDoc = dict[str, Any]

CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
MANAGED_BY = CONTROLLER_NAME  # a Job's spec.managedBy when a MultiKueue manager runs it
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
PREBUILT_WORKLOAD_ANNOTATION = PREBUILT_WORKLOAD_LABEL  # the same key, as an annotation
SECRET_KEY = "kubeconfig"  # MultiKueueConfigSecretKey
DEFAULT_ORIGIN = "multikueue"
DEFAULT_NAMESPACE = "kueue-system"
DEFAULT_WORKER_LOST_TIMEOUT = 15 * 60.0
DISPATCHER_ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
INCREMENTAL_STEP = 3  # DefaultStepSize
INCREMENTAL_ROUND_SECONDS = 300.0  # incrementalDispatcherRoundTimeout
MAX_CLUSTERS = 20
LOCATION_SECRET, LOCATION_PATH = "Secret", "Path"


@dataclass(frozen=True, slots=True)
class KubeConfigRef:
    location_type: str  # Secret | Path
    location: str


def _owner(doc: JsonDoc) -> str:
    return f"{doc.get('kind')} {(doc.get('metadata') or {}).get('name')}"


def check_config(doc: JsonDoc) -> None:
    owner = _owner(doc)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{owner}: spec: required")
    clusters = spec.get("clusters")
    if not isinstance(clusters, list) or not clusters:
        raise ValueError(f"{owner}: spec.clusters: required, a list of MultiKueueCluster names")
    if len(clusters) > MAX_CLUSTERS:
        raise ValueError(f"{owner}: spec.clusters: must have at most {MAX_CLUSTERS} items")
    for i, name in enumerate(clusters):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{owner}: spec.clusters[{i}]: must be a MultiKueueCluster name")
    if len(set(clusters)) != len(clusters):
        raise ValueError(f"{owner}: spec.clusters: duplicate names")


def config_clusters(doc: JsonDoc) -> list[str]:
    clusters = (doc.get("spec") or {}).get("clusters") or []
    return [str(c) for c in clusters]


def kubeconfig_ref(doc: JsonDoc) -> KubeConfigRef | None:
    """Where a MultiKueueCluster's kubeconfig is, in either API version's shape (None:
    ``clusterProfileRef``, which gpuaas does not resolve)."""
    spec = doc.get("spec") or {}
    raw = spec.get("kubeConfig")
    if raw is None:
        raw = (spec.get("clusterSource") or {}).get("kubeConfig")
    if not isinstance(raw, dict):
        return None
    return KubeConfigRef(str(raw.get("locationType") or LOCATION_SECRET), str(raw["location"]))


def check_cluster(doc: JsonDoc) -> None:
    owner = _owner(doc)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{owner}: spec: required")
    version = str(doc.get("apiVersion", "")).rpartition("/")[2]
    if version == "v1beta1":
        raw, field = spec.get("kubeConfig"), "spec.kubeConfig"
        if raw is None:
            raise ValueError(f"{owner}: {field}: required")
    else:
        source = spec.get("clusterSource")
        if not isinstance(source, dict):
            raise ValueError(f"{owner}: spec.clusterSource: required")
        has = [k for k in ("kubeConfig", "clusterProfileRef") if source.get(k) is not None]
        if len(has) != 1:
            raise ValueError(
                f"{owner}: spec.clusterSource: exactly one of the fields in "
                "[kubeConfig clusterProfileRef] must be set"
            )
        if has[0] == "clusterProfileRef":
            ref = source["clusterProfileRef"]
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
                raise ValueError(f"{owner}: spec.clusterSource.clusterProfileRef.name: required")
            return
        raw, field = source["kubeConfig"], "spec.clusterSource.kubeConfig"
    if not isinstance(raw, dict):
        raise ValueError(f"{owner}: {field}: must be an object")
    location = raw.get("location")
    if not isinstance(location, str) or not location:
        raise ValueError(f"{owner}: {field}.location: required string")
    kind = raw.get("locationType", LOCATION_SECRET)
    if kind not in (LOCATION_SECRET, LOCATION_PATH):
        raise ValueError(
            f"{owner}: {field}.locationType: Unsupported value: {kind!r}: supported values: "
            '"Secret", "Path"'
        )


def runs_pods_here(manifest: Mapping[str, Any]) -> bool:
    """False for a Job a MultiKueue manager manages (its pods run on a worker) and for a
    worker's copy of a Workload (its pods come with the Job the manager creates next)."""
    spec = manifest.get("spec") or {}
    if isinstance(spec, dict) and spec.get("managedBy") == MANAGED_BY:
        return False
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    return not is_worker_copy(str(manifest.get("kind")), labels)


def prebuilt_workload_name(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """The Workload a job names as its own, and where it is named (``metadata.annotations[...]``
    or ``metadata.labels[...]``), or None. Kueue 0.19 reads the annotation first, then the
    label (``PrebuiltWorkloadNameFor`` with WorkloadIdentifierAnnotations, on by default since
    0.18), and its MultiKueue writes the annotation; older releases use the label."""
    annotations = meta.get("annotations") or {}
    name = annotations.get(PREBUILT_WORKLOAD_ANNOTATION)
    if isinstance(name, str) and name:
        return name, f"metadata.annotations[{PREBUILT_WORKLOAD_ANNOTATION}]"
    name = (meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL)
    if isinstance(name, str):
        return name, f"metadata.labels[{PREBUILT_WORKLOAD_LABEL}]"
    return None


def is_worker_copy(kind: str, labels: Mapping[str, Any]) -> bool:
    """Whether an object is a worker's copy of a manager's Workload: a Workload with the
    origin label. Its pods come with the Job the manager creates next, never from itself."""
    return kind == "Workload" and ORIGIN_LABEL in labels


def dispatcher_kind(name: str) -> str:
    """``AllAtOnce``, ``Incremental`` or ``External`` (any other name: another controller
    writes ``status.nominatedClusterNames``)."""
    if name == DISPATCHER_ALL_AT_ONCE:
        return "AllAtOnce"
    if name == DISPATCHER_INCREMENTAL:
        return "Incremental"
    return "External"
