"""Kueue v0.19.2's own webhook test cases, as manifests gpuaas must accept or refuse the same way.

Each case is one table entry from Kueue's tests, named in its id and comment:
``pkg/webhooks/{clusterqueue,cohort,resourceflavor,workload}_webhook_test.go`` (unit tests that call
the validating webhook directly) and ``test/integration/singlecluster/webhook/core/*_test.go``
(Ginkgo entries run against a real API server, so they also see the CRD's OpenAPI and CEL rules).
Kueue's test wrappers build v1beta2 objects; the manifests here are the YAML those objects would be,
so ``cohortName``/``parentName`` and ``admissionChecksStrategy`` are used unless a case says v1beta1.

A refused case names the field as gpuaas reports it. Where Kueue's field path differs only in form,
the comment says so (Kueue reports a bad map key at the map, ``spec.nodeLabels``, where gpuaas
names the key, ``spec.nodeLabels[@abc]``; a fair-sharing weight at ``spec.fairSharing`` where
gpuaas says ``spec.fairSharing.weight``). Cases on which gpuaas and Kueue disagree are not here: they
are listed, with the rule each side applies, in the conformance notes (``conf-fail/webhook.md``).
Status-only cases (``status.admission``, ``status.reclaimablePods``, podSetUpdates) are left out:
the API server drops ``status`` from a create or update of a Kueue object, so a user's manifest
never reaches those rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.test_manifests import doc
from gpuaas.core.cluster import ApplyError, Cluster
from gpuaas.core.manifests import ManifestError, parse_object
from gpuaas.core.objects import (
    ClusterQueue,
    FungibilityAction,
    PreemptionPolicy,
    QueueingStrategy,
    StopPolicy,
)
from gpuaas.core.state import Phase

V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"

Doc = dict[str, Any]

# --- builders, after Kueue's utiltestingapi wrappers ----------------------------------------


def obj(kind: str, name: str | None, api: str = V1B2, ns: str | None = None, **body: Any) -> Doc:
    """test_manifests' ``doc``, in Kueue's newer API version by default (its wrappers' own)."""
    return doc(kind, name, api, ns, **body)


def res(name: str, nominal: str = "0", borrowing: str = "", lending: str = "") -> Doc:
    """``FlavorQuotas.Resource(name, nominal, borrowing, lending)``: "" leaves a limit unset."""
    r: Doc = {"name": name, "nominalQuota": nominal}
    if borrowing:
        r["borrowingLimit"] = borrowing
    if lending:
        r["lendingLimit"] = lending
    return r


def fq(name: str, *resources: Doc) -> Doc:
    """``MakeFlavorQuotas(name).Resource(...)...``."""
    return {"name": name, "resources": list(resources)}


def rg(*flavors: Doc, covered: list[str] | None = None) -> Doc:
    """``ResourceGroup(flavors...)``: coveredResources are the first flavor's, unless given."""
    if covered is None:
        covered = [r["name"] for r in flavors[0]["resources"]] if flavors else []
    return {"coveredResources": covered, "flavors": list(flavors)}


def cq(*groups: Doc, name: str = "cluster-queue", api: str = V1B2, **spec: Any) -> Doc:
    if groups:
        spec["resourceGroups"] = list(groups)
    return obj("ClusterQueue", name, api, spec=spec)


def cohort(*groups: Doc, name: str | None = "cohort", api: str = V1B2, **spec: Any) -> Doc:
    if groups:
        spec["resourceGroups"] = list(groups)
    return obj("Cohort", name, api, spec=spec)


def flavor(name: str = "resource-flavor", api: str = V1B2, **spec: Any) -> Doc:
    return obj("ResourceFlavor", name, api, spec=spec)


def check(params: Doc | None = None, name: str = "admission-check") -> Doc:
    spec: Doc = {"controllerName": "controller-name"}
    if params is not None:
        spec["parameters"] = params
    return obj("AdmissionCheck", name, spec=spec)


def cpu(name: str = "cpu", **limits: str) -> Doc:
    return res(name, "1", limits.get("borrowing", ""), limits.get("lending", ""))


def container(
    requests: Doc | None = None, limits: Doc | None = None, name: str = "c", **extra: Any
) -> Doc:
    resources: Doc = {"requests": requests or {}}
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **extra}


def podset(name: str | None = "main", count: int = 1, *containers: Doc, **extra: Any) -> Doc:
    """``MakePodSet(name, count)``: one container "c" with empty requests, restartPolicy Never."""
    spec: Doc = {"restartPolicy": "Never", "containers": list(containers) or [container()]}
    for key in ("initContainers", "resources"):
        if key in extra:
            spec[key] = extra.pop(key)
    template: Doc = {"spec": spec}
    if "metadata" in extra:
        template["metadata"] = extra.pop("metadata")
    ps: Doc = {"count": count, "template": template, **extra}
    if name is not None:
        ps["name"] = name
    return ps


def wl(
    *podsets: Doc,
    name: str = "workload-test",
    api: str = V1B2,
    annotations: Doc | None = None,
    **spec: Any,
) -> Doc:
    """``MakeWorkload(name, ns)``: one podset "main" of one pod unless podsets are given."""
    spec.setdefault("podSets", list(podsets) or [podset()])
    d = obj("Workload", name, api, "core", spec=spec)
    if annotations is not None:
        d["metadata"]["annotations"] = annotations
    return d


def lq(cluster_queue: str, name: str = "queue-test", ns: str = "core") -> Doc:
    return obj("LocalQueue", name, ns=ns, spec={"clusterQueue": cluster_queue})


def many_flavors(n: int, prefix: str = "f", resource: str = "cpu") -> list[Doc]:
    """``makeFlavors(n)``: flavors f000, f001, ... each with one resource."""
    return [fq(f"{prefix}{i:03d}", res(resource, "1")) for i in range(n)]


def many_resources(n: int, prefix: str = "res") -> list[Doc]:
    return [res(f"{prefix}{i:03d}", "1") for i in range(n)]


def groups_of_flavors(total: int) -> list[Doc]:
    """``total`` flavors spread over groups of at most 64 (the CRD's per-group limit), one
    resource per group: Kueue's unit test puts them all in one group, which its CRD refuses."""
    out, i = [], 0
    while total > 0:
        n = min(64, total)
        out.append(rg(*many_flavors(n, prefix=f"g{i}-f", resource=f"r{i}")))
        total -= n
        i += 1
    return out


def groups_of_resources(total: int) -> list[Doc]:
    """``total`` covered resources spread over groups of at most 64, one flavor per group."""
    out, i = [], 0
    while total > 0:
        n = min(64, total)
        out.append(rg(fq(f"flavor{i}", *many_resources(n, prefix=f"g{i}-r"))))
        total -= n
        i += 1
    return out


def combinations(flavors: int, resources: int) -> Doc:
    """``makeFlavorResourceCombinations``: one group, every flavor covering every resource."""
    names = many_resources(resources)
    return rg(*[fq(f"f{i:03d}", *names) for i in range(flavors)])


RG0 = "spec.resourceGroups[0]"
Q0 = f"{RG0}.flavors[0].resources[0]"
PS0 = "spec.podSets[0]"
T0 = f"{PS0}.template.spec"

# --- ClusterQueue ---------------------------------------------------------------------------

CQ_ACCEPTED = [
    pytest.param(
        cq(admissionChecksStrategy={"admissionChecks": [{"name": "My_Check"}]}),
        id="crd:AdmissionCheckReference has no pattern (the queue is inactive, not refused)",
    ),
    pytest.param(
        cq(api=V1B1, admissionChecks=["My_Check"]),
        id="crd:v1beta1 admissionChecks items have no pattern either",
    ),
    # clusterqueue_webhook_test.go TestValidateClusterQueue
    pytest.param(
        cq(rg(fq("default", res("cpu")))), id="cq-unit:built-in resources with qualified names"
    ),
    pytest.param(
        cq(admissionChecksStrategy={"admissionChecks": [{"name": "ac1"}]}),
        id="cq-unit:admissionChecks defined",
    ),
    pytest.param(
        # Kueue's flavor1 has no resources (the unit test skips the CRD's minItems): one added.
        cq(
            rg(fq("flavor1", res("cpu"))),
            admissionChecksStrategy={
                "admissionChecks": [{"name": "ac1", "onFlavors": ["flavor1"]}]
            },
        ),
        id="cq-unit:admissionCheckStrategy defined with a valid flavor",
    ),
    pytest.param(cq(cohortName="prod"), id="cq-unit:in cohort"),
    pytest.param(
        cq(rg(fq("default", res("example.com/gpu")))),
        id="cq-unit:extended resources with qualified names",
    ),
    pytest.param(cq(rg(fq("x86", res("cpu")))), id="cq-unit:flavor with qualified names"),
    pytest.param(cq(rg(fq("x86", res("cpu", "0")))), id="cq-unit:flavor quota with zero value"),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "0"))), cohortName="cohort"),
        id="cq-unit:flavor quota with borrowingLimit 0",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "", "0"))), cohortName="cohort"),
        id="cq-unit:flavor quota with lendingLimit 0",
    ),
    pytest.param(
        # Go's empty string is omitted from the JSON it sends: in YAML, the field left out.
        cq(),
        id="cq-unit:empty queueing strategy is supported",
    ),
    pytest.param(
        cq(
            rg(fq("alpha", res("cpu"), res("memory")), fq("beta", res("cpu"), res("memory"))),
            rg(fq("gamma", res("example.com/gpu")), fq("omega", res("example.com/gpu"))),
        ),
        id="cq-unit:multiple resource groups",
    ),
    pytest.param(
        cq(
            preemption={
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
            }
        ),
        id="cq-unit:valid preemption with borrowWithinCohort",
    ),
    pytest.param(
        cq(preemption={"reclaimWithinCohort": "Never"}),
        id="cq-unit:existing cluster queue ... nil borrowWithinCohort field",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "BorrowingOverPreemption",
            }
        ),
        id="cq-unit:flavorFungibility preference BorrowingOverPreemption with both TryNextFlavor",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            }
        ),
        id="cq-unit:flavorFungibility preference PreemptionOverBorrowing with both TryNextFlavor",
    ),
    pytest.param(
        # The ConcurrentAdmission gate is alpha, off by default: the webhook checks nothing.
        cq(
            rg(fq("flavor1", res("cpu", "1"))),
            concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}},
        ),
        id="cq-unit:valid ConcurrentAdmissionPolicy",
    ),
    # TestValidateTotalFlavors / TestValidateTotalCoveredResources / combinations (at the limit)
    pytest.param(cq(rg(*many_flavors(10))), id="cq-unit:total flavors within limit (10 flavors)"),
    pytest.param(cq(*groups_of_flavors(256)), id="cq-unit:total flavors at limit (256 flavors)"),
    pytest.param(
        cq(rg(fq("default", *many_resources(10)))),
        id="cq-unit:within limit (10 covered resources)",
    ),
    pytest.param(cq(*groups_of_resources(256)), id="cq-unit:at limit (256 covered resources)"),
    pytest.param(cq(combinations(1, 10)), id="cq-unit:combinations within limit (1 x 10)"),
    pytest.param(cq(combinations(8, 64)), id="cq-unit:combinations at limit (8 x 64 = 512)"),
    # test/integration/.../clusterqueue_test.go "Validate ClusterQueue on creation"
    pytest.param(cq(preemption={}), id="cq-int:Should allow ... empty preemption"),
    pytest.param(
        cq(
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        ),
        id="cq-int:Should allow ... preemption policies",
    ),
    pytest.param(cq(fairSharing={"weight": "0"}), id="cq-int:Should allow zero FairSharing weight"),
    pytest.param(
        cq(fairSharing={"weight": "0.1"}), id="cq-int:Should allow fractional FairSharing weight"
    ),
    pytest.param(
        cq(fairSharing={"weight": "1m"}), id="cq-int:Should allow small FairSharing weight"
    ),
    pytest.param(
        cq(fairSharing={"weight": "1u"}), id="cq-int:Should allow even smaller FairSharing weight"
    ),
    pytest.param(
        cq(fairSharing={"weight": "2n"}), id="cq-int:Should allow smallest FairSharing weight"
    ),
    pytest.param(cq(fairSharing={}), id="cq-int:Defaulting: Default fair sharing"),
    # The same, in v1beta1 spelling (cohort, admissionChecks), as older Kueue YAML has it.
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "0", "1"))), api=V1B1, cohort="cohort"),
        id="cq-v1beta1:borrowingLimit and lendingLimit with cohort",
    ),
    pytest.param(cq(api=V1B1, admissionChecks=["ac1"]), id="cq-v1beta1:admissionChecks defined"),
]

CQ_REFUSED = [
    # clusterqueue_webhook_test.go TestValidateClusterQueue
    pytest.param(
        cq(rg(fq("default", res("@cpu")))),
        f"{RG0}.coveredResources[0]",
        id="cq-unit:invalid resource name",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "-1")))), f"{Q0}.nominalQuota", id="cq-unit:negative quota"
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "-1"))), cohortName="cohort"),
        f"{Q0}.borrowingLimit",
        id="cq-unit:flavor quota with negative borrowingLimit",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "", "-1"))), cohortName="cohort"),
        f"{Q0}.lendingLimit",
        id="cq-unit:flavor quota with negative lendingLimit",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "", "1")))),
        f"{Q0}.lendingLimit",
        id="cq-unit:flavor quota with lendingLimit and empty cohort",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "", "2"))), cohortName="cohort"),
        f"{Q0}.lendingLimit",
        id="cq-unit:flavor quota with lendingLimit greater than nominalQuota",
    ),
    pytest.param(
        # Kueue: spec.namespaceSelector.matchLabels (the map); gpuaas names the key.
        cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
        "spec.namespaceSelector.matchLabels[nospecialchars^=@]",
        id="cq-unit:namespaceSelector with invalid labels",
    ),
    pytest.param(
        cq(namespaceSelector={"matchExpressions": [{"key": "key", "operator": "In"}]}),
        "spec.namespaceSelector.matchExpressions[0].values",
        id="cq-unit:namespaceSelector with invalid expressions",
    ),
    pytest.param(
        # Kueue reports both resources[0].name and resources[1].name; gpuaas the first.
        cq(
            rg(
                fq("alpha", res("cpu"), res("memory")),
                fq("beta", res("memory"), res("cpu")),
                covered=["cpu", "memory"],
            )
        ),
        f"{RG0}.flavors[1].resources[0].name",
        id="cq-unit:resources in a flavor in different order",
    ),
    pytest.param(
        cq(rg(fq("alpha", res("cpu"), res("memory"))), rg(fq("beta", res("memory")))),
        "spec.resourceGroups[1].coveredResources[0]",
        id="cq-unit:resource in more than one resource group",
    ),
    pytest.param(
        cq(rg(fq("alpha", res("cpu")), fq("beta", res("cpu"))), rg(fq("beta", res("memory")))),
        "spec.resourceGroups[1].flavors[0].name",
        id="cq-unit:flavor in more than one resource group",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "MayStopSearch",
                "preference": "BorrowingOverPreemption",
            }
        ),
        "spec.flavorFungibility.preference",
        id="cq-unit:flavorFungibility preference set but whenCanPreempt != TryNextFlavor",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "MayStopSearch",
                "preference": "BorrowingOverPreemption",
            }
        ),
        "spec.flavorFungibility.preference",
        id="cq-unit:flavorFungibility preference set but whenCanBorrow != TryNextFlavor",
    ),
    pytest.param(
        cq(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            }
        ),
        "spec.flavorFungibility.preference",
        id="cq-unit:flavorFungibility preference PreemptionOverBorrowing but whenCanBorrow != TryNextFlavor",
    ),
    # TestValidateTotalFlavors / TestValidateTotalCoveredResources / combinations (over)
    pytest.param(
        cq(*groups_of_flavors(257)), "spec.resourceGroups", id="cq-unit:over limit (257 flavors)"
    ),
    pytest.param(
        cq(*groups_of_resources(257)),
        "spec.resourceGroups",
        id="cq-unit:over limit (257 covered resources)",
    ),
    pytest.param(cq(combinations(9, 64)), RG0, id="cq-unit:combinations over limit (9 x 64 = 576)"),
    # test/integration/.../clusterqueue_test.go "Validate ClusterQueue on creation"
    pytest.param(
        cq(rg(fq("x86", res("cpu", "2", "-1"))), cohortName="cohort"),
        f"{Q0}.borrowingLimit",
        id="cq-int:Should have non-negative borrowing limit",
    ),
    pytest.param(cq(rg()), f"{RG0}.coveredResources", id="cq-int:Should have at least one flavor"),
    pytest.param(
        cq(rg(fq("foo"))), f"{RG0}.coveredResources", id="cq-int:Should have at least one resource"
    ),
    pytest.param(
        cq(rg(fq("invalid_name", res("cpu", "5")))),
        f"{RG0}.flavors[0].name",
        id="cq-int:Should have qualified flavor name",
    ),
    pytest.param(
        cq(rg(fq("x86", res("@cpu", "5")))),
        f"{RG0}.coveredResources[0]",
        id="cq-int:Should have qualified resource name",
    ),
    pytest.param(
        # Kueue (CRD maxItems 64) at the flavor's resources; gpuaas at coveredResources first.
        cq(rg(fq("flavor", *many_resources(65, prefix="r")))),
        f"{RG0}.coveredResources",
        id="cq-int:Should have valid resources quantity",
    ),
    pytest.param(
        cq(rg(*many_flavors(65))), f"{RG0}.flavors", id="cq-int:Should have valid flavors quantity"
    ),
    pytest.param(
        cq(queueingStrategy="unknown"),
        "spec.queueingStrategy",
        id="cq-int:Should forbid ... unknown clusterQueueingStrategy",
    ),
    pytest.param(
        cq(preemption={"reclaimWithinCohort": "unknown"}),
        "spec.preemption.reclaimWithinCohort",
        id="cq-int:Should forbid ... unknown preemption.withinCohort",
    ),
    pytest.param(
        cq(preemption={"withinClusterQueue": "unknown"}),
        "spec.preemption.withinClusterQueue",
        id="cq-int:Should forbid ... unknown preemption.withinClusterQueue",
    ),
    pytest.param(
        cq(cohortName="@prod"), "spec.cohortName", id="cq-int:Should forbid ... invalid cohort"
    ),
    pytest.param(
        cq(rg(fq("invalid_name"), covered=["cpu"])),
        f"{RG0}.flavors[0].name",
        id="cq-int:Should forbid ... flavor with unqualified names",
    ),
    pytest.param(
        # Kueue: the CEL rule on the resource group (spec.resourceGroups[0]).
        cq(rg(fq("alpha", res("cpu")), covered=["cpu", "memory"])),
        RG0,
        id="cq-int:Should forbid ... missing resources in a flavor",
    ),
    pytest.param(
        cq(rg(fq("alpha", res("cpu"), res("memory")), covered=["cpu"])),
        RG0,
        id="cq-int:Should forbid ... missing resources in a flavor (extra resource)",
    ),
    pytest.param(
        cq(rg(fq("alpha", res("cpu"), res("memory")), covered=["blah"])),
        RG0,
        id="cq-int:Should forbid ... missing resources in a flavor and mismatch",
    ),
    pytest.param(
        cq(
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            }
        ),
        "spec.preemption",
        id="cq-int:Should forbid ... reclaimWithinCohort=Never, while borrowWithinCohort!=nil",
    ),
    pytest.param(
        cq(fairSharing={"weight": "1n"}),
        "spec.fairSharing.weight",  # Kueue: spec.fairSharing
        id="cq-int:Should forbid threshold FairSharing weight",
    ),
    pytest.param(
        cq(fairSharing={"weight": "0.0000000001"}),
        "spec.fairSharing.weight",
        id="cq-int:Should forbid collapsed FairSharing weight",
    ),
    pytest.param(
        cq(fairSharing={"weight": "-1"}),
        "spec.fairSharing.weight",
        id="cq-int:Should forbid negative FairSharing weight",
    ),
    pytest.param(
        # "Should have qualified flavor names when updating": the new object is checked whole.
        cq(rg(fq("@x86", res("memory")))),
        f"{RG0}.flavors[0].name",
        id="cq-int:Should have qualified flavor names when updating",
    ),
    pytest.param(
        cq(rg(fq("x86", res("cpu", "1", "1"))), api=V1B1),
        f"{Q0}.borrowingLimit",
        id="cq-v1beta1:borrowingLimit and empty cohort",
    ),
]

# --- Cohort ---------------------------------------------------------------------------------

COHORT_ACCEPTED = [
    pytest.param(cohort(), id="cohort-int:Should allow default Cohort"),
    pytest.param(cohort(parentName="prod"), id="cohort-int:Should allow valid parent name"),
    pytest.param(
        cohort(rg(fq("default", res("cpu")))), id="cohort-int:Should allow resource with valid name"
    ),
    pytest.param(
        cohort(rg(fq("default", res("example.com/gpu")))),
        id="cohort-int:Should allow extended resources with valid name",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu")))), id="cohort-int:Should allow flavor with valid name"
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "0"))), parentName="parent"),
        id="cohort-int:Should allow borrowingLimit 0 when parent exists",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "1"))), parentName="parent"),
        id="cohort-int:Should allow borrowingLimit when parent exists",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "", "1"))), parentName="parent"),
        id="cohort-int:Should allow lendingLimit when parent exists",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "0", "", "0"))), parentName="parent"),
        id="cohort-int:Should allow lendingLimit 0 when parent exists",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "3", "", "5"))), parentName="parent"),
        id="cohort-int:Should allow lending limit to exceed nominal quota",
    ),
    pytest.param(
        cohort(
            rg(fq("alpha", res("cpu"), res("memory")), fq("beta", res("cpu"), res("memory"))),
            rg(fq("gamma", res("example.com/gpu")), fq("omega", res("example.com/gpu"))),
        ),
        id="cohort-int:Should allow multiple resource groups",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "1"}), id="cohort-int:Should allow FairSharing weight"
    ),
    pytest.param(
        cohort(fairSharing={"weight": "0"}), id="cohort-int:Should allow zero FairSharing weight"
    ),
    pytest.param(
        cohort(fairSharing={"weight": "0.5"}),
        id="cohort-int:Should allow fractional FairSharing weight",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "1m"}), id="cohort-int:Should allow small FairSharing weight"
    ),
    pytest.param(
        cohort(fairSharing={"weight": "1u"}),
        id="cohort-int:Should allow even smaller FairSharing weight",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "2n"}),
        id="cohort-int:Should allow smallest FairSharing weight",
    ),
    pytest.param(cohort(parentName="cohort2"), id="cohort-int:Should update parent"),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "1", "1"))), api=V1B1, parent="parent"),
        id="cohort-v1beta1:limits when parent exists",
    ),
]

COHORT_REFUSED = [
    pytest.param(cohort(name=None), "metadata.name", id="cohort-int:Should disallow empty name"),
    pytest.param(
        cohort(parentName="@prod"),
        "spec.parentName",
        id="cohort-int:Should reject invalid parent name",
    ),
    pytest.param(
        cohort(rg()),
        f"{RG0}.coveredResources",
        id="cohort-int:ResourceGroup should have at least one flavor",
    ),
    pytest.param(
        cohort(rg(fq("foo"))),
        f"{RG0}.coveredResources",
        id="cohort-int:FlavorQuota should have at least one resource",
    ),
    pytest.param(
        cohort(rg(fq("@x86", res("cpu", "5")))),
        f"{RG0}.flavors[0].name",
        id="cohort-int:Should reject invalid flavor name",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("@cpu", "5")))),
        f"{RG0}.coveredResources[0]",
        id="cohort-int:Should allow valid resource name (sic: @cpu, refused)",
    ),
    pytest.param(
        cohort(rg(*[fq(f"f{i}", res("cpu")) for i in range(65)])),
        f"{RG0}.flavors",
        id="cohort-int:Should reject too many flavors in resource group",
    ),
    pytest.param(
        cohort(rg(fq("flavor", *many_resources(65, prefix="cpu")))),
        f"{RG0}.coveredResources",
        id="cohort-int:Should reject too many resources in resource group",
    ),
    pytest.param(
        cohort(rg(fq("default", res("@cpu")))),
        f"{RG0}.coveredResources[0]",
        id="cohort-int:Should reject resource with invalid name",
    ),
    pytest.param(
        cohort(rg(fq("x_86", res("cpu")))),
        f"{RG0}.flavors[0].name",
        id="cohort-int:Should reject flavor with invalid name",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "-1")))),
        f"{Q0}.nominalQuota",
        id="cohort-int:Should reject negative nominal quota",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "-1")))),
        f"{Q0}.borrowingLimit",
        id="cohort-int:Should reject negative borrowing limit",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "", "-1")))),
        f"{Q0}.lendingLimit",
        id="cohort-int:Should reject negative lending limit",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "1")))),
        f"{Q0}.borrowingLimit",
        id="cohort-int:Should reject borrowingLimit when no parent",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "", "1")))),
        f"{Q0}.lendingLimit",
        id="cohort-int:Should reject lendingLimit when no parent",
    ),
    pytest.param(
        cohort(rg(fq("x86", res("cpu", "1", "", "1")))),
        f"{Q0}.lendingLimit",
        id="cohort-unit:flavor quota with lendingLimit and empty parent",
    ),
    pytest.param(
        cohort(
            rg(
                fq("alpha", res("cpu"), res("memory")),
                fq("beta", res("memory"), res("cpu")),
                covered=["cpu", "memory"],
            )
        ),
        f"{RG0}.flavors[1].resources[0].name",
        id="cohort-int:Should reject resources in a flavor in different order",
    ),
    pytest.param(
        cohort(rg(fq("alpha", res("cpu")), covered=["cpu", "memory"])),
        RG0,
        id="cohort-int:Should reject missing resources in a flavor",
    ),
    pytest.param(
        cohort(rg(fq("alpha", res("cpu"), res("memory")), covered=["cpu"])),
        RG0,
        id="cohort-int:Should reject resource not defined in resource group",
    ),
    pytest.param(
        cohort(rg(fq("alpha", res("cpu"), res("memory"))), rg(fq("beta", res("memory")))),
        "spec.resourceGroups[1].coveredResources[0]",
        id="cohort-int:Should reject resource in more than one resource group",
    ),
    pytest.param(
        cohort(rg(fq("alpha", res("cpu")), fq("beta", res("cpu"))), rg(fq("beta", res("memory")))),
        "spec.resourceGroups[1].flavors[0].name",
        id="cohort-int:Should reject flavor in more than one resource group",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "-1"}),
        "spec.fairSharing.weight",  # Kueue: spec.fairSharing
        id="cohort-int:Should forbid negative FairSharing weight",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "1n"}),
        "spec.fairSharing.weight",
        id="cohort-int:Should forbid threshold FairSharing weight",
    ),
    pytest.param(
        cohort(fairSharing={"weight": "0.0000000001"}),
        "spec.fairSharing.weight",
        id="cohort-int:Should forbid collapsed FairSharing weight",
    ),
    pytest.param(
        cohort(parentName="@cohort2"),
        "spec.parentName",
        id="cohort-int:Should reject invalid parent (update)",
    ),
]

# --- ResourceFlavor -------------------------------------------------------------------------

SPOT = {"key": "spot", "value": "true", "effect": "NoSchedule"}

RF_ACCEPTED = [
    pytest.param(flavor(), id="rf-unit:empty"),
    pytest.param(flavor(nodeLabels={"foo": "bar"}, nodeTaints=[SPOT]), id="rf-unit:valid"),
    pytest.param(
        flavor(
            nodeTaints=[{"key": f"t{i}", "effect": "NoExecute"} for i in range(8)],
            nodeLabels={f"l{i}": "" for i in range(8)},
        ),
        id="rf-int:valid number of nodeSelector and taint",
    ),
    pytest.param(
        flavor(
            tolerations=[{"key": "abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]
        ),
        id="rf-int:invalid tolerations (its one valid toleration alone)",
    ),
    pytest.param(
        flavor(api=V1B1, nodeLabels={"foo": "bar"}, nodeTaints=[SPOT]), id="rf-v1beta1:valid"
    ),
]

RF_REFUSED = [
    pytest.param(
        flavor(nodeLabels={"@abc": "foo"}),
        "spec.nodeLabels[@abc]",  # Kueue: spec.nodeLabels
        id="rf-unit:invalid label name",
    ),
    pytest.param(
        flavor(nodeLabels={"foo": "@abc"}),
        "spec.nodeLabels[foo]",  # Kueue: spec.nodeLabels
        id="rf-unit:invalid label value",
    ),
    pytest.param(
        flavor(nodeTaints=[{"key": f"t{i}", "effect": "NoExecute"} for i in range(9)]),
        "spec.nodeTaints",
        id="rf-int:invalid number of taint",
    ),
    pytest.param(
        flavor(nodeLabels={f"l{i}": "" for i in range(9)}),
        "spec.nodeLabels",
        id="rf-int:invalid number of nodeSelector",
    ),
    pytest.param(
        flavor(nodeTaints=[{"key": "foo", "value": "bar", "effect": "Invalid"}]),
        "spec.nodeTaints[0].effect",
        id="rf-int:Updating a ResourceFlavor with invalid taints",
    ),
    pytest.param(
        flavor(
            nodeTaints=[{"key": "skdajf"}, {"key": "@foo", "value": "bar", "effect": "NoSchedule"}]
        ),
        "spec.nodeTaints[0].effect",
        id="rf-int:Should fail to create with invalid taints",
    ),
    pytest.param(
        flavor(nodeTaints=[{"key": "@foo", "value": "bar", "effect": "NoSchedule"}]),
        "spec.nodeTaints[0].key",
        id="rf-int:Should fail to create with invalid taints (the bad key alone)",
    ),
    pytest.param(
        flavor(nodeLabels={"@abc": "foo"}),
        "spec.nodeLabels[@abc]",
        id="rf-int:Should fail to create with invalid label name",
    ),
    pytest.param(
        flavor(
            tolerations=[
                {"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Exists", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "not-valid"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            ]
        ),
        "spec.tolerations[0].key",
        id="rf-int:Should fail to create with invalid tolerations",
    ),
    pytest.param(
        flavor(
            tolerations=[{"key": "abc", "operator": "Exists", "value": "v", "effect": "NoSchedule"}]
        ),
        "spec.tolerations[0].value",
        id="rf-int:invalid tolerations (Exists with a value alone)",
    ),
    pytest.param(
        flavor(
            tolerations=[{"key": "abc", "operator": "Equal", "value": "v", "effect": "not-valid"}]
        ),
        "spec.tolerations[0].effect",
        id="rf-int:invalid tolerations (bad effect alone)",
    ),
]

# --- LocalQueue and AdmissionCheck ----------------------------------------------------------

LQ_ACCEPTED = [
    pytest.param(lq("foo"), id="lq-int:Should reject the change of spec.clusterQueue (its create)"),
]

LQ_REFUSED = [
    pytest.param(
        lq("invalid_name"),
        "spec.clusterQueue",
        id="lq-int:Should reject bad value for spec.clusterQueue",
    ),
]

PARAMS = {"apiGroup": "ref.api.group", "kind": "RefKind", "name": "ref-name"}

# Kueue's refused entries have no metadata.name (so the API server refuses them whatever the
# spec); they are named here so that the rule each entry is about is the one tested.
AC_ACCEPTED = [
    pytest.param(check(name="foo"), id="ac-int:Should allow ... no parameters"),
    pytest.param(check(PARAMS, name="foo"), id="ac-int:Should allow ... valid spec"),
    pytest.param(
        check({"apiGroup": "ref.api.group2", "kind": "RefKind2", "name": "ref-name2"}),
        id="ac-int:Should allow to update AdmissionCheck when changing parameters",
    ),
    pytest.param(
        check(), id="ac-int:Should allow to update AdmissionCheck when removing parameters"
    ),
]

AC_REFUSED = [
    pytest.param(
        obj("AdmissionCheck", "ac", spec={"parameters": PARAMS}),
        "spec.controllerName",
        id="ac-int:Should fail ... no controller name",
    ),
    pytest.param(
        check({**PARAMS, "apiGroup": "ref.api.group/Bad"}),
        "spec.parameters.apiGroup",
        id="ac-int:Should fail ... bad ref api group",
    ),
    pytest.param(
        check({"kind": "RefKind", "name": "ref-name"}),
        "spec.parameters.apiGroup",
        id="ac-int:Should fail ... no ref api group",
    ),
    pytest.param(
        check({"apiGroup": "ref.api.group", "name": "ref-name"}),
        "spec.parameters.kind",
        id="ac-int:Should fail ... no ref kind",
    ),
    pytest.param(
        check({**PARAMS, "name": "ref-name/Bad"}),
        "spec.parameters.name",
        id="ac-int:Should fail ... bad ref name",
    ),
    pytest.param(
        check({"apiGroup": "ref.api.group", "kind": "RefKind"}),
        "spec.parameters.name",
        id="ac-int:Should fail ... no ref name",
    ),
    pytest.param(
        obj("AdmissionCheck", None, spec={"controllerName": "c"}),
        "metadata.name",
        id="ac-int:(no name)",
    ),
]

# --- Workload -------------------------------------------------------------------------------

POD_PRIORITY = {"group": "scheduling.k8s.io", "kind": "PriorityClass"}
WL_PRIORITY = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}

WL_ACCEPTED = [
    # workload_test.go (integration) and workload_webhook_test.go (unit)
    pytest.param(wl(podset(None)), id="wl-int:Should set default podSet name"),
    pytest.param(
        wl(*[podset(f"ps{i}", 1) for i in range(18)]), id="wl-int:podSets count at the maximum"
    ),
    pytest.param(
        wl(*[podset(f"ps{i}", 0) for i in range(3)]), id="wl-int:valid podSet, count can be 0"
    ),
    pytest.param(wl(*[podset(f"ps{i}", 3) for i in range(3)]), id="wl-int:valid podSet"),
    pytest.param(wl(podset("driver", 1), podset("workers", 100)), id="wl-int+unit:valid workload"),
    pytest.param(wl(priority=0), id="wl-int:omitted priorityClassRef is valid"),
    pytest.param(wl(maximumExecutionTimeSeconds=1), id="wl-int:valid maximumExexcutionTimeSeconds"),
    pytest.param(
        wl(podset("ok", 1, container({"cpu": "0"}))),
        id="wl-unit:should accept zero container resource request",
    ),
    pytest.param(
        # The PriorityBoost gate is alpha, off by default: the annotation is not read.
        wl(annotations={"kueue.x-k8s.io/priority-boost": "invalid"}),
        id="wl-unit:invalid priority-boost when feature off",
    ),
    pytest.param(
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/controller"}),
        id="wl-unit:valid AdmissionGatedBy annotation with single gate",
    ),
    pytest.param(
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/a,not.example.com/b"}),
        id="wl-unit:valid AdmissionGatedBy annotation with multiple gates",
    ),
    pytest.param(
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": " example.com/gate"}),
        id="wl-unit:AdmissionGatedBy annotation - leading space",
    ),
    pytest.param(
        wl(
            annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate ,example.com/gate2"}
        ),
        id="wl-unit:AdmissionGatedBy annotation - space before comma",
    ),
    pytest.param(
        wl(
            annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate, example.com/gate2"}
        ),
        id="wl-unit:AdmissionGatedBy annotation - space after comma",
    ),
    pytest.param(
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate "}),
        id="wl-unit:AdmissionGatedBy annotation - trailing space",
    ),
    pytest.param(
        wl(podset("main", 1, topologyRequest={"subGroupCount": 0})),
        id="wl-unit:non-negative subGroupCount is accepted without warning",
    ),
    pytest.param(
        wl(podset("main", 1, topologyRequest={"subGroupCount": -1})),
        id="wl-unit:negative subGroupCount is accepted with a warning",
    ),
    pytest.param(
        wl(priority=0, priorityClassRef={**POD_PRIORITY, "name": "low"}),
        id="wl-int:Should allow to change priority with priorityClassRef (its create)",
    ),
    pytest.param(
        wl(priority=1000, priorityClassRef={**WL_PRIORITY, "name": "high"}),
        id="wl-int:can update workload priority class (its create)",
    ),
    pytest.param(
        wl(
            api=V1B1,
            priority=0,
            priorityClassName="low",
            priorityClassSource="scheduling.k8s.io/priorityclass",
        ),
        id="wl-v1beta1:pod priority class with priority",
    ),
]

WL_REFUSED = [
    pytest.param(
        wl(podset(None), podset(None)),
        "spec.podSets[1].name",  # Kueue: the podSets list-map key (no default for two)
        id="wl-int:Shouldn't set podSet name if multiple",
    ),
    pytest.param(
        wl(name="workload-test", podSets=[]), "spec.podSets", id="wl-int:podSets count less than 1"
    ),
    pytest.param(
        wl(*[podset(f"ps{i}", 1) for i in range(19)]),
        "spec.podSets",
        id="wl-int:podSets count more than the maximum",
    ),
    pytest.param(wl(podset("@driver", 1)), f"{PS0}.name", id="wl-int:invalid podSet name"),
    pytest.param(
        wl(
            priority=100, priorityClassRef={"group": "test", "kind": "PriorityClass", "name": "low"}
        ),
        "spec.priorityClassRef",
        id="wl-int:invalid priorityClassRef.group",
    ),
    pytest.param(
        wl(
            priority=100,
            priorityClassRef={"group": "scheduling.k8s.io", "kind": "test", "name": "low"},
        ),
        "spec.priorityClassRef",
        id="wl-int:invalid priorityClassRef.kind",
    ),
    pytest.param(
        wl(
            priority=100,
            priorityClassRef={
                "group": "scheduling.k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "low",
            },
        ),
        "spec.priorityClassRef",
        id="wl-int:incompatible priorityClassRef.kind (scheduling.k8s.io)",
    ),
    pytest.param(
        wl(
            priority=100,
            priorityClassRef={"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "low"},
        ),
        "spec.priorityClassRef",
        id="wl-int:incompatible priorityClassRef.kind (kueue.x-k8s.io)",
    ),
    pytest.param(
        # Kueue: the CEL rule on spec; gpuaas: spec.priority.
        wl(priorityClassRef={**POD_PRIORITY, "name": "priority"}),
        "spec.priority",
        id="wl-int:priority should not be nil when priorityClassRef is set",
    ),
    pytest.param(wl(queueName="@invalid"), "spec.queueName", id="wl-int:invalid queueName"),
    pytest.param(
        wl(podset("bad", 1, container({"pods": "1"}), initContainers=[container({"pods": "1"})])),
        # Kueue lists initContainers[0] first (and containers[0] too); gpuaas stops at containers.
        f"{T0}.containers[0].resources.requests[pods]",
        id="wl-int+unit:should not request num-pods resource",
    ),
    pytest.param(
        wl(podset("bad", 1, container(limits={"pods": "1"}))),
        f"{T0}.containers[0].resources.limits[pods]",
        id="wl-int:should not limit num-pods resource",
    ),
    pytest.param(
        wl(
            podset(
                "bad",
                1,
                container(limits={"pods": "1"}),
                initContainers=[container(limits={"pods": "1"})],
            )
        ),
        # Kueue lists initContainers[0] first (and containers[0] too); gpuaas stops at containers.
        f"{T0}.containers[0].resources.limits[pods]",
        id="wl-unit:should reject reserved pods resource key in limits",
    ),
    pytest.param(
        wl(podset("bad", 1, container({"cpu": "-1"}))),
        f"{T0}.containers[0].resources.requests[cpu]",
        id="wl-int+unit:should not allow negative resource requests",
    ),
    pytest.param(
        wl(podset("bad", 1, initContainers=[container({"cpu": "-1"})])),
        f"{T0}.initContainers[0].resources.requests[cpu]",
        id="wl-unit:should reject negative initContainer resource request",
    ),
    pytest.param(
        wl(podset("bad", 1, resources={"requests": {"cpu": "-1"}})),
        f"{T0}.resources.requests[cpu]",
        id="wl-int+unit:should not allow negative pod-level resource requests",
    ),
    pytest.param(
        wl(podset("bad", 1, container(limits={"cpu": "-1"}))),
        f"{T0}.containers[0].resources.limits[cpu]",
        id="wl-unit:should reject negative container resource limit",
    ),
    pytest.param(
        wl(
            podset(
                "bad",
                1,
                container({"cpu": "1", "memory": "-1Gi"}, {"cpu": "2", "memory": "-2Gi"}),
            )
        ),
        f"{T0}.containers[0].resources.requests[memory]",
        id="wl-unit:should reject negative resource among multiple valid requests and limits",
    ),
    pytest.param(
        wl(podset("bad", 1, resources={"limits": {"memory": "-1Gi"}})),
        f"{T0}.resources.limits[memory]",
        id="wl-unit:should reject negative pod-level resource limit",
    ),
    pytest.param(
        wl(podset("ps1", 3, minCount=-1)),
        f"{PS0}.minCount",
        id="wl-int:invalid podSet minCount (negative)",
    ),
    pytest.param(
        wl(podset("ps1", 3, minCount=4)),
        f"{PS0}.minCount",
        id="wl-int:invalid podSet minCount (too big)",
    ),
    pytest.param(
        wl(podset("ps1", 3, minCount=2), podset("ps2", 3, minCount=1)),
        "spec.podSets",
        id="wl-int+unit:too many variable count podSets",
    ),
    pytest.param(
        wl(
            api=V1B1, priorityClassName="low", priorityClassSource="scheduling.k8s.io/priorityclass"
        ),
        "spec.priority",
        id="wl-v1beta1:pod priority class without priority",
    ),
]


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "manifest",
    CQ_ACCEPTED + COHORT_ACCEPTED + RF_ACCEPTED + LQ_ACCEPTED + AC_ACCEPTED + WL_ACCEPTED,
)
def test_kueue_accepts(manifest: Doc) -> None:
    parse_object(manifest)


@pytest.mark.parametrize(
    ("manifest", "field"),
    CQ_REFUSED + COHORT_REFUSED + RF_REFUSED + LQ_REFUSED + AC_REFUSED + WL_REFUSED,
)
def test_kueue_refuses(manifest: Doc, field: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_object(manifest)
    assert info.value.field == field, str(info.value)


def test_cq_defaults_as_kueue() -> None:
    """clusterqueue_test.go "Defaulting on creation": "All defaults" and "Default fair sharing"."""
    for manifest in (cq(name="foo"), cq(name="foo", fairSharing={})):
        got = parse_object(manifest)
        assert isinstance(got, ClusterQueue)
        assert got.queueing_strategy == QueueingStrategy.BEST_EFFORT_FIFO
        assert got.stop_policy == StopPolicy.NONE
        assert got.flavor_fungibility.when_can_borrow == FungibilityAction.MAY_STOP_SEARCH
        assert got.flavor_fungibility.when_can_preempt == FungibilityAction.TRY_NEXT_FLAVOR
        assert got.preemption.within_cluster_queue == PreemptionPolicy.NEVER
        assert got.preemption.reclaim_within_cohort == PreemptionPolicy.NEVER
        assert got.preemption.borrow_within_cohort.policy == PreemptionPolicy.NEVER
        assert got.fair_weight == 1.0


# --- updates: workload_test.go "Validate Workload on update" ---------------------------------


def _cluster_with(first: Doc, admitted: bool) -> Cluster:
    c = Cluster()
    setup = [
        obj("Namespace", "core", "v1"),
        flavor("default"),
        cq(rg(fq("default", res("cpu", "10"))), name="cq", namespaceSelector={}),
        lq("cq", "q1"),
        lq("cq", "q2"),
    ]
    for m in setup:
        c.apply(parse_object(m), 0)
    c.apply(parse_object(first), 0)
    key = f"core/{first['metadata']['name']}"
    if admitted:
        c.schedule(0)
        assert c.workloads[key].phase == Phase.ADMITTED
    else:
        assert c.workloads[key].phase != Phase.ADMITTED
    return c


def _q1(**spec: Any) -> Doc:
    return wl(queueName="q1", **spec)


WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_SOURCE = "scheduling.k8s.io/priorityclass"


WPC_REF = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"}
POD_REF = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}


def _v1b1(**spec: Any) -> Doc:
    return wl(api=V1B1, queueName="q1", **spec)


UPDATE_CASES = [
    # (old manifest, admitted before the update, new manifest, refused field or None)
    pytest.param(
        _q1(),
        True,
        _q1(podSets=[podset("main", 2)]),
        "spec.podSets",
        id="podSets should not be updated when has quota reservation: count",
    ),
    pytest.param(
        _q1(),
        True,
        _q1(podSets=[podset("main", 1, container({"cpu": "1"}, name="c-after"))]),
        "spec.podSets",
        id="podSets should not be updated: podSpec",
    ),
    pytest.param(
        _q1(), False, wl(queueName="q2"), None, id="queueName can be updated when not admitted"
    ),
    pytest.param(
        _q1(),
        True,
        wl(queueName="q2"),
        "spec.queueName",
        id="queueName should not be updated once admitted",
    ),
    pytest.param(
        _q1(),
        True,
        wl(),
        "spec.queueName",
        id="Should prevent removing queueName on admitted workload (issue 12552)",
    ),
    pytest.param(
        _q1(),
        False,
        _q1(podSets=[podset("main", 1, container(name="c-after"))]),
        None,
        id="updating podSets before setting reserve quota for workload",
    ),
    pytest.param(
        _q1(),
        False,
        _q1(priority=10),
        None,
        id="Should allow to change priority when QuotaReserved=false",
    ),
    pytest.param(
        _q1(), True, _q1(priority=10), None, id="Should allow to change priority (admitted)"
    ),
    pytest.param(
        _q1(priority=0, priorityClassRef={**POD_PRIORITY, "name": "low"}),
        True,
        _q1(priority=10, priorityClassRef={**POD_PRIORITY, "name": "low"}),
        None,
        id="Should allow to change priority with priorityClassRef (admitted)",
    ),
    pytest.param(
        _q1(),
        False,
        _q1(priority=100, priorityClassRef={**WL_PRIORITY, "name": "low"}),
        None,
        id="can set workload priorityClassRef when QuotaReserved=false",
    ),
    pytest.param(
        _q1(priority=1000, priorityClassRef={**WL_PRIORITY, "name": "high"}),
        True,
        _q1(priority=100, priorityClassRef={**WL_PRIORITY, "name": "low"}),
        None,
        id="can update workload priority class when QuotaReserved=true",
    ),
    pytest.param(
        _q1(priority=1000, priorityClassRef={**WL_PRIORITY, "name": "high"}),
        False,
        _q1(),
        None,
        id="can delete workload priority class when QuotaReserved=false",
    ),
    pytest.param(
        _q1(),
        False,
        _q1(maximumExecutionTimeSeconds=1),
        None,
        id="can add maximum execution time when not admitted",
    ),
    pytest.param(_q1(), True, _q1(active=False), None, id="v1beta2: can toggle active (admitted)"),
    pytest.param(
        wl(), False, wl(queueName="q"), None, id="queueName can be updated when admitting"
    ),
    pytest.param(
        _q1(podSets=[podset("main", 1, container({"cpu": "1"}))]),
        True,
        _q1(podSets=[podset("main", 2, container({"cpu": "1"}))]),
        "spec.podSets",
        id="Should not allow workload podSets count increase even when ElasticJobsViaWorkloadSlices",
    ),
    pytest.param(
        _q1(),
        False,
        _q1(priority=100, priorityClassRef={**POD_PRIORITY, "name": "low"}),
        None,
        id="can set pod priority class QuotaReserved=false",
    ),
    pytest.param(
        _q1(priority=1000, priorityClassRef={**POD_PRIORITY, "name": "high"}),
        False,
        _q1(priority=100, priorityClassRef={**POD_PRIORITY, "name": "low"}),
        None,
        id="can update pod priority class when QuotaReserved=false",
    ),
    pytest.param(
        _q1(priority=1000, priorityClassRef={**POD_PRIORITY, "name": "high"}),
        False,
        _q1(),
        None,
        id="can delete pod priority class when QuotaReserved=false",
    ),
    pytest.param(
        _q1(priority=1000, priorityClassRef={**WL_PRIORITY, "name": "high"}),
        False,
        _q1(priority=100, priorityClassRef={**WL_PRIORITY, "name": "low"}),
        None,
        id="can update workload priority class when QuotaReserved=false",
    ),
    pytest.param(
        _v1b1(priority=0, priorityClassName="low", priorityClassSource=WPC_SOURCE),
        True,
        _v1b1(priority=0, priorityClassName="high", priorityClassSource=WPC_SOURCE),
        None,
        id="v1beta1: can change priorityClassName when QuotaReserved=true and source is wpc",
    ),
    pytest.param(
        _v1b1(priority=0, priorityClassName="low", priorityClassSource=POD_SOURCE),
        True,
        _v1b1(priority=0, priorityClassName="low", priorityClassSource=POD_SOURCE, active=False),
        None,
        id="v1beta1: can toggle active on workload with pod priorityClassRef when QuotaReserved=true",
    ),
    pytest.param(
        _v1b1(),
        True,
        _v1b1(active=False),
        None,
        id="v1beta1: can toggle active on workload without priorityClassRef when QuotaReserved=true",
    ),
    # The CRD's CEL rules on a Workload's priority source while quota is reserved.
    pytest.param(
        _q1(),
        True,
        _q1(priorityClassRef=WPC_REF),
        "spec.priorityClassRef",
        id="can't set workload priority class when QuotaReserved=true",
    ),
    pytest.param(
        _q1(priorityClassRef=WPC_REF),
        True,
        _q1(),
        "spec.priorityClassRef",
        id="can't delete workload priority class when quota reserved when QuotaReserved=true",
    ),
    pytest.param(
        _q1(),
        True,
        _q1(priority=0, priorityClassRef=POD_REF),
        "spec.priorityClassRef",
        id="can't set pod priority class when QuotaReserved=true",
    ),
    pytest.param(
        _q1(priority=0, priorityClassRef=POD_REF),
        True,
        _q1(priority=0, priorityClassRef={**POD_REF, "name": "other"}),
        "spec.priorityClassRef",
        id="can't update pod priority class when QuotaReserved=true",
    ),
    pytest.param(
        _q1(priority=0, priorityClassRef=POD_REF),
        True,
        _q1(priority=0),
        "spec.priorityClassRef",
        id="can't delete pod priority class when QuotaReserved=true",
    ),
    pytest.param(
        _v1b1(priorityClassName="low", priorityClassSource=WPC_SOURCE),
        True,
        _v1b1(priority=0, priorityClassName="low", priorityClassSource=POD_SOURCE),
        "spec.priorityClassRef",
        id="v1beta1: can't change priorityClassSource when QuotaReserved=true",
    ),
    pytest.param(
        _v1b1(priority=0, priorityClassName="low", priorityClassSource=POD_SOURCE),
        True,
        _v1b1(priority=0, priorityClassName="high", priorityClassSource=POD_SOURCE),
        "spec.priorityClassRef",
        id="v1beta1: can't change priorityClassName when QuotaReserved=true and source is pod",
    ),
    pytest.param(
        _q1(priority=0, priorityClassRef=POD_REF),
        False,
        _q1(),
        None,
        id="can delete pod priority class when QuotaReserved=false",
    ),
    pytest.param(
        _q1(),
        True,
        _q1(maximumExecutionTimeSeconds=1),
        "spec.maximumExecutionTimeSeconds",
        id="cannot add maximum execution time when admitted",
    ),
    pytest.param(
        _q1(maximumExecutionTimeSeconds=1),
        True,
        _q1(maximumExecutionTimeSeconds=2),
        "spec.maximumExecutionTimeSeconds",
        id="cannot update maximum execution time when admitted",
    ),
    pytest.param(
        _q1(maximumExecutionTimeSeconds=1),
        False,
        _q1(maximumExecutionTimeSeconds=2),
        None,
        id="can update maximum execution time when not admitted",
    ),
]


@pytest.mark.parametrize(("old", "admitted", "new", "field"), UPDATE_CASES)
def test_kueue_workload_updates(old: Doc, admitted: bool, new: Doc, field: str | None) -> None:
    c = _cluster_with(old, admitted)
    if field is None:
        c.apply(parse_object(new), 1)
        return
    with pytest.raises(ApplyError) as info:
        c.apply(parse_object(new), 1)
    assert info.value.field == field


def test_kueue_local_queue_cluster_queue_is_immutable() -> None:
    """localqueue_test.go "Should reject the change of spec.clusterQueue" (the CRD's
    ``self == oldSelf``); re-applying it unchanged is accepted."""
    c = Cluster()
    c.apply(parse_object(lq("foo")), 0)
    c.apply(parse_object(lq("foo")), 1)
    with pytest.raises(ApplyError) as info:
        c.apply(parse_object(lq("bar")), 2)
    assert info.value.field == "spec.clusterQueue"
    assert c.local_queues[("core", "queue-test")].cluster_queue == "foo"
