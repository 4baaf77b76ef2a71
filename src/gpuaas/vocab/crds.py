"""What Kubernetes tools see of each served kind: schema, printer columns, short names, categories.

Kueue's kinds take all of it from Kueue's own CRDs, vendored unchanged in ``kueue_crds/`` (the
README there names the Kueue commit). The other kinds (Namespace and Job from Kubernetes,
KubeRay's RayCluster and RayJob, gpuaas's configuration) are described here by hand, as
kube-apiserver and their CRDs describe them; their schemas keep unknown fields (gpuaas does not
vendor Kubernetes' own OpenAPI). The files are read once, lazily (the Workload CRD is 1.4 MB).
Pure data: reads package files, nothing else.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from gpuaas.vocab.kinds import KINDS, KUEUE_GROUP, RUNTIME_KINDS, Kind

JsonDoc = dict[str, Any]

# kube-apiserver's verbs for a resource gpuaas serves fully (deletecollection is not served).
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
READ_ONLY_VERBS = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True, slots=True)
class Resource:
    """A served kind as discovery and OpenAPI describe it."""

    kind: Kind
    singular: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    status: bool  # has a /status subresource

    def columns(self, version: str) -> tuple[PrinterColumn, ...]:
        """The CRD's ``additionalPrinterColumns`` (Age when it declares none), or () for a kind
        kube-apiserver prints with its own printer (Namespace, Job: ``api.tables``)."""
        crd = _crd_version(self.kind, version)
        if crd is None:
            if self.kind.kind in _HAND_COLUMNS:
                return _HAND_COLUMNS[self.kind.kind]
            return _AGE if self.kind.group not in ("", "batch") else ()
        cols = crd.get("additionalPrinterColumns") or []
        if not cols:
            return _AGE
        return tuple(
            PrinterColumn(
                c["name"],
                c["type"],
                c["jsonPath"],
                c.get("description", ""),
                int(c.get("priority", 0)),
                c.get("format", ""),
            )
            for c in cols
        )

    def schema(self, version: str) -> JsonDoc:
        """The ``openAPIV3Schema`` of ``version``; kinds without a vendored CRD keep unknown
        fields under ``spec`` and ``status``."""
        crd = _crd_version(self.kind, version)
        if crd is not None:
            return dict(crd["schema"]["openAPIV3Schema"])
        loose: JsonDoc = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        properties: JsonDoc = {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
        }
        strings = {"type": "object", "additionalProperties": {"type": "string"}}
        if self.kind.kind == "Secret":  # top-level fields, as core/v1 declares them
            properties |= {"data": strings, "stringData": strings, "type": {"type": "string"},
                           "immutable": {"type": "boolean"}}  # fmt: skip
        elif self.kind.kind == "ConfigMap":
            properties |= {"data": strings, "binaryData": strings,
                           "immutable": {"type": "boolean"}}  # fmt: skip
        else:
            properties |= {"spec": loose, "status": loose}
        return {
            "type": "object",
            "description": f"{self.kind.kind} ({self.kind.group or 'core'}), as gpuaas stores it.",
            "properties": properties,
        }


_AGE = (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)

# KubeRay's RayCluster and RayJob printer columns (its CRD's additionalPrinterColumns, ray.io/v1).
_HAND_COLUMNS: dict[str, tuple[PrinterColumn, ...]] = {
    "RayCluster": (
        PrinterColumn("desired workers", "integer", ".status.desiredWorkerReplicas"),
        PrinterColumn("available workers", "integer", ".status.availableWorkerReplicas"),
        PrinterColumn("cpus", "string", ".status.desiredCPU"),
        PrinterColumn("memory", "string", ".status.desiredMemory"),
        PrinterColumn("gpus", "string", ".status.desiredGPU"),
        PrinterColumn("tpus", "string", ".status.desiredTPU", priority=1),
        PrinterColumn("status", "string", ".status.state"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
        PrinterColumn("head pod IP", "string", ".status.head.podIP", priority=1),
        PrinterColumn("head service IP", "string", ".status.head.serviceIP", priority=1),
    ),
    # KubeRay's RayJob columns that gpuaas fills (no rayClusterName, startTime, endTime yet)
    "RayJob": (
        PrinterColumn("job status", "string", ".status.jobStatus"),
        PrinterColumn("deployment status", "string", ".status.jobDeploymentStatus"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
    ),
}

# Open Cluster Management's CRDs' printer columns (open-cluster-management-io/api; its
# double-quoted filters written single-quoted, as the Table's jsonpath reads them).
_SATISFIED = ".status.conditions[?(@.type=='PlacementSatisfied')]"
_HAND_COLUMNS |= {
    "ManagedCluster": (
        PrinterColumn("Hub Accepted", "boolean", ".spec.hubAcceptsClient"),
        PrinterColumn("Managed Cluster URLs", "string", ".spec.managedClusterClientConfigs[*].url"),
        PrinterColumn(
            "Joined", "string", ".status.conditions[?(@.type=='ManagedClusterJoined')].status"
        ),
        PrinterColumn(
            "Available",
            "string",
            ".status.conditions[?(@.type=='ManagedClusterConditionAvailable')].status",
        ),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
    ),
    "ManagedClusterSet": (
        PrinterColumn("Empty", "string", ".status.conditions[?(@.type=='ClusterSetEmpty')].status"),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
    ),
    "Placement": (
        PrinterColumn("Succeeded", "string", f"{_SATISFIED}.status"),
        PrinterColumn("Reason", "string", f"{_SATISFIED}.reason"),
        PrinterColumn("SelectedClusters", "integer", ".status.numberOfSelectedClusters"),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
    ),
}

# Kinds with no vendored CRD: (singular, short names, categories, has status), as
# kube-apiserver (Namespace, Secret, ConfigMap, Job) and KubeRay's CRDs (RayCluster, RayJob) declare them.
_BUILT_IN: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], bool]] = {
    "Namespace": ("namespace", ("ns",), (), True),
    "Secret": ("secret", (), (), False),
    "ConfigMap": ("configmap", ("cm",), (), False),
    "Job": ("job", (), ("all",), True),
    "RayCluster": ("raycluster", (), ("all",), True),
    "RayJob": ("rayjob", (), ("all",), True),
    "Notebook": ("notebook", (), (), True),
    "HardwareProfile": ("hardwareprofile", (), (), True),
    "GpuaasConfiguration": ("gpuaasconfiguration", (), (), False),
    "ManagedCluster": ("managedcluster", ("mcl", "mcls"), ("cluster-management",), True),
    "ManagedClusterSet": (
        "managedclusterset",
        ("mclset", "mclsets"),
        ("cluster-management",),
        True,
    ),
    "ManagedClusterSetBinding": (
        "managedclustersetbinding",
        ("mclsetbinding", "mclsetbindings"),
        ("cluster-management",),
        True,
    ),
    "Placement": ("placement", (), (), True),
    "PlacementDecision": ("placementdecision", (), (), True),
    "AddOnPlacementScore": ("addonplacementscore", (), (), True),
    "Pod": ("pod", ("po",), ("all",), True),
    "Node": ("node", ("no",), (), True),
}


# Short names served beside the CRD's. Kueue's Workload CRD named itself ``wl`` until Kueue 0.16,
# which kept only ``kwl``/``kueueworkload`` so as not to shadow Kubernetes' in-tree Workload
# (``scheduling.k8s.io``, 1.35 alpha: kubernetes-sigs/kueue#8113, #8472). gpuaas speaks
# Kubernetes 1.32 and serves no in-tree Workload, so ``wl`` is unambiguous here and still in every
# Kueue user's fingers (``kubectl get wl -A``): it is served after the CRD's own.
EXTRA_SHORT_NAMES: dict[str, tuple[str, ...]] = {"Workload": ("wl",)}


@functools.cache
def _crd(kind: str) -> JsonDoc | None:
    k = next(k for k in KINDS + RUNTIME_KINDS if k.kind == kind)
    if k.group != KUEUE_GROUP:
        return None
    path = resources.files("gpuaas.vocab").joinpath(f"kueue_crds/{k.group}_{k.plural}.yaml")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc: JsonDoc = yaml.load(path.read_text(), Loader=loader)
    return doc


def _crd_version(kind: Kind, version: str) -> JsonDoc | None:
    crd = _crd(kind.kind)
    if crd is None:
        return None
    versions = crd["spec"]["versions"]
    for v in versions:
        if v["name"] == version:
            return dict(v)
    return dict(versions[0])  # v1alpha1 Cohort: read as v1beta1


@functools.cache
def resource(kind: Kind) -> Resource:
    crd = _crd(kind.kind)
    if crd is None:
        singular, short, categories, status = _BUILT_IN[kind.kind]
        return Resource(kind, singular, short, categories, status)
    names = crd["spec"]["names"]
    status = any("status" in (v.get("subresources") or {}) for v in crd["spec"]["versions"])
    return Resource(
        kind,
        names.get("singular", kind.kind.lower()),
        tuple(names.get("shortNames") or ()) + EXTRA_SHORT_NAMES.get(kind.kind, ()),
        tuple(names.get("categories") or ()),
        status,
    )


def resources_of(group: str, version: str) -> list[Resource]:
    """The served resources of one group/version, in the kinds table's order."""
    return [resource(k) for k in KINDS if k.group == group and version in _served(k)]


def _served(kind: Kind) -> tuple[str, ...]:
    return kind.versions + (("v1alpha1",) if kind.kind == "Cohort" else ())


def group_versions() -> dict[str, tuple[str, ...]]:
    """Each served group (``""`` for core) and its versions, the preferred one first."""
    out: dict[str, tuple[str, ...]] = {}
    for k in KINDS:
        seen = out.get(k.group, ())
        out[k.group] = seen + tuple(v for v in _served(k) if v not in seen)
    return out
