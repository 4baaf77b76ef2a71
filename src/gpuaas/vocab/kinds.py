"""The API kinds gpuaas serves: group, versions, plural, scope, short names, printer columns' keys.

One table that the engine (storage keys), the HTTP routers (paths) and the CLI (short names) all
read, so that a kind is added in one place. It holds facts about names only, no behaviour, and
imports nothing from gpuaas.
"""

from __future__ import annotations

from dataclasses import dataclass

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta1", "v1beta2")
OCM_GROUP = "cluster.open-cluster-management.io"


@dataclass(slots=True, frozen=True)
class Kind:
    kind: str  # "ClusterQueue"
    group: str  # "" for the core group (Namespace)
    versions: tuple[str, ...]  # served versions, the first is preferred
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    job: bool = False  # a job kind: the engine derives a Workload from it
    stored: bool = False  # stored and served only, never given to the core

    @property
    def gk(self) -> str:
        """The storage key's first part: ``group/Kind`` (``core/Namespace`` for the core group)."""
        return f"{self.group or 'core'}/{self.kind}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    def accepts(self, api_version: str) -> bool:
        group, _, version = api_version.rpartition("/")
        if api_version in _EXTRA_API_VERSIONS.get(self.kind, ()):
            return True
        return group == self.group and version in self.versions + _EXTRA_VERSIONS.get(self.kind, ())

    def base_path(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"


# Kueue served Cohort as v1alpha1 before v1beta1; manifests in the wild still say so.
_EXTRA_VERSIONS: dict[str, tuple[str, ...]] = {"Cohort": ("v1alpha1",)}
# Open Data Hub's older dashboard profiles: accepted in a body and migrated to the infrastructure
# shape on write, as the ODH operator migrates them (the dashboard group itself is not served).
_EXTRA_API_VERSIONS: dict[str, tuple[str, ...]] = {
    "HardwareProfile": ("dashboard.opendatahub.io/v1alpha1",)
}

KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "", ("v1",), "namespaces", False, ("ns",)),
    Kind("Secret", "", ("v1",), "secrets", True, stored=True),
    Kind("ConfigMap", "", ("v1",), "configmaps", True, ("cm",), stored=True),
    Kind(
        "ResourceFlavor",
        KUEUE_GROUP,
        KUEUE_VERSIONS,
        "resourceflavors",
        False,
        ("rf", "flavor", "flavors"),
    ),
    Kind("Cohort", KUEUE_GROUP, KUEUE_VERSIONS, "cohorts", False, ("cohort", "co")),
    Kind("ClusterQueue", KUEUE_GROUP, KUEUE_VERSIONS, "clusterqueues", False, ("cq",)),
    Kind(
        "WorkloadPriorityClass",
        KUEUE_GROUP,
        KUEUE_VERSIONS,
        "workloadpriorityclasses",
        False,
        ("wpc",),
    ),
    Kind("AdmissionCheck", KUEUE_GROUP, KUEUE_VERSIONS, "admissionchecks", False),
    Kind("MultiKueueConfig", KUEUE_GROUP, KUEUE_VERSIONS, "multikueueconfigs", False, stored=True),
    Kind(
        "MultiKueueCluster", KUEUE_GROUP, KUEUE_VERSIONS, "multikueueclusters", False, stored=True
    ),
    Kind("LocalQueue", KUEUE_GROUP, KUEUE_VERSIONS, "localqueues", True, ("lq", "queue", "queues")),
    Kind("Workload", KUEUE_GROUP, KUEUE_VERSIONS, "workloads", True, ("wl", "kwl")),
    Kind("Job", "batch", ("v1",), "jobs", True, ("job",), job=True),
    Kind("RayCluster", "ray.io", ("v1",), "rayclusters", True, ("raycluster",), job=True),
    Kind("RayJob", "ray.io", ("v1",), "rayjobs", True, ("rayjob",), job=True),
    # A Kubeflow workbench: Kueue admits it as one Workload (core.manifest_notebook).
    Kind("Notebook", "kubeflow.org", ("v1", "v1beta1"), "notebooks", True, (), job=True),
    # Open Data Hub's hardware profiles: read by the profile webhook (engine.admission_hooks).
    Kind(
        "HardwareProfile",
        "infrastructure.opendatahub.io",
        ("v1", "v1alpha1"),
        "hardwareprofiles",
        True,
        stored=True,
    ),
    # Open Cluster Management's cluster API (seed 002): the placement add-on's inputs and output.
    Kind(
        "ManagedCluster", OCM_GROUP, ("v1",), "managedclusters", False, ("mcl", "mcls"), stored=True
    ),
    Kind(
        "ManagedClusterSet",
        OCM_GROUP,
        ("v1beta2",),
        "managedclustersets",
        False,
        ("mclset", "mclsets"),
        stored=True,
    ),
    Kind(
        "ManagedClusterSetBinding",
        OCM_GROUP,
        ("v1beta2",),
        "managedclustersetbindings",
        True,
        ("mclsetbinding", "mclsetbindings"),
        stored=True,
    ),
    Kind("Placement", OCM_GROUP, ("v1beta1",), "placements", True, (), stored=True),
    Kind("PlacementDecision", OCM_GROUP, ("v1beta1",), "placementdecisions", True, (), stored=True),
    Kind(
        "AddOnPlacementScore",
        OCM_GROUP,
        ("v1alpha1",),
        "addonplacementscores",
        True,
        (),
        stored=True,
    ),
    # gpuaas's own settings (hoarding rules, prices, sampling): stored, never given to the core.
    Kind(
        "GpuaasConfiguration",
        "gpuaas.dev",
        ("v1alpha1",),
        "gpuaasconfigurations",
        False,
        stored=True,
    ),
)

# Kinds made from the runtime, read only and never stored: its pods and the nodes they run on.
POD = Kind("Pod", "", ("v1",), "pods", True, ("po",))
NODE = Kind("Node", "", ("v1",), "nodes", False, ("no",))
RUNTIME_KINDS: tuple[Kind, ...] = (POD, NODE)

BY_KIND: dict[str, Kind] = {k.kind: k for k in KINDS}
WORKLOAD = BY_KIND["Workload"]
NAMESPACE = BY_KIND["Namespace"]
CONFIGURATION = BY_KIND["GpuaasConfiguration"]
NOTEBOOK = BY_KIND["Notebook"]
HARDWARE_PROFILE = BY_KIND["HardwareProfile"]
SECRET = BY_KIND["Secret"]
CONFIG_MAP = BY_KIND["ConfigMap"]
MULTIKUEUE_CONFIG = BY_KIND["MultiKueueConfig"]
MULTIKUEUE_CLUSTER = BY_KIND["MultiKueueCluster"]
MANAGED_CLUSTER = BY_KIND["ManagedCluster"]
MANAGED_CLUSTER_SET = BY_KIND["ManagedClusterSet"]
CLUSTER_SET_BINDING = BY_KIND["ManagedClusterSetBinding"]
PLACEMENT = BY_KIND["Placement"]
PLACEMENT_DECISION = BY_KIND["PlacementDecision"]
ADDON_PLACEMENT_SCORE = BY_KIND["AddOnPlacementScore"]
OCM_KINDS = (MANAGED_CLUSTER, MANAGED_CLUSTER_SET, CLUSTER_SET_BINDING, PLACEMENT,
             PLACEMENT_DECISION, ADDON_PLACEMENT_SCORE)  # fmt: skip


def lookup(name: str) -> Kind | None:
    """A kind by kind name, plural, singular or short name, case-insensitively (as kubectl);
    the runtime's read-only kinds (Pod, Node) too."""
    low = name.lower()
    for k in KINDS + RUNTIME_KINDS:
        if low in (k.kind.lower(), k.plural, *k.short_names):
            return k
    return None


def for_api_version(api_version: str, kind: str) -> Kind | None:
    k = BY_KIND.get(kind)
    return k if k is not None and k.accepts(api_version) else None
