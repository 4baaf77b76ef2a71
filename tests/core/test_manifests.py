"""Manifests to core objects (gpuaas.core.manifests): kinds, versions, defaults, errors, job kinds."""

from __future__ import annotations

import copy
import glob
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.core.manifests import (
    WORKLOAD_KINDS,
    ManifestError,
    core_kind,
    object_ref,
    parse_object,
)
from gpuaas.core.objects import (
    SOURCE_POD,
    SOURCE_WPC,
    BorrowWithinCohort,
    CheckRule,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityAction,
    FungibilityPreference,
    LabelSelector,
    LocalQueue,
    Namespace,
    NodeSelectorTerm,
    PodSet,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    SelectorRequirement,
    StopPolicy,
    Taint,
    Toleration,
    Workload,
    WorkloadPriorityClass,
)

V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"
GI = 1 << 30

Doc = dict[str, Any]

# --- builders ---------------------------------------------------------------------------------


def doc(kind: str, name: str | None, api: str = V1B1, ns: str | None = None, **body: Any) -> Doc:
    meta: Doc = {} if name is None else {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    for key in ("labels", "annotations"):
        if key in body:
            meta[key] = body.pop(key)
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def cq(
    name: str = "cq", api: str = V1B1, annotations: dict[str, str] | None = None, **spec: Any
) -> Doc:
    d = doc("ClusterQueue", name, api, spec=spec)
    if annotations is not None:
        d["metadata"]["annotations"] = annotations
    return d


def group(covered: list[str], *flavors: tuple[str, list[Doc]]) -> Doc:
    return {
        "coveredResources": covered,
        "flavors": [{"name": f, "resources": res} for f, res in flavors],
    }


def quota(name: str, nominal: Any, **limits: Any) -> Doc:
    return {"name": name, "nominalQuota": nominal, **limits}


def container(requests: Doc | None = None, limits: Doc | None = None, **extra: Any) -> Doc:
    resources: Doc = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def template(*containers: Doc, **spec: Any) -> Doc:
    return {"spec": {"containers": list(containers), **spec}}


def workload(name: str = "wl", api: str = V1B1, ns: str | None = "default", **spec: Any) -> Doc:
    spec.setdefault("queueName", "lq")
    spec.setdefault(
        "podSets", [{"name": "main", "count": 1, "template": template(container({"cpu": "1"}))}]
    )
    return doc("Workload", name, api, ns, spec=spec)


def job(
    name: str = "job", labels: Doc | None = None, annotations: Doc | None = None, **spec: Any
) -> Doc:
    spec.setdefault("template", template(container({"cpu": "1"})))
    d = doc("Job", name, "batch/v1", "team", spec=spec)
    d["metadata"]["labels"] = labels if labels is not None else {"kueue.x-k8s.io/queue-name": "lq"}
    if annotations is not None:
        d["metadata"]["annotations"] = annotations
    return d


def worker(group_name: str, replicas: int | None = 1, cpu: str = "1", **extra: Any) -> Doc:
    w: Doc = {"groupName": group_name, "template": template(container({"cpu": cpu})), **extra}
    if replicas is not None:
        w["replicas"] = replicas
    return w


def ray_spec(*workers: Doc, head_cpu: str = "1", **extra: Any) -> Doc:
    head = {
        "template": template(container({"cpu": head_cpu, "memory": "1Gi"}, image="rayproject/ray"))
    }
    return {"headGroupSpec": head, "workerGroupSpecs": list(workers), **extra}


def raycluster(spec: Doc, api: str = "ray.io/v1", **meta: Any) -> Doc:
    d = doc("RayCluster", "rc", api, "team", spec=spec)
    d["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    d["metadata"].update(meta)
    return d


def rayjob(cluster: Doc, api: str = "ray.io/v1", **spec: Any) -> Doc:
    spec.setdefault("shutdownAfterJobFinishes", True)
    d = doc("RayJob", "rj", api, "team", spec={"rayClusterSpec": cluster, **spec})
    d["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    return d


def cpu_group(**limits: Any) -> list[Doc]:
    return [group(["cpu"], ("f", [quota("cpu", "10", **limits)]))]


SEED_CQ_GROUPS = [
    ResourceGroup(
        covered_resources=("cpu", "memory"),
        flavors=[
            FlavorQuotas(
                "default-flavor", {"cpu": ResourceQuota(10_000), "memory": ResourceQuota(64 * GI)}
            )
        ],
    )
]

# --- every kind, both API versions ----------------------------------------------------------

KIND_CASES = [
    pytest.param(
        doc("Namespace", "team-a", "v1", labels={"team": "a"}),
        Namespace("team-a", {"team": "a", "kubernetes.io/metadata.name": "team-a"}),
        id="namespace-gets-metadata-name-label",
    ),
    pytest.param(
        doc("ResourceFlavor", "default-flavor"), ResourceFlavor("default-flavor"), id="flavor-empty"
    ),
    pytest.param(
        doc(
            "ResourceFlavor",
            "gpu",
            V1B2,
            spec={
                "nodeLabels": {"gpu": "a100"},
                "nodeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            },
        ),
        ResourceFlavor(
            "gpu",
            {"gpu": "a100"},
            (Taint("nvidia.com/gpu", "true", "NoSchedule"),),
            (Toleration("spot", "Exists", "", "NoSchedule"),),
        ),
        id="flavor-labels-taints-tolerations-v1beta2",
    ),
    pytest.param(
        cq(
            "shared-cq",
            namespaceSelector={},
            cohort="team-ab",
            resourceGroups=[
                group(
                    ["cpu", "memory"],
                    ("default-flavor", [quota("cpu", 10), quota("memory", "64Gi")]),
                )
            ],
        ),
        ClusterQueue(
            "shared-cq",
            cohort="team-ab",
            namespace_selector=LabelSelector(),
            resource_groups=SEED_CQ_GROUPS,
        ),
        id="cq-v1beta1-cohort-defaults",
    ),
    pytest.param(
        cq(
            "shared-cq",
            V1B2,
            namespaceSelector={},
            cohortName="team-ab",
            resourceGroups=[
                group(
                    ["cpu", "memory"],
                    ("default-flavor", [quota("cpu", "10"), quota("memory", "64Gi")]),
                )
            ],
        ),
        ClusterQueue(
            "shared-cq",
            cohort="team-ab",
            namespace_selector=LabelSelector(),
            resource_groups=SEED_CQ_GROUPS,
        ),
        id="cq-v1beta2-cohortName",
    ),
    pytest.param(cq("lonely"), ClusterQueue("lonely"), id="cq-no-selector-admits-no-namespace"),
    pytest.param(
        cq(
            "full",
            V1B2,
            cohortName="c",
            queueingStrategy="StrictFIFO",
            stopPolicy="HoldAndDrain",
            namespaceSelector={
                "matchLabels": {"team": "a"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold", "silver"]}
                ],
            },
            preemption={
                "withinClusterQueue": "LowerOrNewerEqualPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
            fairSharing={"weight": "500m"},
            admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]},
            resourceGroups=[
                group(
                    ["cpu"],
                    ("a", [quota("cpu", "4", borrowingLimit="2", lendingLimit="1500m")]),
                    ("b", [quota("cpu", 0)]),
                ),
                group(["nvidia.com/gpu"], ("gpu", [quota("nvidia.com/gpu", 8, lendingLimit=8)])),
            ],
            annotations={"gpuaas.dev/min-runtime-seconds": "90.5"},
        ),
        ClusterQueue(
            "full",
            cohort="c",
            namespace_selector=LabelSelector(
                (("team", "a"),), (SelectorRequirement("tier", "In", ("gold", "silver")),)
            ),
            queueing_strategy=QueueingStrategy.STRICT_FIFO,
            resource_groups=[
                ResourceGroup(
                    ("cpu",),
                    [
                        FlavorQuotas("a", {"cpu": ResourceQuota(4000, 2000, 1500)}),
                        FlavorQuotas("b", {"cpu": ResourceQuota(0)}),
                    ],
                ),
                ResourceGroup(
                    ("nvidia.com/gpu",),
                    [FlavorQuotas("gpu", {"nvidia.com/gpu": ResourceQuota(8, None, 8)})],
                ),
            ],
            preemption=Preemption(
                PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY,
                PreemptionPolicy.ANY,
                BorrowWithinCohort(PreemptionPolicy.LOWER_PRIORITY, 100),
            ),
            flavor_fungibility=FlavorFungibility(
                FungibilityAction.TRY_NEXT_FLAVOR,
                FungibilityAction.TRY_NEXT_FLAVOR,
                FungibilityPreference.PREEMPTION_OVER_BORROWING,
            ),
            stop_policy=StopPolicy.HOLD_AND_DRAIN,
            fair_weight=0.5,
            admission_checks=(CheckRule("prov"),),
            min_runtime_seconds=90.5,
        ),
        id="cq-every-field",
    ),
    pytest.param(
        cq(flavorFungibility={"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}),
        ClusterQueue(
            "cq",
            flavor_fungibility=FlavorFungibility(
                FungibilityAction.MAY_STOP_SEARCH, FungibilityAction.MAY_STOP_SEARCH
            ),
        ),
        id="cq-v1beta1-fungibility-aliases",
    ),
    pytest.param(
        cq(flavorFungibility={"whenCanBorrow": "TryNextFlavor"}),
        ClusterQueue(
            "cq",
            flavor_fungibility=FlavorFungibility(
                FungibilityAction.TRY_NEXT_FLAVOR, FungibilityAction.TRY_NEXT_FLAVOR
            ),
        ),
        id="cq-fungibility-defaults-when-partial",
    ),
    pytest.param(
        cq(fairSharing={"weight": "0"}), ClusterQueue("cq", fair_weight=0.0), id="cq-weight-zero"
    ),
    pytest.param(
        cq(fairSharing={"weight": 2}), ClusterQueue("cq", fair_weight=2.0), id="cq-weight-int"
    ),
    pytest.param(cq(preemption={}), ClusterQueue("cq"), id="cq-empty-preemption-defaults"),
    pytest.param(
        cq(preemption={"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {}}),
        ClusterQueue(
            "cq", preemption=Preemption(reclaim_within_cohort=PreemptionPolicy.LOWER_PRIORITY)
        ),
        id="cq-borrow-within-cohort-default-never",
    ),
    pytest.param(
        cq(admissionChecksStrategy={"admissionChecks": [{"name": "a", "onFlavors": ["f"]}]}),
        ClusterQueue("cq", admission_checks=(CheckRule("a", ("f",)),)),
        id="cq-admission-check-strategy",
    ),
    pytest.param(
        doc("Cohort", "root", "kueue.x-k8s.io/v1alpha1", spec={"parent": "top"}),
        Cohort("root", parent="top"),
        id="cohort-v1alpha1-parent",
    ),
    pytest.param(
        doc(
            "Cohort",
            "child",
            V1B1,
            spec={
                "parentName": "root",
                "fairSharing": {"weight": "3"},
                "resourceGroups": [
                    group(["cpu"], ("f", [quota("cpu", "2", lendingLimit="5", borrowingLimit="1")]))
                ],
            },
        ),
        Cohort(
            "child",
            "root",
            [
                ResourceGroup(
                    ("cpu",), [FlavorQuotas("f", {"cpu": ResourceQuota(2000, 1000, 5000)})]
                )
            ],
            3.0,
        ),
        id="cohort-v1beta1-parentName-quota-lending-above-nominal-allowed",
    ),
    pytest.param(
        doc("Cohort", "c", V1B2, spec={"parentName": "p"}), Cohort("c", "p"), id="cohort-v1beta2"
    ),
    pytest.param(doc("Cohort", "c", V1B2), Cohort("c"), id="cohort-root"),
    pytest.param(
        doc("LocalQueue", "lq", ns="team-a", spec={"clusterQueue": "cq"}),
        LocalQueue("team-a", "lq", "cq"),
        id="localqueue",
    ),
    pytest.param(
        doc("LocalQueue", "lq", V1B2, spec={"clusterQueue": "cq", "stopPolicy": "Hold"}),
        LocalQueue("default", "lq", "cq", StopPolicy.HOLD),
        id="localqueue-default-namespace-stop-policy",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "prod", value=1000, description="x"),
        WorkloadPriorityClass("prod", 1000),
        id="priorityclass",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "low", V1B2, value=-5),
        WorkloadPriorityClass("low", -5),
        id="priorityclass-negative",
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), KIND_CASES)
def test_parse_kinds(manifest: Doc, expected: object) -> None:
    assert parse_object(manifest) == expected


# --- Workload -------------------------------------------------------------------------------


def main_pod_set(**changes: Any) -> PodSet:
    base = PodSet(name="main", count=1, requests={"cpu": 1000})
    for k, v in changes.items():
        setattr(base, k, v)
    return base


WORKLOAD_CASES = [
    pytest.param(workload(), Workload("default", "wl", "lq", [main_pod_set()]), id="minimal"),
    pytest.param(
        workload(api=V1B2, ns=None),
        Workload("default", "wl", "lq", [main_pod_set()]),
        id="v1beta2-no-namespace",
    ),
    pytest.param(
        workload(priority=5, active=False),
        Workload("default", "wl", "lq", [main_pod_set()], priority=5, active=False),
        id="priority-active",
    ),
    pytest.param(
        workload(
            priorityClassName="prod",
            priorityClassSource="kueue.x-k8s.io/workloadpriorityclass",
            priority=1000,
        ),
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set()],
            priority=1000,
            priority_class="prod",
            priority_source=SOURCE_WPC,
        ),
        id="v1beta1-workload-priority-class",
    ),
    pytest.param(
        workload(
            priorityClassName="prod", priorityClassSource="kueue.x-k8s.io/workloadpriorityclass"
        ),
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set()],
            priority_class="prod",
            priority_source=SOURCE_WPC,
        ),
        id="v1beta1-workload-priority-class-value-resolved-later",
    ),
    pytest.param(
        workload(priorityClassName="system", priority=7),
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set()],
            priority=7,
            priority_source=SOURCE_POD + "system",
        ),
        id="pod-priority-class-uses-priority",
    ),
    pytest.param(
        workload(
            api=V1B2,
            priorityClassRef={
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "prod",
            },
        ),
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set()],
            priority_class="prod",
            priority_source=SOURCE_WPC,
        ),
        id="v1beta2-priority-class-ref",
    ),
    pytest.param(
        {
            **workload(queueName=""),
            "metadata": {"name": "wl", "labels": {"kueue.x-k8s.io/queue-name": "from-label"}},
        },
        Workload(
            "default",
            "wl",
            "from-label",
            [main_pod_set()],
            labels={"kueue.x-k8s.io/queue-name": "from-label"},
        ),
        id="queue-from-label",
    ),
    pytest.param(
        workload(
            podSets=[
                {"template": template(container({"cpu": "1"}))},
                {
                    "name": "workers",
                    "count": 4,
                    "minCount": 2,
                    "template": template(container({"cpu": "2"})),
                },
            ]
        ),
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set(), PodSet("workers", 4, {"cpu": 2000}, min_count=2)],
        ),
        id="podset-defaults-name-main-count-1-and-min-count",
    ),
    pytest.param(
        workload(
            podSets=[{"name": "main", "count": 0, "template": template(container({"cpu": "1"}))}]
        ),
        Workload("default", "wl", "lq", [main_pod_set(count=0)]),
        id="count-zero",
    ),
    pytest.param(
        {
            **workload(),
            "metadata": {"name": "wl", "annotations": {"gpuaas.dev/runtime-seconds": "12.5"}},
        },
        Workload(
            "default",
            "wl",
            "lq",
            [main_pod_set()],
            runtime_seconds=12.5,
            annotations={"gpuaas.dev/runtime-seconds": "12.5"},
        ),
        id="runtime-annotation",
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), WORKLOAD_CASES)
def test_parse_workload(manifest: Doc, expected: Workload) -> None:
    assert parse_object(manifest) == expected


# --- pod requests and scheduling constraints --------------------------------------------------

REQUEST_CASES = [
    pytest.param(
        template(container({"cpu": "500m", "memory": "1Gi"})),
        {"cpu": 500, "memory": GI},
        id="one-container",
    ),
    pytest.param(
        template(container({"cpu": "500m"}), container({"cpu": "1", "nvidia.com/gpu": 1})),
        {"cpu": 1500, "nvidia.com/gpu": 1},
        id="sum-containers",
    ),
    pytest.param(
        template(container(None, {"cpu": "2", "memory": "1Gi"})),
        {"cpu": 2000, "memory": GI},
        id="limits-default-requests",
    ),
    pytest.param(
        template(container({"cpu": "1"}, {"cpu": "2", "nvidia.com/gpu": 2})),
        {"cpu": 1000, "nvidia.com/gpu": 2},
        id="limits-fill-missing-only",
    ),
    pytest.param(
        template(
            container({"cpu": "1"}), initContainers=[container({"cpu": "3", "memory": "1Gi"})]
        ),
        {"cpu": 3000, "memory": GI},
        id="init-container-max",
    ),
    pytest.param(
        template(
            container({"cpu": "1"}),
            initContainers=[
                container({"cpu": "500m"}, restartPolicy="Always"),
                container({"cpu": "2"}),
            ],
        ),
        # the sidecar runs with the app (1.5) and alongside the later init container (2.5).
        {"cpu": 2500},
        id="sidecar-adds-to-later-init-and-app",
    ),
    pytest.param(
        template(
            container({"cpu": "1"}),
            initContainers=[container({"cpu": "500m"}, restartPolicy="Always")],
        ),
        {"cpu": 1500},
        id="sidecar-adds-to-app",
    ),
    pytest.param(
        template(container({"cpu": "1"}), overhead={"cpu": "250m", "memory": "120Mi"}),
        {"cpu": 1250, "memory": 120 << 20},
        id="overhead",
    ),
    pytest.param(
        template(
            container({"cpu": "1", "nvidia.com/gpu": 1}),
            resources={"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
        ),
        {"cpu": 4000, "nvidia.com/gpu": 1, "memory": 8 * GI},
        id="pod-level-resources-override-cpu-memory",
    ),
    pytest.param(
        template(container({"memory": "500m"}), container({"memory": "500m"})),
        {"memory": 1},
        id="sum-exact-before-rounding",
    ),
    pytest.param(
        template(container({"cpu": 0.25}), container({"cpu": 1})), {"cpu": 1250}, id="yaml-numbers"
    ),
    pytest.param(template(container()), {}, id="no-requests"),
]


@pytest.mark.parametrize(("tmpl", "expected"), REQUEST_CASES)
def test_pod_requests(tmpl: Doc, expected: dict[str, int]) -> None:
    wl = parse_object(workload(podSets=[{"name": "main", "count": 1, "template": tmpl}]))
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].requests == expected


def test_scheduling_constraints_copied_to_podset() -> None:
    tmpl = template(
        container({"cpu": "1"}),
        nodeSelector={"gpu": "a100"},
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists"},
            {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a", "b"]}
                            ]
                        },
                        {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
                    ]
                }
            }
        },
    )
    wl = parse_object(workload(podSets=[{"name": "main", "count": 1, "template": tmpl}]))
    assert isinstance(wl, Workload)
    ps = wl.pod_sets[0]
    assert ps.node_selector == {"gpu": "a100"}
    assert ps.tolerations == (
        Toleration("nvidia.com/gpu", "Exists"),
        Toleration("k", "Equal", "v", "NoExecute"),
    )
    assert ps.required_affinity == (
        NodeSelectorTerm((SelectorRequirement("zone", "In", ("a", "b")),)),
        NodeSelectorTerm((SelectorRequirement("cores", "Gt", ("8",)),)),
    )


# --- job kinds ------------------------------------------------------------------------------

SUBMITTER = PodSet("submitter", 1, {"cpu": 500, "memory": 200 << 20})
HEAD = PodSet("head", 1, {"cpu": 1000, "memory": GI})
JOB_LABELS = {"kueue.x-k8s.io/queue-name": "lq"}

JOB_CASES = [
    pytest.param(job(), [PodSet("main", 1, {"cpu": 1000})], id="job-default-parallelism"),
    pytest.param(job(parallelism=4), [PodSet("main", 4, {"cpu": 1000})], id="job-parallelism"),
    pytest.param(
        job(parallelism=4, completions=2),
        [PodSet("main", 2, {"cpu": 1000})],
        id="job-capped-by-completions",
    ),
    pytest.param(
        job(parallelism=2, completions=10),
        [PodSet("main", 2, {"cpu": 1000})],
        id="job-completions-above",
    ),
    pytest.param(job(completions=3), [PodSet("main", 1, {"cpu": 1000})], id="job-completions-only"),
    pytest.param(job(parallelism=0), [PodSet("main", 0, {"cpu": 1000})], id="job-parallelism-zero"),
    pytest.param(
        job(suspend=False, parallelism=3),
        [PodSet("main", 3, {"cpu": 1000})],
        id="job-suspend-ignored",
    ),
    pytest.param(
        job(parallelism=5, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}),
        [PodSet("main", 5, {"cpu": 1000}, min_count=2)],
        id="job-min-parallelism",
    ),
    pytest.param(
        raycluster(ray_spec(worker("small", 2), worker("big", 1, cpu="4"))),
        [HEAD, PodSet("small", 2, {"cpu": 1000}), PodSet("big", 1, {"cpu": 4000})],
        id="raycluster",
    ),
    pytest.param(
        raycluster(ray_spec(), api="ray.io/v1alpha1"), [HEAD], id="raycluster-v1alpha1-head-only"
    ),
    pytest.param(
        raycluster(ray_spec(worker("w", 2, numOfHosts=4))),
        [HEAD, PodSet("w", 8, {"cpu": 1000})],
        id="raycluster-num-of-hosts",
    ),
    pytest.param(
        raycluster(ray_spec(worker("w", None))),
        [HEAD, PodSet("w", 0, {"cpu": 1000})],
        id="raycluster-replicas-crd-default-0",
    ),
    pytest.param(
        raycluster(ray_spec(head_cpu="100m"), annotations={"ray.io/ft-enabled": "true"}),
        [PodSet("head", 1, {"cpu": 200, "memory": GI})],
        id="raycluster-gcs-ft-redis-cleanup-keeps-max",
    ),
    pytest.param(
        raycluster(ray_spec(gcsFaultToleranceOptions={"redisAddress": "r:6379"})),
        [HEAD],
        id="raycluster-gcs-ft-below-own-requests",
    ),
    pytest.param(
        rayjob(ray_spec(worker("w", 3))),
        [HEAD, PodSet("w", 3, {"cpu": 1000}), SUBMITTER],
        id="rayjob-default-k8sjobmode-submitter",
    ),
    pytest.param(
        rayjob(
            ray_spec(),
            submissionMode="K8sJobMode",
            submitterPodTemplate=template(container({"cpu": "2"})),
        ),
        [HEAD, PodSet("submitter", 1, {"cpu": 2000})],
        id="rayjob-custom-submitter",
    ),
    pytest.param(
        rayjob(ray_spec(), submissionMode="HTTPMode"), [HEAD], id="rayjob-http-no-submitter"
    ),
    pytest.param(
        rayjob(ray_spec(), submissionMode="InteractiveMode", api="ray.io/v1alpha1"),
        [HEAD],
        id="rayjob-interactive",
    ),
    pytest.param(
        rayjob(ray_spec(), submissionMode="SidecarMode"),
        [PodSet("head", 1, {"cpu": 1500, "memory": GI + (200 << 20)})],
        id="rayjob-sidecar-submitter-in-head",
    ),
]


@pytest.mark.parametrize(("manifest", "pod_sets"), JOB_CASES)
def test_job_kinds_become_one_workload(manifest: Doc, pod_sets: list[PodSet]) -> None:
    wl = parse_object(manifest)
    assert isinstance(wl, Workload)
    assert wl.pod_sets == pod_sets
    assert (wl.kind, wl.namespace, wl.name) == (
        manifest["kind"],
        "team",
        manifest["metadata"]["name"],
    )
    assert wl.queue_name == "lq"
    assert wl.labels == manifest["metadata"]["labels"]
    assert wl.annotations == manifest["metadata"].get("annotations", {})
    assert wl.priority is None


def test_job_priority_class_and_runtime_from_metadata() -> None:
    manifest = job(
        labels={"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": "prod"},
        annotations={"gpuaas.dev/runtime-seconds": "60"},
    )
    wl = parse_object(manifest)
    assert isinstance(wl, Workload)
    assert (wl.priority_class, wl.runtime_seconds, wl.kind) == ("prod", 60.0, "Job")


def test_job_without_queue_label_has_empty_queue() -> None:
    wl = parse_object(job(labels={}))
    assert isinstance(wl, Workload) and wl.queue_name == ""


# The two Jobs of /work/shared/seeds/004_*.txt ("Kueue GPU Preemption Demo"), verbatim.
SEED_004_JOBS = {
    "team-a-job": """\
apiVersion: batch/v1
kind: Job
metadata:
  name: team-a-job
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: local-queue
    kueue.x-k8s.io/priority-class: prod-priority
spec:
  template:
    spec:
      containers:
        - name: app
          image: busybox
          command: ["sleep", "3600"]
          resources:
            requests:
              cpu: "7"
              nvidia.com/gpu: 2
            limits:
              nvidia.com/gpu: 2
      restartPolicy: Never
""",
    "team-b-job": """\
apiVersion: batch/v1
kind: Job
metadata:
  name: team-b-job
  namespace: team-b
  labels:
    kueue.x-k8s.io/queue-name: local-queue
    kueue.x-k8s.io/priority-class: dev-priority
spec:
  template:
    spec:
      containers:
        - name: app
          image: busybox
          command: ["sleep", "3600"]
          resources:
            requests:
              cpu: "5"
      restartPolicy: Never
""",
}


def _seed_004_job(name: str) -> Doc:
    manifest = yaml.safe_load(SEED_004_JOBS[name])
    assert isinstance(manifest, dict)
    return manifest


def test_seed_004_text_is_verbatim() -> None:
    seeds = glob.glob("/work/shared/seeds/004_*.txt")
    if not seeds:
        pytest.skip("seed 004 is not on this machine (only in the development workspace)")
    with open(seeds[0], encoding="utf-8") as fh:
        text = fh.read()
    for block in SEED_004_JOBS.values():
        assert f"```yaml\n{block}```" in text


def test_seed_004_team_a_job() -> None:
    wl = parse_object(_seed_004_job("team-a-job"))
    assert wl == Workload(
        namespace="team-a",
        name="team-a-job",
        queue_name="local-queue",
        pod_sets=[PodSet("main", 1, {"cpu": 7000, "nvidia.com/gpu": 2})],
        priority_class="prod-priority",
        kind="Job",
        labels={
            "kueue.x-k8s.io/queue-name": "local-queue",
            "kueue.x-k8s.io/priority-class": "prod-priority",
        },
    )


def test_seed_004_team_b_job() -> None:
    wl = parse_object(_seed_004_job("team-b-job"))
    assert isinstance(wl, Workload)
    assert (wl.pod_sets, wl.priority_class, wl.queue_name) == (
        [PodSet("main", 1, {"cpu": 5000})],
        "dev-priority",
        "local-queue",
    )


# --- errors ---------------------------------------------------------------------------------

RG = "spec.resourceGroups[0]"

ERROR_CASES = [
    # (manifest, object part of the message, field, reason fragment)
    pytest.param(
        cq("team-a-cq", resourceGroups=[group(["cpu"], ("f", [quota("cpu", "abc")]))]),
        "ClusterQueue team-a-cq",
        f"{RG}.flavors[0].resources[0].nominalQuota",
        "malformed quantity 'abc'",
        id="malformed-quota",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu"], ("f", [quota("cpu", "-1")]))]),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].nominalQuota",
        "must be greater than or equal to 0",
        id="negative-quota",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu"], ("f", [{"name": "cpu"}]))]),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].nominalQuota",
        "required value",
        id="missing-quota",
    ),
    pytest.param(
        cq(cohort="c", resourceGroups=cpu_group(borrowingLimit="-1")),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].borrowingLimit",
        "must be greater than or equal to 0",
        id="negative-borrowing",
    ),
    pytest.param(
        cq(resourceGroups=cpu_group(borrowingLimit="1")),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].borrowingLimit",
        "must be nil when cohort is empty",
        id="borrowing-without-cohort",
    ),
    pytest.param(
        cq(resourceGroups=cpu_group(lendingLimit="1")),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].lendingLimit",
        "must be nil when cohort is empty",
        id="lending-without-cohort",
    ),
    pytest.param(
        cq(api=V1B2, cohortName="c", resourceGroups=cpu_group(lendingLimit="10001m")),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].lendingLimit",
        "must be less than or equal to the nominalQuota",
        id="lending-above-nominal",
    ),
    pytest.param(
        cq(cohort="c", resourceGroups=cpu_group(lendingLimit="-1")),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].lendingLimit",
        "must be greater than or equal to 0",
        id="negative-lending",
    ),
    pytest.param(
        doc("Cohort", "co", spec={"resourceGroups": cpu_group(borrowingLimit="1")}),
        "Cohort co",
        f"{RG}.flavors[0].resources[0].borrowingLimit",
        "must be nil when parent is empty",
        id="cohort-borrowing-without-parent",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu", "memory"], ("f", [quota("cpu", 1)]))]),
        "ClusterQueue cq",
        RG,
        "flavors must have the same number of resources as the coveredResources",
        id="resource-count-mismatch",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu", "memory"], ("f", [quota("memory", 1), quota("cpu", 1)]))]),
        "ClusterQueue cq",
        f"{RG}.flavors[0].resources[0].name",
        "must match the name in coveredResources",
        id="resource-order-mismatch",
    ),
    pytest.param(
        cq(
            resourceGroups=[
                group(["cpu"], ("f", [quota("cpu", 1)])),
                group(["cpu"], ("g", [quota("cpu", 1)])),
            ]
        ),
        "ClusterQueue cq",
        "spec.resourceGroups[1].coveredResources[0]",
        "Duplicate value: 'cpu'",
        id="resource-in-two-groups",
    ),
    pytest.param(
        cq(
            resourceGroups=[
                group(["cpu"], ("f", [quota("cpu", 1)])),
                group(["memory"], ("f", [quota("memory", 1)])),
            ]
        ),
        "ClusterQueue cq",
        "spec.resourceGroups[1].flavors[0].name",
        "Duplicate value: 'f'",
        id="flavor-in-two-groups",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu"], ("f", [quota("cpu", 1)]), ("f", [quota("cpu", 1)]))]),
        "ClusterQueue cq",
        f"{RG}.flavors[1].name",
        "Duplicate value: 'f'",
        id="flavor-twice-in-group",
    ),
    pytest.param(
        cq(resourceGroups=[group([f"r{i}"], (f"f{i}", [quota(f"r{i}", 1)])) for i in range(17)]),
        "ClusterQueue cq",
        "spec.resourceGroups",
        "must have at most 16 items",
        id="too-many-groups",
    ),
    pytest.param(
        cq(resourceGroups=[group(["cpu"], *[(f"f{i}", [quota("cpu", 1)]) for i in range(65)])]),
        "ClusterQueue cq",
        f"{RG}.flavors",
        "must have at most 64 items",
        id="too-many-flavors",
    ),
    pytest.param(
        cq(resourceGroups=[group([], ("f", []))]),
        "ClusterQueue cq",
        f"{RG}.coveredResources",
        "must have at least 1 item",
        id="no-covered-resources",
    ),
    pytest.param(
        cq(resourceGroups=[{"coveredResources": ["cpu"], "flavors": []}]),
        "ClusterQueue cq",
        f"{RG}.flavors",
        "must have at least 1 item",
        id="no-flavors",
    ),
    pytest.param(
        cq(queueingStrategy="FIFO"),
        "ClusterQueue cq",
        "spec.queueingStrategy",
        'unsupported value "FIFO"',
        id="bad-queueing-strategy",
    ),
    pytest.param(
        cq(stopPolicy="Stop"),
        "ClusterQueue cq",
        "spec.stopPolicy",
        'unsupported value "Stop"',
        id="bad-stop-policy",
    ),
    pytest.param(
        cq(preemption={"withinClusterQueue": "Any"}),
        "ClusterQueue cq",
        "spec.preemption.withinClusterQueue",
        'unsupported value "Any"',
        id="bad-within-cq",
    ),
    pytest.param(
        cq(preemption={"reclaimWithinCohort": "LowerOrNewerEqualPriority"}),
        "ClusterQueue cq",
        "spec.preemption.reclaimWithinCohort",
        "unsupported value",
        id="bad-reclaim",
    ),
    pytest.param(
        cq(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Any"}}),
        "ClusterQueue cq",
        "spec.preemption.borrowWithinCohort.policy",
        "unsupported value",
        id="bad-bwc-policy",
    ),
    pytest.param(
        cq(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
        "ClusterQueue cq",
        "spec.preemption",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        id="bwc-needs-reclaim",
    ),
    pytest.param(
        cq(flavorFungibility={"whenCanBorrow": "Always"}),
        "ClusterQueue cq",
        "spec.flavorFungibility.whenCanBorrow",
        "unsupported value",
        id="bad-fungibility",
    ),
    pytest.param(
        cq(api=V1B2, flavorFungibility={"whenCanPreempt": "Preempt"}),
        "ClusterQueue cq",
        "spec.flavorFungibility.whenCanPreempt",
        'unsupported value "Preempt"',
        id="v1beta2-rejects-deprecated-fungibility",
    ),
    pytest.param(
        cq(flavorFungibility={"preference": "BorrowingOverPreemption"}),
        "ClusterQueue cq",
        "spec.flavorFungibility.preference",
        "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor",
        id="preference-needs-try-next",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "Cheapest",
            }
        ),
        "ClusterQueue cq",
        "spec.flavorFungibility.preference",
        "unsupported value",
        id="bad-preference",
    ),
    pytest.param(
        cq(fairSharing={"weight": "-1"}),
        "ClusterQueue cq",
        "spec.fairSharing.weight",
        "must be greater than or equal to 0",
        id="negative-weight",
    ),
    pytest.param(
        cq(fairSharing={"weight": "1n"}),
        "ClusterQueue cq",
        "spec.fairSharing.weight",
        "When not 0, weight must be > 10e-9",
        id="tiny-weight",
    ),
    pytest.param(
        cq(fairSharing={"weight": "heavy"}),
        "ClusterQueue cq",
        "spec.fairSharing.weight",
        "malformed quantity",
        id="malformed-weight",
    ),
    pytest.param(
        cq(namespaceSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
        "ClusterQueue cq",
        "spec.namespaceSelector.matchExpressions[0].values",
        "must be specified",
        id="selector-in-without-values",
    ),
    pytest.param(
        cq(
            namespaceSelector={
                "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]
            }
        ),
        "ClusterQueue cq",
        "spec.namespaceSelector.matchExpressions[0].operator",
        "unsupported value",
        id="selector-bad-operator",
    ),
    pytest.param(
        cq(namespaceSelector={"matchLabels": {"team": 1}}),
        "ClusterQueue cq",
        "spec.namespaceSelector.matchLabels[team]",
        "must be a string",
        id="selector-non-string-label",
    ),
    pytest.param(
        cq(namespaceSelector=[]),
        "ClusterQueue cq",
        "spec.namespaceSelector",
        "must be an object",
        id="selector-not-object",
    ),
    pytest.param(
        cq(annotations={"gpuaas.dev/min-runtime-seconds": "-3"}),
        "ClusterQueue cq",
        "metadata.annotations[gpuaas.dev/min-runtime-seconds]",
        "must be greater than or equal to 0",
        id="min-runtime-negative",
    ),
    pytest.param(
        cq(annotations={"gpuaas.dev/min-runtime-seconds": "soon"}),
        "ClusterQueue cq",
        "metadata.annotations[gpuaas.dev/min-runtime-seconds]",
        "must be a number of seconds",
        id="min-runtime-not-number",
    ),
    pytest.param(
        cq(annotations={"gpuaas.dev/min-runtime-seconds": "nan"}),
        "ClusterQueue cq",
        "metadata.annotations[gpuaas.dev/min-runtime-seconds]",
        "finite",
        id="min-runtime-nan",
    ),
    pytest.param(
        cq(cohort="Team_AB"), "ClusterQueue cq", "spec.cohort", "RFC 1123", id="bad-cohort-name"
    ),
    pytest.param(
        cq(cohort="a", cohortName="b"),
        "ClusterQueue cq",
        "spec.cohort",
        "disagrees",
        id="cohort-and-cohortName-disagree",
    ),
    pytest.param(
        cq(resourceGroups=[group(["bad resource"], ("f", [quota("bad resource", 1)]))]),
        "ClusterQueue cq",
        f"{RG}.coveredResources[0]",
        "invalid name",
        id="bad-resource-name",
    ),
    pytest.param(
        doc("ResourceFlavor", "rf", spec={"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}),
        "ResourceFlavor rf",
        "spec.nodeTaints[0].effect",
        "unsupported value",
        id="bad-taint-effect",
    ),
    pytest.param(
        doc("ResourceFlavor", "rf", spec={"nodeTaints": [{"key": "k"}]}),
        "ResourceFlavor rf",
        "spec.nodeTaints[0].effect",
        "required value",
        id="taint-without-effect",
    ),
    pytest.param(
        doc(
            "ResourceFlavor",
            "rf",
            spec={
                "nodeTaints": [
                    {"key": "k", "effect": "NoSchedule"},
                    {"key": "k", "value": "x", "effect": "NoSchedule"},
                ]
            },
        ),
        "ResourceFlavor rf",
        "spec.nodeTaints[1]",
        "unique by key and effect",
        id="duplicate-taint",
    ),
    pytest.param(
        doc("ResourceFlavor", "rf", spec={"tolerations": [{"operator": "Equal", "value": "x"}]}),
        "ResourceFlavor rf",
        "spec.tolerations[0].operator",
        "operator must be Exists when 'key' is empty",
        id="toleration-empty-key",
    ),
    pytest.param(
        doc(
            "ResourceFlavor",
            "rf",
            spec={"tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]},
        ),
        "ResourceFlavor rf",
        "spec.tolerations[0].value",
        "a value must be empty",
        id="toleration-exists-with-value",
    ),
    pytest.param(
        doc(
            "ResourceFlavor",
            "rf",
            spec={"tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 3}]},
        ),
        "ResourceFlavor rf",
        "spec.tolerations[0].effect",
        "NoExecute",
        id="toleration-seconds-needs-noexecute",
    ),
    pytest.param(
        doc("ResourceFlavor", "rf", spec={"nodeLabels": {"gpu": "a 100"}}),
        "ResourceFlavor rf",
        "spec.nodeLabels[gpu]",
        "invalid label value",
        id="bad-node-label",
    ),
    pytest.param(
        doc("LocalQueue", "lq", ns="team-a", spec={}),
        "LocalQueue team-a/lq",
        "spec.clusterQueue",
        "required value",
        id="lq-without-cq",
    ),
    pytest.param(
        doc("LocalQueue", "lq", spec={"clusterQueue": "cq", "stopPolicy": "Pause"}),
        "LocalQueue default/lq",
        "spec.stopPolicy",
        "unsupported value",
        id="lq-bad-stop-policy",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "p"),
        "WorkloadPriorityClass p",
        "value",
        "required value",
        id="wpc-without-value",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "p", value="high"),
        "WorkloadPriorityClass p",
        "value",
        "must be an integer",
        id="wpc-string-value",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "p", value=1 << 31),
        "WorkloadPriorityClass p",
        "value",
        "less than or equal to 2147483647",
        id="wpc-overflow",
    ),
    pytest.param(
        doc("WorkloadPriorityClass", "p", value=True),
        "WorkloadPriorityClass p",
        "value",
        "must be an integer",
        id="wpc-bool",
    ),
    # metadata and kinds
    pytest.param(
        doc("ClusterQueue", None),
        "ClusterQueue <unnamed>",
        "metadata.name",
        "required value",
        id="missing-name",
    ),
    pytest.param(
        {"apiVersion": V1B1, "kind": "ClusterQueue"},
        "ClusterQueue <unnamed>",
        "metadata",
        "required value",
        id="missing-metadata",
    ),
    pytest.param(
        doc("ClusterQueue", "Bad_Name"),
        "ClusterQueue Bad_Name",
        "metadata.name",
        "RFC 1123",
        id="bad-name",
    ),
    pytest.param(
        doc("Namespace", "a.b", "v1"),
        "Namespace a.b",
        "metadata.name",
        "RFC 1123 label",
        id="namespace-name-is-label",
    ),
    pytest.param(
        doc("LocalQueue", "lq", ns="Team", spec={"clusterQueue": "cq"}),
        "LocalQueue Team/lq",
        "metadata.namespace",
        "RFC 1123",
        id="bad-namespace",
    ),
    pytest.param(
        doc("Deployment", "d", "apps/v1"),
        "Deployment d",
        "kind",
        "unsupported kind 'Deployment' (apiVersion 'apps/v1')",
        id="unknown-kind",
    ),
    pytest.param(
        doc("ClusterQueue", "cq", "kueue.x-k8s.io/v1alpha1"),
        "ClusterQueue cq",
        "apiVersion",
        "unsupported apiVersion 'kueue.x-k8s.io/v1alpha1' for kind ClusterQueue",
        id="cohort-only-alpha",
    ),
    pytest.param(
        doc("Job", "j", "batch/v2"),
        "Job default/j",
        "apiVersion",
        "unsupported apiVersion 'batch/v2' for kind Job",
        id="wrong-job-version",
    ),
    pytest.param(
        doc("ClusterQueue", "cq", "example.com/v1"),
        "ClusterQueue cq",
        "apiVersion",
        "unsupported apiVersion 'example.com/v1'",
        id="wrong-group",
    ),
    pytest.param(
        {"kind": "ClusterQueue", "metadata": {"name": "cq"}},
        "ClusterQueue cq",
        "apiVersion",
        "required string",
        id="missing-api-version",
    ),
    pytest.param(
        {"apiVersion": V1B1, "metadata": {"name": "x"}},
        "<unknown kind> x",
        "kind",
        "required string",
        id="missing-kind",
    ),
    pytest.param(
        cq(resourceGroups={"cpu": 1}),
        "ClusterQueue cq",
        "spec.resourceGroups",
        "must be a list",
        id="groups-not-list",
    ),
    pytest.param(
        {**cq(), "spec": "x"}, "ClusterQueue cq", "spec", "must be an object", id="spec-not-object"
    ),
    # workloads
    pytest.param(
        workload(podSets=[]),
        "Workload default/wl",
        "spec.podSets",
        "must have at least 1 item",
        id="wl-no-podsets",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "count": -1, "template": template()}]),
        "Workload default/wl",
        "spec.podSets[0].count",
        "greater than or equal to 0",
        id="wl-negative-count",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "count": "2", "template": template()}]),
        "Workload default/wl",
        "spec.podSets[0].count",
        "must be an integer",
        id="wl-string-count",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "count": 2, "minCount": 3, "template": template()}]),
        "Workload default/wl",
        "spec.podSets[0].minCount",
        "less or equal to count",
        id="wl-min-count-above-count",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "count": 2, "minCount": 0, "template": template()}]),
        "Workload default/wl",
        "spec.podSets[0].minCount",
        "greater than or equal to 1",
        id="wl-min-count-zero",
    ),
    pytest.param(
        workload(
            podSets=[
                {"name": "a", "minCount": 1, "count": 2, "template": template(container())},
                {"name": "b", "count": 2, "minCount": 1, "template": template(container())},
            ]
        ),
        "Workload default/wl",
        "spec.podSets",
        "at most one podSet can use minCount",
        id="wl-two-min-counts",
    ),
    pytest.param(
        workload(
            podSets=[
                {"name": "a", "template": template(container())},
                {"name": "a", "template": template(container())},
            ]
        ),
        "Workload default/wl",
        "spec.podSets[1].name",
        "Duplicate value: 'a'",
        id="wl-duplicate-podset",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "count": 1}]),
        "Workload default/wl",
        "spec.podSets[0].template",
        "required value",
        id="wl-no-template",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "template": {"spec": {}}}]),
        "Workload default/wl",
        "spec.podSets[0].template.spec.containers",
        "required value",
        id="wl-no-containers",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "template": template(container({"cpu": "lots"}))}]),
        "Workload default/wl",
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
        "malformed quantity 'lots'",
        id="wl-malformed-request",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "template": template(container({"cpu": "-1"}))}]),
        "Workload default/wl",
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
        "greater than or equal to 0",
        id="wl-negative-request",
    ),
    pytest.param(
        workload(podSets=[{"name": "main", "template": template(container({"pods": "1"}))}]),
        "Workload default/wl",
        "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
        "reserved for internal kueue use",
        id="wl-pods-reserved",
    ),
    pytest.param(
        workload(
            podSets=[
                {
                    "name": "main",
                    "template": template(
                        container(),
                        initContainers=[container({"cpu": "1"}, restartPolicy="OnFailure")],
                    ),
                }
            ]
        ),
        "Workload default/wl",
        "spec.podSets[0].template.spec.initContainers[0].restartPolicy",
        "unsupported value",
        id="wl-bad-init-restart-policy",
    ),
    pytest.param(
        workload(
            podSets=[{"name": "main", "template": template(container(), nodeSelector={"gpu": 1})}]
        ),
        "Workload default/wl",
        "spec.podSets[0].template.spec.nodeSelector[gpu]",
        "must be a string",
        id="wl-bad-node-selector",
    ),
    pytest.param(
        workload(
            podSets=[
                {
                    "name": "main",
                    "template": template(
                        container(),
                        affinity={
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {"key": "n", "operator": "Gt", "values": ["x"]}
                                            ]
                                        }
                                    ]
                                }
                            }
                        },
                    ),
                }
            ]
        ),
        "Workload default/wl",
        "spec.podSets[0].template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
        "must be an integer",
        id="wl-affinity-gt-not-int",
    ),
    pytest.param(
        workload(priority="high"),
        "Workload default/wl",
        "spec.priority",
        "must be an integer",
        id="wl-string-priority",
    ),
    pytest.param(
        workload(active="yes"),
        "Workload default/wl",
        "spec.active",
        "must be a boolean",
        id="wl-string-active",
    ),
    pytest.param(
        workload(priorityClassName="system"),
        "Workload default/wl",
        "spec.priority",
        "priority should not be nil when priorityClassName is set",
        id="wl-pod-priority-class-without-priority",
    ),
    pytest.param(
        workload(api=V1B2, priorityClassRef={"group": "x", "kind": "y", "name": "z"}),
        "Workload default/wl",
        "spec.priorityClassRef",
        "unsupported group/kind",
        id="wl-bad-priority-class-ref",
    ),
    pytest.param(
        workload(queueName="Queue"),
        "Workload default/wl",
        "spec.queueName",
        "RFC 1123",
        id="wl-bad-queue-name",
    ),
    pytest.param(
        {
            **workload(),
            "metadata": {"name": "wl", "annotations": {"gpuaas.dev/runtime-seconds": "-1"}},
        },
        "Workload default/wl",
        "metadata.annotations[gpuaas.dev/runtime-seconds]",
        "greater than or equal to 0",
        id="wl-negative-runtime",
    ),
    pytest.param(
        {
            **workload(),
            "metadata": {"name": "wl", "annotations": {"gpuaas.dev/runtime-seconds": "inf"}},
        },
        "Workload default/wl",
        "metadata.annotations[gpuaas.dev/runtime-seconds]",
        "finite",
        id="wl-infinite-runtime",
    ),
    pytest.param(
        {**workload(), "metadata": {"name": "wl", "labels": {"a": 1}}},
        "Workload default/wl",
        "metadata.labels[a]",
        "must be a string",
        id="wl-non-string-label",
    ),
    # job kinds
    pytest.param(
        job(parallelism=-1),
        "Job team/job",
        "spec.parallelism",
        "greater than or equal to 0",
        id="job-negative-parallelism",
    ),
    pytest.param(
        job(parallelism=4, annotations={"kueue.x-k8s.io/job-min-parallelism": "4"}),
        "Job team/job",
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
        "should be between 0 and 3",
        id="job-min-parallelism-too-big",
    ),
    pytest.param(
        job(parallelism=4, annotations={"kueue.x-k8s.io/job-min-parallelism": "two"}),
        "Job team/job",
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
        "must be an integer",
        id="job-min-parallelism-not-int",
    ),
    pytest.param(
        {**job(), "spec": {"parallelism": 1}},
        "Job team/job",
        "spec.template",
        "required value",
        id="job-no-template",
    ),
    pytest.param(
        job(labels={"kueue.x-k8s.io/queue-name": "Bad"}),
        "Job team/job",
        "metadata.labels[kueue.x-k8s.io/queue-name]",
        "RFC 1123",
        id="job-bad-queue-label",
    ),
    pytest.param(
        job(template=template(container({"cpu": "1"}, {"cpu": "500m"}))),
        "Job team/job",
        "spec.template.spec.containers[0].resources.requests[cpu]",
        "requests must not exceed its limits",
        id="job-requests-above-limits",
    ),
    pytest.param(
        raycluster(ray_spec(worker("head"))),
        "RayCluster team/rc",
        "spec.workerGroupSpecs[0].groupName",
        '"head" is reserved',
        id="ray-worker-named-head",
    ),
    pytest.param(
        raycluster(ray_spec(worker("w"), worker("w"))),
        "RayCluster team/rc",
        "spec.workerGroupSpecs[1].groupName",
        "Duplicate value: 'w'",
        id="ray-duplicate-groups",
    ),
    pytest.param(
        rayjob(ray_spec(worker("submitter"))),
        "RayJob team/rj",
        "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
        '"submitter" is the podset Kueue adds',
        id="rayjob-worker-named-submitter",
    ),
    pytest.param(
        raycluster(ray_spec(*[worker(f"w{i}") for i in range(18)])),
        "RayCluster team/rc",
        "spec.workerGroupSpecs",
        "at most 17 worker groups",
        id="ray-too-many-groups",
    ),
    pytest.param(
        raycluster(ray_spec(enableInTreeAutoscaling=True)),
        "RayCluster team/rc",
        "spec.enableInTreeAutoscaling",
        "autoscaling",
        id="ray-autoscaling",
    ),
    pytest.param(
        raycluster({"workerGroupSpecs": []}),
        "RayCluster team/rc",
        "spec.headGroupSpec.template",
        "required value",
        id="ray-no-head",
    ),
    pytest.param(
        raycluster(ray_spec(worker("w", -2))),
        "RayCluster team/rc",
        "spec.workerGroupSpecs[0].replicas",
        "greater than or equal to 0",
        id="ray-negative-replicas",
    ),
    pytest.param(
        raycluster(ray_spec(worker(""))),
        "RayCluster team/rc",
        "spec.workerGroupSpecs[0].groupName",
        "required value",
        id="ray-no-group-name",
    ),
    pytest.param(
        rayjob(ray_spec(), shutdownAfterJobFinishes=False),
        "RayJob team/rj",
        "spec.shutdownAfterJobFinishes",
        "should delete the cluster",
        id="rayjob-no-shutdown",
    ),
    pytest.param(
        rayjob(ray_spec(), clusterSelector={"ray.io/cluster": "x"}),
        "RayJob team/rj",
        "spec.clusterSelector",
        "should not use an existing cluster",
        id="rayjob-selector-and-spec",
    ),
    pytest.param(
        {**rayjob(ray_spec()), "spec": {"shutdownAfterJobFinishes": True}},
        "RayJob team/rj",
        "spec.rayClusterSpec",
        "rayClusterSpec is required",
        id="rayjob-no-cluster",
    ),
    pytest.param(
        rayjob(ray_spec(), submissionMode="Batch"),
        "RayJob team/rj",
        "spec.submissionMode",
        'unsupported value "Batch"',
        id="rayjob-bad-mode",
    ),
]


@pytest.mark.parametrize(("manifest", "obj", "field", "reason"), ERROR_CASES)
def test_errors_name_object_field_and_reason(
    manifest: Doc, obj: str, field: str, reason: str
) -> None:
    with pytest.raises(ManifestError) as info:
        parse_object(manifest)
    err = info.value
    assert err.field == field
    assert reason in err.reason
    assert str(err) == f"{obj}: {field}: {err.reason}"


WORKLOAD_RESOURCE_CASES = [
    pytest.param([container({"cpu": "1"}, {"cpu": "2"})], [], {"cpu": 1000}, "", id="within"),
    pytest.param(
        [container({"cpu": "2", "memory": "2Gi"}, {"cpu": "1", "memory": "1Gi"})],
        [],
        {"cpu": 2000, "memory": 2 << 30},
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid "
        'value: []v1.ResourceName{"cpu", "memory"}: requests must not exceed its limits',
        id="one-container-two-resources",
    ),
    pytest.param(
        [container({"cpu": "1"}), container({"cpu": "2"}, {"cpu": "1"})],
        [container({"memory": "2"}, {"memory": "1"})],
        {"cpu": 3000, "memory": 2},
        "resources validation failed: [spec.podSets[0].template.spec.initContainers[0]: "
        'Invalid value: []v1.ResourceName{"memory"}: requests must not exceed its limits, '
        "spec.podSets[0].template.spec.containers[1]: Invalid value: "
        '[]v1.ResourceName{"cpu"}: requests must not exceed its limits]',
        id="init-container-listed-first",
    ),
    pytest.param(
        [container({"cpu": "9223372036854776"}), container({"memory": "1"})],
        [],
        {"cpu": (1 << 63) - 1, "memory": 1},
        "",
        id="milli-overflow-clamped",
    ),
    pytest.param(
        [container({"memory": "9223372036854775807"}), container({"memory": "1"})],
        [],
        {"memory": (1 << 63) - 1},
        "",
        id="sum-overflow-clamped",
    ),
]


@pytest.mark.parametrize(("containers", "inits", "requests", "invalid"), WORKLOAD_RESOURCE_CASES)
def test_workload_resources_as_kueue_takes_them(
    containers: list[Doc], inits: list[Doc], requests: dict[str, int], invalid: str
) -> None:
    """A Workload is accepted whatever its requests: Kueue's webhook does not compare them to
    their limits (its scheduler finds such a workload misconfigured, ``invalid_resources``), and
    sizes past int64 are clamped, as Kueue's ``ResourceValue`` and saturating sums do."""
    spec: Doc = {"containers": containers}
    if inits:
        spec["initContainers"] = inits
    wl = parse_object(workload(podSets=[{"name": "main", "template": {"spec": spec}}]))
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].requests == requests
    assert wl.invalid_resources == invalid


MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


@pytest.mark.parametrize(
    ("manifest", "seconds", "error"),
    [
        pytest.param(workload(maximumExecutionTimeSeconds=20), 20, None, id="workload"),
        pytest.param(workload(), None, None, id="workload-without"),
        pytest.param(
            workload(maximumExecutionTimeSeconds=0),
            None,
            "spec.maximumExecutionTimeSeconds",
            id="workload-zero",
        ),
        pytest.param(job(labels={MAX_EXEC: "30"}), 30, None, id="job-label"),
        pytest.param(job(labels={MAX_EXEC: "3000000000"}), None, None, id="job-label-past-int32"),
        pytest.param(
            job(labels={MAX_EXEC: "0"}), None, f"metadata.labels[{MAX_EXEC}]", id="job-label-zero"
        ),
        pytest.param(
            job(labels={MAX_EXEC: "1_0"}), None, f"metadata.labels[{MAX_EXEC}]", id="job-label-text"
        ),
    ],
)
def test_maximum_execution_time(manifest: Doc, seconds: int | None, error: str | None) -> None:
    """Kueue's spec.maximumExecutionTimeSeconds (minimum 1) and a job's label (a positive
    integer, strconv.Atoi's syntax; past int32 it is no limit, as Kueue parses it)."""
    if error is not None:
        with pytest.raises(ManifestError) as info:
            parse_object(manifest)
        assert info.value.field == error
        return
    wl = parse_object(manifest)
    assert isinstance(wl, Workload)
    assert wl.max_exec_seconds == seconds


def test_error_message_format_from_brief() -> None:
    manifest = cq(
        "team-a-cq",
        resourceGroups=[
            group(["cpu"], ("a", [quota("cpu", 1)])),
            group(["memory"], ("b", [quota("memory", 1)]), ("c", [quota("memory", "abc")])),
        ],
    )
    with pytest.raises(ManifestError) as info:
        parse_object(manifest)
    assert str(info.value) == (
        "ClusterQueue team-a-cq: spec.resourceGroups[1].flavors[1].resources[0].nominalQuota: "
        "malformed quantity 'abc'"
    )
    assert (info.value.kind, info.value.namespace, info.value.name) == (
        "ClusterQueue",
        None,
        "team-a-cq",
    )


@pytest.mark.parametrize("bad", [None, [], "Job", 3], ids=["none", "list", "string", "int"])
def test_non_object_documents(bad: Any) -> None:
    with pytest.raises(ManifestError, match="a manifest must be an object"):
        parse_object(bad)


# --- object_ref / core_kind -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "ref"),
    [
        pytest.param(cq("a"), ("ClusterQueue", None, "a"), id="cluster-scoped"),
        pytest.param(
            {**cq("a"), "metadata": {"name": "a", "namespace": "x"}},
            ("ClusterQueue", None, "a"),
            id="cluster-scoped-ignores-namespace",
        ),
        pytest.param(doc("Namespace", "ns", "v1"), ("Namespace", None, "ns"), id="namespace"),
        pytest.param(job("j"), ("Job", "team", "j"), id="job"),
        pytest.param(
            doc("RayJob", "r", "ray.io/v1"), ("RayJob", "default", "r"), id="namespaced-default"
        ),
        pytest.param(
            doc("Workload", "w", V1B2, ns=""),
            ("Workload", "default", "w"),
            id="empty-namespace-default",
        ),
    ],
)
def test_object_ref(manifest: Doc, ref: tuple[str, str | None, str]) -> None:
    assert object_ref(manifest) == ref


def test_object_ref_errors() -> None:
    with pytest.raises(ManifestError, match=r"metadata\.name: required value"):
        object_ref(doc("Job", None, "batch/v1"))


@pytest.mark.parametrize(
    ("kind", "core"),
    [
        ("Job", "Workload"),
        ("RayCluster", "Workload"),
        ("RayJob", "Workload"),
        ("Workload", "Workload"),
        ("ClusterQueue", "ClusterQueue"),
        ("Cohort", "Cohort"),
        ("LocalQueue", "LocalQueue"),
        ("Namespace", "Namespace"),
        ("ResourceFlavor", "ResourceFlavor"),
        ("WorkloadPriorityClass", "WorkloadPriorityClass"),
    ],
)
def test_core_kind(kind: str, core: str) -> None:
    assert core_kind(kind) == core
    assert (kind in WORKLOAD_KINDS) == (core == "Workload")


def test_core_kind_unknown() -> None:
    with pytest.raises(ManifestError) as info:
        core_kind("Deployment")
    assert info.value.field == "kind" and "Deployment" in str(info.value)


def test_input_is_not_mutated() -> None:
    manifests = [
        rayjob(ray_spec(worker("w", 2)), submissionMode="SidecarMode"),
        raycluster(ray_spec(), annotations={"ray.io/ft-enabled": "true"}),
        job(),
        cq(namespaceSelector={}),
    ]
    before = copy.deepcopy(manifests)
    for m in manifests:
        parse_object(m)
    assert manifests == before


# --- never any other exception ---------------------------------------------------------------

VALID = [
    workload(
        podSets=[
            {
                "name": "main",
                "count": 2,
                "minCount": 1,
                "template": template(
                    container({"cpu": "1"}, {"memory": "1Gi"}),
                    initContainers=[container({"cpu": "2"})],
                    nodeSelector={"a": "b"},
                    tolerations=[{"key": "k", "operator": "Exists"}],
                ),
            }
        ]
    ),
    cq(
        cohort="c",
        namespaceSelector={"matchLabels": {"a": "b"}},
        preemption={"reclaimWithinCohort": "Any"},
        resourceGroups=[
            group(
                ["cpu", "memory"], ("f", [quota("cpu", 1, lendingLimit=1), quota("memory", "1Gi")])
            )
        ],
    ),
    rayjob(ray_spec(worker("w", 2))),
    job(parallelism=3, annotations={"kueue.x-k8s.io/job-min-parallelism": "1"}),
    doc("ResourceFlavor", "rf", spec={"nodeTaints": [{"key": "k", "effect": "NoSchedule"}]}),
]
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_corrupted_manifests_raise_only_manifest_error(data: st.DataObject) -> None:
    manifest = copy.deepcopy(data.draw(st.sampled_from(VALID)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(manifest)[1:]))
        parent = manifest
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JUNK)
        if path[-1] not in (parent if isinstance(parent, dict) else range(len(parent))):
            break
    try:
        parse_object(manifest)
    except ManifestError as exc:
        assert exc.reason and str(exc)
