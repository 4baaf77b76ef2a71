"""Queueing configuration from manifests: Namespace, ResourceFlavor, ClusterQueue, Cohort,
LocalQueue, WorkloadPriorityClass and AdmissionCheck.

Each parser reads one Kubernetes/Kueue document (``kueue.x-k8s.io`` v1beta1 or v1beta2 field names)
into its core object, applying the CRD defaults and rejecting what Kueue's CRD rules and validating
webhooks (``pkg/webhooks/clusterqueue_webhook.go``, ``cohort_webhook.go``,
``resourceflavor_webhook.go``) reject, with the same reasons. It does not resolve references between
objects (a missing flavor or cohort is the cluster's business) and does no I/O.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpuaas.core.manifest_common import (
    Ctx,
    check_dns_label,
    check_dns_subdomain,
    check_qualified_name,
    enum_value,
    item_map,
    label_map,
    label_selector,
    non_negative_seconds,
    opt_int,
    opt_list,
    opt_map,
    opt_str,
    quantity_exact,
    taints,
    tolerations,
)
from gpuaas.core.objects import (
    AdmissionCheck,
    BorrowWithinCohort,
    CheckRule,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityAction,
    FungibilityPreference,
    LocalQueue,
    Namespace,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    WorkloadPriorityClass,
)
from gpuaas.core.quantity import INT64_MAX, is_cpu

MIN_RUNTIME_ANNOTATION = "gpuaas.dev/min-runtime-seconds"

MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 64  # kubebuilder MaxItems on ResourceGroup.flavors
MAX_RESOURCES = 64  # per group (coveredResources) and per flavor (resources)
MAX_TOTAL = 256  # flavors, and covered resources, across all groups (webhook)
MAX_FLAVOR_RESOURCE_PAIRS = 512  # per group (webhook)

_STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
_NANO = Fraction(1, 10**9)


def parse_namespace(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Namespace:
    labels = label_map(ctx, meta, "labels", "metadata.labels")
    assert ctx.name is not None
    # The API server always sets this label; selectors such as the seed's rely on it.
    labels.setdefault("kubernetes.io/metadata.name", ctx.name)
    return Namespace(name=ctx.name, labels=labels)


def parse_resource_flavor(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> ResourceFlavor:
    spec = opt_map(ctx, doc, "spec", "spec") or {}
    node_labels = label_map(ctx, spec, "nodeLabels", "spec.nodeLabels")
    if len(node_labels) > 8:
        raise ctx.err("spec.nodeLabels", f"must have at most 8 entries, got {len(node_labels)}")
    node_taints = taints(ctx, spec, "nodeTaints", "spec.nodeTaints")
    if len(node_taints) > 8:
        raise ctx.err("spec.nodeTaints", f"must have at most 8 items, got {len(node_taints)}")
    tols = tolerations(ctx, spec, "tolerations", "spec.tolerations")
    if len(tols) > 8:
        raise ctx.err("spec.tolerations", f"must have at most 8 items, got {len(tols)}")
    if spec.get("topologyName") is not None and not node_labels:
        raise ctx.err("spec", "at least one nodeLabel is required when topology is set")
    assert ctx.name is not None
    return ResourceFlavor(
        name=ctx.name, node_labels=node_labels, node_taints=node_taints, tolerations=tols
    )


def _int_quantity(value: Fraction, resource: str) -> int:
    """Kueue's int64 for a quantity already known to be valid: milli for CPU, rounded away from 0,
    clamped to int64 as Kueue's ResourceValue (SafeMilliValue, SafeValue) clamps it: a nominal
    quota of ``1E`` CPUs is the largest quota there is, not an error."""
    scaled = value * 1000 if is_cpu(resource) else value
    n, d = scaled.numerator, scaled.denominator
    result = n if d == 1 else (-((-n) // d) if n > 0 else n // d)
    return max(-INT64_MAX - 1, min(result, INT64_MAX))


def _non_negative(ctx: Ctx, raw: Any, path: str) -> Fraction:
    value = quantity_exact(ctx, raw, path)
    if value < 0:
        raise ctx.err(path, "must be greater than or equal to 0")
    return value


def parse_resource_groups(
    ctx: Ctx, spec: dict[str, Any], has_parent: bool, is_cohort: bool
) -> list[ResourceGroup]:
    """``spec.resourceGroups`` as ``validateResourceGroups`` and the CRD schema check them."""
    raw_groups = opt_list(ctx, spec, "resourceGroups", "spec.resourceGroups")
    if len(raw_groups) > MAX_RESOURCE_GROUPS:
        raise ctx.err(
            "spec.resourceGroups",
            f"must have at most {MAX_RESOURCE_GROUPS} items, got {len(raw_groups)}",
        )
    parent_word = "parent" if is_cohort else "cohort"
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    total_flavors = total_covered = 0
    groups = []
    for gi, raw_group in enumerate(raw_groups):
        gp = f"spec.resourceGroups[{gi}]"
        group = item_map(ctx, raw_group, gp)
        if group.get("coveredResources") is None:
            raise ctx.err(f"{gp}.coveredResources", "required value")
        covered: list[str] = []
        for ri, res in enumerate(
            opt_list(ctx, group, "coveredResources", f"{gp}.coveredResources")
        ):
            rp = f"{gp}.coveredResources[{ri}]"
            if type(res) is not str or not res:
                raise ctx.err(rp, f"must be a resource name, got {res!r}")
            check_qualified_name(ctx, res, rp)
            if res in seen_resources:
                raise ctx.err(
                    rp,
                    f"Duplicate value: {res!r}: a resource may appear in only one "
                    "resourceGroup and only once",
                )
            seen_resources.add(res)
            covered.append(res)
        if not covered:
            raise ctx.err(f"{gp}.coveredResources", "must have at least 1 item")
        if len(covered) > MAX_RESOURCES:
            raise ctx.err(f"{gp}.coveredResources", f"must have at most {MAX_RESOURCES} items")
        raw_flavors = opt_list(ctx, group, "flavors", f"{gp}.flavors")
        if not raw_flavors:
            raise ctx.err(f"{gp}.flavors", "must have at least 1 item")
        if len(raw_flavors) > MAX_FLAVORS_PER_GROUP:
            raise ctx.err(
                f"{gp}.flavors",
                f"must have at most {MAX_FLAVORS_PER_GROUP} items, got {len(raw_flavors)}",
            )
        flavors = []
        for fi, raw_flavor in enumerate(raw_flavors):
            fp = f"{gp}.flavors[{fi}]"
            flavors.append(
                _flavor_quotas(ctx, raw_flavor, covered, fp, gp, has_parent, is_cohort, parent_word)
            )
            name = flavors[-1].name
            if name in seen_flavors:
                raise ctx.err(
                    f"{fp}.name",
                    f"Duplicate value: {name!r}: a flavor may appear in "
                    "only one resourceGroup and only once",
                )
            seen_flavors.add(name)
        pairs = sum(len(f.resources) for f in flavors)
        if pairs > MAX_FLAVOR_RESOURCE_PAIRS:
            raise ctx.err(
                gp,
                "number of flavor-resource combinations in a resourceGroup must be "
                f"≤ {MAX_FLAVOR_RESOURCE_PAIRS}, got {pairs}",
            )
        total_flavors += len(flavors)
        total_covered += len(covered)
        groups.append(ResourceGroup(covered_resources=tuple(covered), flavors=flavors))
    if total_flavors > MAX_TOTAL:
        raise ctx.err(
            "spec.resourceGroups",
            "total number of flavors across all resourceGroups "
            f"must be ≤ {MAX_TOTAL}, got {total_flavors}",
        )
    if total_covered > MAX_TOTAL:
        raise ctx.err(
            "spec.resourceGroups",
            "total number of covered resources across all "
            f"resourceGroups must be ≤ {MAX_TOTAL}, got {total_covered}",
        )
    return groups


def _flavor_quotas(
    ctx: Ctx,
    raw: Any,
    covered: list[str],
    fp: str,
    gp: str,
    has_parent: bool,
    is_cohort: bool,
    parent_word: str,
) -> FlavorQuotas:
    flavor = item_map(ctx, raw, fp)
    name = opt_str(ctx, flavor, "name", f"{fp}.name")
    if not name:
        raise ctx.err(f"{fp}.name", "required value")
    check_dns_subdomain(ctx, name, f"{fp}.name")
    raw_resources = opt_list(ctx, flavor, "resources", f"{fp}.resources")
    if not raw_resources:
        raise ctx.err(f"{fp}.resources", "must have at least 1 item")
    if len(raw_resources) != len(covered):
        # Kueue's CRD rule on ResourceGroup: every flavor lists exactly the covered resources.
        raise ctx.err(
            gp,
            "flavors must have the same number of resources as the coveredResources "
            f"(flavor {name!r} has {len(raw_resources)}, coveredResources has "
            f"{len(covered)})",
        )
    quotas: dict[str, ResourceQuota] = {}
    for ri, raw_quota in enumerate(raw_resources):
        rp = f"{fp}.resources[{ri}]"
        quota = item_map(ctx, raw_quota, rp)
        res = opt_str(ctx, quota, "name", f"{rp}.name")
        if res != covered[ri]:
            raise ctx.err(
                f"{rp}.name",
                f"{res!r} must match the name in coveredResources "
                f"({covered[ri]!r} at this position)",
            )
        nominal = _non_negative(ctx, quota.get("nominalQuota"), f"{rp}.nominalQuota")
        borrowing = lending = None
        if quota.get("borrowingLimit") is not None:
            bp = f"{rp}.borrowingLimit"
            borrowing = _non_negative(ctx, quota["borrowingLimit"], bp)
            if not has_parent:
                raise ctx.err(bp, f"must be nil when {parent_word} is empty")
        if quota.get("lendingLimit") is not None:
            lp = f"{rp}.lendingLimit"
            lending = _non_negative(ctx, quota["lendingLimit"], lp)
            if not has_parent:
                raise ctx.err(lp, f"must be nil when {parent_word} is empty")
            if not is_cohort and lending > nominal:
                raise ctx.err(lp, "must be less than or equal to the nominalQuota")
        quotas[res] = ResourceQuota(
            nominal=_int_quantity(nominal, res),
            borrowing_limit=None if borrowing is None else _int_quantity(borrowing, res),
            lending_limit=None if lending is None else _int_quantity(lending, res),
        )
    return FlavorQuotas(name=name, resources=quotas)


def _fair_weight(ctx: Ctx, spec: dict[str, Any]) -> float:
    fair = opt_map(ctx, spec, "fairSharing", "spec.fairSharing")
    if not fair or fair.get("weight") is None:
        return 1.0
    path = "spec.fairSharing.weight"
    weight = quantity_exact(ctx, fair["weight"], path)
    if weight < 0:
        raise ctx.err(path, "must be greater than or equal to 0")
    if 0 < weight <= _NANO:
        raise ctx.err(path, "When not 0, weight must be > 10e-9")
    return float(weight)


def _reference(ctx: Ctx, spec: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """A name that Kueue spells differently across versions (``cohort``/``cohortName``, ...)."""
    found: str | None = None
    found_key = ""
    for key in keys:
        value = opt_str(ctx, spec, key, f"spec.{key}")
        if not value:
            continue
        if found is not None and value != found:
            raise ctx.err(f"spec.{key}", f"{value!r} disagrees with spec.{found_key} {found!r}")
        check_dns_subdomain(ctx, value, f"spec.{key}")
        found, found_key = value, key
    return found


def _preemption(ctx: Ctx, spec: dict[str, Any]) -> Preemption:
    raw = opt_map(ctx, spec, "preemption", "spec.preemption")
    if not raw:
        return Preemption()
    p = "spec.preemption"
    within = enum_value(
        ctx,
        raw,
        "withinClusterQueue",
        f"{p}.withinClusterQueue",
        ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
        "Never",
    )
    reclaim = enum_value(
        ctx,
        raw,
        "reclaimWithinCohort",
        f"{p}.reclaimWithinCohort",
        ("Never", "LowerPriority", "Any"),
        "Never",
    )
    bwc = BorrowWithinCohort()
    raw_bwc = opt_map(ctx, raw, "borrowWithinCohort", f"{p}.borrowWithinCohort")
    if raw_bwc:
        bp = f"{p}.borrowWithinCohort"
        policy = enum_value(
            ctx, raw_bwc, "policy", f"{bp}.policy", ("Never", "LowerPriority"), "Never"
        )
        threshold = opt_int(ctx, raw_bwc, "maxPriorityThreshold", f"{bp}.maxPriorityThreshold")
        bwc = BorrowWithinCohort(policy=PreemptionPolicy(policy), max_priority_threshold=threshold)
    if reclaim == "Never" and bwc.policy != PreemptionPolicy.NEVER:
        raise ctx.err(p, "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    return Preemption(
        within_cluster_queue=PreemptionPolicy(within),
        reclaim_within_cohort=PreemptionPolicy(reclaim),
        borrow_within_cohort=bwc,
    )


def _fungibility(ctx: Ctx, spec: dict[str, Any]) -> FlavorFungibility:
    raw = opt_map(ctx, spec, "flavorFungibility", "spec.flavorFungibility")
    if not raw:
        return FlavorFungibility()
    p = "spec.flavorFungibility"
    v1beta1 = ctx.api_version.endswith("/v1beta1")
    # v1beta1 still accepts the deprecated names, which conversion turns into MayStopSearch.
    borrow_ok = (
        ("MayStopSearch", "TryNextFlavor", "Borrow")
        if v1beta1
        else ("MayStopSearch", "TryNextFlavor")
    )
    preempt_ok = (
        ("MayStopSearch", "TryNextFlavor", "Preempt")
        if v1beta1
        else ("MayStopSearch", "TryNextFlavor")
    )
    borrow = enum_value(ctx, raw, "whenCanBorrow", f"{p}.whenCanBorrow", borrow_ok, "MayStopSearch")
    preempt = enum_value(
        ctx, raw, "whenCanPreempt", f"{p}.whenCanPreempt", preempt_ok, "TryNextFlavor"
    )
    when_borrow = (
        FungibilityAction.MAY_STOP_SEARCH if borrow == "Borrow" else FungibilityAction(borrow)
    )
    when_preempt = (
        FungibilityAction.MAY_STOP_SEARCH if preempt == "Preempt" else FungibilityAction(preempt)
    )
    preference = None
    if raw.get("preference") is not None:
        pref = enum_value(
            ctx,
            raw,
            "preference",
            f"{p}.preference",
            ("BorrowingOverPreemption", "PreemptionOverBorrowing"),
            "",
        )
        if (
            when_borrow != FungibilityAction.TRY_NEXT_FLAVOR
            or when_preempt != FungibilityAction.TRY_NEXT_FLAVOR
        ):
            raise ctx.err(
                f"{p}.preference",
                f'preference "{pref}" requires both whenCanBorrow and '
                "whenCanPreempt to be TryNextFlavor",
            )
        preference = FungibilityPreference(pref)
    return FlavorFungibility(
        when_can_borrow=when_borrow, when_can_preempt=when_preempt, preference=preference
    )


MAX_ADMISSION_CHECKS = 64  # kubebuilder MaxItems on admissionChecks and on onFlavors


def _check_reference(ctx: Ctx, name: str, path: str) -> None:
    """Kueue's AdmissionCheckReference: 1 to 316 characters, no pattern (a name no
    AdmissionCheck can have leaves the ClusterQueue inactive, as a missing check does)."""
    if len(name) > 316:
        raise ctx.err(path, f"must be no more than 316 characters, got {len(name)}")


def _admission_checks(ctx: Ctx, spec: dict[str, Any]) -> tuple[CheckRule, ...]:
    """``spec.admissionChecks`` (v1beta1 only) or ``spec.admissionChecksStrategy``, never both."""
    plain = opt_list(ctx, spec, "admissionChecks", "spec.admissionChecks")
    if plain and ctx.api_version.endswith("/v1beta2"):
        raise ctx.err(
            "spec.admissionChecks",
            "unknown field in kueue.x-k8s.io/v1beta2; use spec.admissionChecksStrategy",
        )
    strategy = opt_map(ctx, spec, "admissionChecksStrategy", "spec.admissionChecksStrategy")
    if plain and strategy is not None:
        raise ctx.err(
            "spec", "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both"
        )
    if len(plain) > MAX_ADMISSION_CHECKS:
        raise ctx.err("spec.admissionChecks", f"must have at most {MAX_ADMISSION_CHECKS} items")
    rules: list[CheckRule] = []
    seen: set[str] = set()
    for i, raw in enumerate(plain):
        path = f"spec.admissionChecks[{i}]"
        if type(raw) is not str or not raw:
            raise ctx.err(path, f"must be a name, got {raw!r}")
        _check_reference(ctx, raw, path)
        if raw in seen:
            raise ctx.err(path, f"Duplicate value: {raw!r}")
        seen.add(raw)
        rules.append(CheckRule(raw))
    if strategy is not None:
        sp = "spec.admissionChecksStrategy.admissionChecks"
        raw_rules = opt_list(ctx, strategy, "admissionChecks", sp)
        if len(raw_rules) > MAX_ADMISSION_CHECKS:
            raise ctx.err(sp, f"must have at most {MAX_ADMISSION_CHECKS} items")
        for i, raw in enumerate(raw_rules):
            rule = item_map(ctx, raw, f"{sp}[{i}]")
            name = opt_str(ctx, rule, "name", f"{sp}[{i}].name")
            if not name:
                raise ctx.err(f"{sp}[{i}].name", "required value")
            _check_reference(ctx, name, f"{sp}[{i}].name")
            if name in seen:
                raise ctx.err(f"{sp}[{i}].name", f"Duplicate value: {name!r}")
            seen.add(name)
            flavors: list[str] = []
            fp = f"{sp}[{i}].onFlavors"
            raw_flavors = opt_list(ctx, rule, "onFlavors", fp)
            if len(raw_flavors) > MAX_ADMISSION_CHECKS:
                raise ctx.err(fp, f"must have at most {MAX_ADMISSION_CHECKS} items")
            for j, flavor in enumerate(raw_flavors):
                if type(flavor) is not str or not flavor:
                    raise ctx.err(f"{fp}[{j}]", f"must be a ResourceFlavor name, got {flavor!r}")
                check_dns_subdomain(ctx, flavor, f"{fp}[{j}]")
                if flavor in flavors:
                    raise ctx.err(f"{fp}[{j}]", f"Duplicate value: {flavor!r}")
                flavors.append(flavor)
            rules.append(CheckRule(name, tuple(flavors)))
    return tuple(rules)


def parse_admission_check(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> AdmissionCheck:
    """An AdmissionCheck as its CRD validates it; ``status.conditions`` Active is kept."""
    spec = opt_map(ctx, doc, "spec", "spec") or {}
    controller = spec.get("controllerName")
    if type(controller) is not str or not controller:
        raise ctx.err("spec.controllerName", "required value: a non-empty string")
    if len(controller) > 253:
        raise ctx.err("spec.controllerName", "must be no more than 253 characters")
    params = None
    raw_params = opt_map(ctx, spec, "parameters", "spec.parameters")
    if raw_params is not None:
        fields = []
        for key in ("apiGroup", "kind", "name"):
            value = opt_str(ctx, raw_params, key, f"spec.parameters.{key}")
            if not value:
                raise ctx.err(f"spec.parameters.{key}", "required value")
            fields.append(value)
        check_dns_subdomain(ctx, fields[0], "spec.parameters.apiGroup")
        check_dns_label(ctx, fields[2], "spec.parameters.name")
        params = (fields[0], fields[1], fields[2])
    active: bool | None = None
    message = ""
    status = opt_map(ctx, doc, "status", "status") or {}
    for i, raw in enumerate(opt_list(ctx, status, "conditions", "status.conditions")):
        cond = item_map(ctx, raw, f"status.conditions[{i}]")
        if cond.get("type") == "Active":
            active = cond.get("status") == "True"
            message = opt_str(ctx, cond, "message", f"status.conditions[{i}].message")
    assert ctx.name is not None
    return AdmissionCheck(ctx.name, controller, params, active, message)


def parse_cluster_queue(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> ClusterQueue:
    spec = opt_map(ctx, doc, "spec", "spec") or {}
    cohort = _reference(ctx, spec, ("cohortName", "cohort"))
    selector = None
    if spec.get("namespaceSelector") is not None:
        selector = label_selector(ctx, spec["namespaceSelector"], "spec.namespaceSelector")
    strategy = enum_value(
        ctx,
        spec,
        "queueingStrategy",
        "spec.queueingStrategy",
        ("StrictFIFO", "BestEffortFIFO"),
        "BestEffortFIFO",
    )
    groups = parse_resource_groups(ctx, spec, has_parent=cohort is not None, is_cohort=False)
    stop = enum_value(ctx, spec, "stopPolicy", "spec.stopPolicy", _STOP_POLICIES, "None")
    annotations = opt_map(ctx, meta, "annotations", "metadata.annotations") or {}
    min_runtime = 0.0
    if MIN_RUNTIME_ANNOTATION in annotations:
        raw = annotations[MIN_RUNTIME_ANNOTATION]
        if type(raw) is not str:
            raise ctx.err(
                f"metadata.annotations[{MIN_RUNTIME_ANNOTATION}]", f"must be a string, got {raw!r}"
            )
        min_runtime = non_negative_seconds(ctx, annotations, MIN_RUNTIME_ANNOTATION) or 0.0
    assert ctx.name is not None
    return ClusterQueue(
        name=ctx.name,
        cohort=cohort,
        namespace_selector=selector,
        queueing_strategy=QueueingStrategy(strategy),
        resource_groups=groups,
        preemption=_preemption(ctx, spec),
        flavor_fungibility=_fungibility(ctx, spec),
        stop_policy=StopPolicy(stop),
        fair_weight=_fair_weight(ctx, spec),
        admission_checks=_admission_checks(ctx, spec),
        min_runtime_seconds=min_runtime,
    )


def parse_cohort(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Cohort:
    spec = opt_map(ctx, doc, "spec", "spec") or {}
    parent = _reference(ctx, spec, ("parentName", "parent"))
    groups = parse_resource_groups(ctx, spec, has_parent=parent is not None, is_cohort=True)
    assert ctx.name is not None
    return Cohort(
        name=ctx.name, parent=parent, resource_groups=groups, fair_weight=_fair_weight(ctx, spec)
    )


def parse_local_queue(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> LocalQueue:
    spec = opt_map(ctx, doc, "spec", "spec") or {}
    cq = opt_str(ctx, spec, "clusterQueue", "spec.clusterQueue")
    if not cq:
        raise ctx.err("spec.clusterQueue", "required value")
    check_dns_subdomain(ctx, cq, "spec.clusterQueue")
    stop = enum_value(ctx, spec, "stopPolicy", "spec.stopPolicy", _STOP_POLICIES, "None")
    assert ctx.name is not None and ctx.namespace is not None
    return LocalQueue(
        namespace=ctx.namespace, name=ctx.name, cluster_queue=cq, stop_policy=StopPolicy(stop)
    )


def parse_priority_class(
    ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]
) -> WorkloadPriorityClass:
    value = opt_int(ctx, doc, "value", "value")
    if value is None:
        raise ctx.err("value", "required value")
    assert ctx.name is not None
    return WorkloadPriorityClass(name=ctx.name, value=value)
