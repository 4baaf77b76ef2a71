"""Open Cluster Management's cluster API as the placement evaluator reads it: parsed and checked.

``ManagedCluster`` (v1), ``ManagedClusterSet`` and ``ManagedClusterSetBinding`` (v1beta2),
``Placement`` and ``PlacementDecision`` (v1beta1) and ``AddOnPlacementScore`` (v1alpha1) of
``cluster.open-cluster-management.io``, checked as OCM's CRDs and webhooks check them (enums,
the weight range -10..10, score values -100..100, a binding named after its set). A refusal is a
``ManifestError`` naming the object, the field and the reason. Facts from
open-cluster-management-io/api ``cluster/v1*/types*.go``; names only, no behaviour of OCM's
controllers (that is ``core.placement``). Pure: no I/O, no clock (times are parsed, not read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpuaas.core.manifest_common import (
    Ctx,
    ManifestError,
    check_metadata,
    check_qualified_name,
    enum_value,
    item_map,
    label_map,
    label_selector,
    opt_bool,
    opt_int,
    opt_list,
    opt_map,
    opt_str,
    quantity_exact,
    taint_items,
)
from gpuaas.core.objects import LabelSelector

GROUP = "cluster.open-cluster-management.io"
KINDS = (
    "ManagedCluster",
    "ManagedClusterSet",
    "ManagedClusterSetBinding",
    "Placement",
    "PlacementDecision",
    "AddOnPlacementScore",
)
CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
TAINT_EFFECTS = ("NoSelect", "PreferNoSelect", "NoSelectIfNew")
SELECTOR_TYPES = ("ExclusiveClusterSetLabel", "LabelSelector")
MODES = ("Additive", "Exact")
BUILT_INS = ("Balance", "Steady", "ResourceAllocatableCPU", "ResourceAllocatableMemory", "Spread")
MAX_SCORE, MIN_SCORE = 100, -100


@dataclass(frozen=True, slots=True)
class ClusterTaint:
    key: str
    value: str = ""
    effect: str = "NoSelect"
    time_added: float | None = None


@dataclass(frozen=True, slots=True)
class ManagedCluster:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[ClusterTaint, ...] = ()
    claims: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ManagedClusterSet:
    name: str
    selector_type: str = "ExclusiveClusterSetLabel"
    selector: LabelSelector = field(default_factory=LabelSelector)

    def has(self, cluster: ManagedCluster) -> bool:
        if self.selector_type == "LabelSelector":
            return self.selector.matches(cluster.labels)
        return cluster.labels.get(CLUSTERSET_LABEL) == self.name


@dataclass(frozen=True, slots=True)
class SetBinding:
    namespace: str
    cluster_set: str


@dataclass(frozen=True, slots=True)
class ClusterPredicate:
    """One ``requiredClusterSelector``: its label and claim selectors must both match."""

    labels: LabelSelector | None = None
    claims: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    """One ``prioritizerPolicy.configurations`` entry: a score coordinate and its weight."""

    type: str  # BuiltIn | AddOn
    built_in: str = ""
    resource_name: str = ""
    score_name: str = ""
    weight: int = 1

    @property
    def coordinate(self) -> str:
        """OCM's prioritizer name: the builtIn's, or ``AddOn/<resource>/<score>``."""
        if self.type == "AddOn":
            return f"AddOn/{self.resource_name}/{self.score_name}"
        return self.built_in


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    namespace: str
    name: str
    cluster_sets: tuple[str, ...] = ()
    predicates: tuple[ClusterPredicate, ...] = ()
    number_of_clusters: int | None = None
    tolerations: tuple[Toleration, ...] = ()
    mode: str = "Additive"
    configurations: tuple[ScoreConfig, ...] = ()
    misconfigured: str = ""  # what OCM accepts at apply but reports as PlacementMisconfigured


@dataclass(frozen=True, slots=True)
class AddOnScore:
    cluster: str  # the namespace: the ManagedCluster's name
    resource_name: str
    scores: dict[str, int] = field(default_factory=dict)
    valid_until: float | None = None


def _ctx(doc: dict[str, Any]) -> tuple[Ctx, dict[str, Any]]:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    ns = meta.get("namespace")
    ctx = Ctx(str(doc.get("kind", "")), ns if isinstance(ns, str) else None,
              str(meta.get("name", "")), str(doc.get("apiVersion", "")))  # fmt: skip
    check_metadata(ctx, meta)
    return ctx, meta


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))"
)


def _days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def rfc3339_seconds(raw: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 date-time (None if it is not one); no clock."""
    m = _RFC3339.fullmatch(raw)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61):
        return None
    out = _days(y, mo, d) * 86400 + h * 3600 + mi * 60 + s + float(m.group(7) or 0)
    if m.group(8):
        offset = int(m.group(9)) * 3600 + int(m.group(10)) * 60
        out -= offset if m.group(8) == "+" else -offset
    return out


def _time(ctx: Ctx, raw: Any, path: str) -> float | None:
    if raw is None:
        return None
    seconds = rfc3339_seconds(raw) if isinstance(raw, str) else None
    if seconds is None:
        raise ctx.err(path, f"must be an RFC 3339 date-time, got {raw!r}")
    return seconds


def _section(ctx: Ctx, doc: dict[str, Any], key: str) -> dict[str, Any]:
    return opt_map(ctx, doc, key, key) or {}


def parse_managed_cluster(doc: dict[str, Any]) -> ManagedCluster:
    ctx, meta = _ctx(doc)
    spec, status = _section(ctx, doc, "spec"), _section(ctx, doc, "status")
    opt_bool(ctx, spec, "hubAcceptsClient", "spec.hubAcceptsClient", False)
    opt_int(ctx, spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", minimum=0)
    for i, raw in enumerate(
        opt_list(ctx, spec, "managedClusterClientConfigs", "spec.managedClusterClientConfigs")
    ):
        cfg = item_map(ctx, raw, f"spec.managedClusterClientConfigs[{i}]")
        opt_str(ctx, cfg, "url", f"spec.managedClusterClientConfigs[{i}].url")
    taints = [
        ClusterTaint(key, value, effect, _time(ctx, raw.get("timeAdded"), p))
        for key, value, effect, raw, p in taint_items(
            ctx, spec, "taints", "spec.taints", TAINT_EFFECTS, label_value=False
        )
    ]
    claims = {}
    for i, raw in enumerate(opt_list(ctx, status, "clusterClaims", "status.clusterClaims")):
        c = item_map(ctx, raw, f"status.clusterClaims[{i}]")
        claims[opt_str(ctx, c, "name", f"status.clusterClaims[{i}].name")] = opt_str(
            ctx, c, "value", f"status.clusterClaims[{i}].value"
        )
    allocatable = {
        str(k): quantity_exact(ctx, v, f"status.allocatable[{k}]")
        for k, v in (opt_map(ctx, status, "allocatable", "status.allocatable") or {}).items()
    }
    labels = label_map(ctx, meta, "labels", "metadata.labels")
    return ManagedCluster(str(meta.get("name", "")), labels, tuple(taints), claims, allocatable)


def parse_cluster_set(doc: dict[str, Any]) -> ManagedClusterSet:
    ctx, meta = _ctx(doc)
    spec = _section(ctx, doc, "spec")
    sel = opt_map(ctx, spec, "clusterSelector", "spec.clusterSelector") or {}
    kind = enum_value(ctx, sel, "selectorType", "spec.clusterSelector.selectorType",
                      SELECTOR_TYPES, "ExclusiveClusterSetLabel")  # fmt: skip
    selector = LabelSelector()
    if sel.get("labelSelector") is not None:
        selector = label_selector(ctx, sel["labelSelector"], "spec.clusterSelector.labelSelector")
    return ManagedClusterSet(str(meta.get("name", "")), kind, selector)


def parse_binding(doc: dict[str, Any]) -> SetBinding:
    ctx, meta = _ctx(doc)
    spec = _section(ctx, doc, "spec")
    cluster_set = opt_str(ctx, spec, "clusterSet", "spec.clusterSet")
    if not cluster_set:
        raise ctx.err("spec.clusterSet", "required value")
    if cluster_set != meta.get("name"):
        raise ctx.err(
            "spec.clusterSet",
            f"must equal metadata.name ({meta.get('name')!r}): the ManagedClusterSetBinding must "
            "have the same name as the ManagedClusterSet it binds",
        )
    return SetBinding(str(meta.get("namespace", "")), cluster_set)


def _tolerations(ctx: Ctx, spec: dict[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for i, raw in enumerate(opt_list(ctx, spec, "tolerations", "spec.tolerations")):
        p = f"spec.tolerations[{i}]"
        t = item_map(ctx, raw, p)
        key = opt_str(ctx, t, "key", f"{p}.key")
        if key:
            check_qualified_name(ctx, key, f"{p}.key")
        op = enum_value(ctx, t, "operator", f"{p}.operator", ("Equal", "Exists"), "Equal")
        value = opt_str(ctx, t, "value", f"{p}.value")
        effect = enum_value(ctx, t, "effect", f"{p}.effect", ("", *TAINT_EFFECTS), "")
        seconds = opt_int(ctx, t, "tolerationSeconds", f"{p}.tolerationSeconds",
                          minimum=-(1 << 63), maximum=(1 << 63) - 1)  # fmt: skip
        out.append(Toleration(key, op, value, effect, seconds))
    return tuple(out)


def _predicates(ctx: Ctx, spec: dict[str, Any]) -> tuple[ClusterPredicate, ...]:
    out = []
    for i, raw in enumerate(opt_list(ctx, spec, "predicates", "spec.predicates")):
        p = f"spec.predicates[{i}]"
        pred = item_map(ctx, raw, p)
        req = opt_map(ctx, pred, "requiredClusterSelector", f"{p}.requiredClusterSelector") or {}
        p = f"{p}.requiredClusterSelector"
        if req.get("celSelector") is not None:
            raise ctx.err(f"{p}.celSelector", "not supported by gpuaas (labelSelector and "
                          "claimSelector are)")  # fmt: skip
        labels = claims = None
        if req.get("labelSelector") is not None:
            labels = label_selector(ctx, req["labelSelector"], f"{p}.labelSelector")
        if req.get("claimSelector") is not None:
            claim = item_map(ctx, req["claimSelector"], f"{p}.claimSelector")
            claims = label_selector(ctx, {"matchExpressions": claim.get("matchExpressions")},
                                    f"{p}.claimSelector")  # fmt: skip
        out.append(ClusterPredicate(labels, claims))
    return tuple(out)


def _configurations(ctx: Ctx, policy: dict[str, Any]) -> tuple[tuple[ScoreConfig, ...], str]:
    out, problem = [], ""
    path = "spec.prioritizerPolicy.configurations"
    for i, raw in enumerate(opt_list(ctx, policy, "configurations", path)):
        p = f"{path}[{i}]"
        cfg = item_map(ctx, raw, p)
        weight = opt_int(ctx, cfg, "weight", f"{p}.weight", minimum=-10, maximum=10)
        coord = opt_map(ctx, cfg, "scoreCoordinate", f"{p}.scoreCoordinate")
        if coord is None:  # the deprecated ``name`` form: a builtIn by name
            name = opt_str(ctx, cfg, "name", f"{p}.name")
            if not name:
                problem = problem or "scoreCoordinate field is required"
            coord = {"type": "BuiltIn", "builtIn": name}
        p = f"{p}.scoreCoordinate"
        kind = enum_value(ctx, coord, "type", f"{p}.type", ("BuiltIn", "AddOn"), "BuiltIn")
        built_in = opt_str(ctx, coord, "builtIn", f"{p}.builtIn")
        resource = score = ""
        if kind == "AddOn":
            addon = opt_map(ctx, coord, "addOn", f"{p}.addOn")
            if addon is None:
                problem = problem or "addOn should not be empty"
            else:
                resource = opt_str(ctx, addon, "resourceName", f"{p}.addOn.resourceName")
                score = opt_str(ctx, addon, "scoreName", f"{p}.addOn.scoreName")
                if not resource or not score:
                    raise ctx.err(f"{p}.addOn", "resourceName and scoreName are required")
        elif built_in not in BUILT_INS[:4]:  # OCM's scheduler knows these four
            problem = problem or f"incorrect builtin prioritizer: {built_in}"
        out.append(ScoreConfig(kind, built_in, resource, score, 1 if weight is None else weight))
    return tuple(out), problem


def parse_placement(doc: dict[str, Any]) -> Placement:
    ctx, meta = _ctx(doc)
    spec = _section(ctx, doc, "spec")
    sets = []
    for i, raw in enumerate(opt_list(ctx, spec, "clusterSets", "spec.clusterSets")):
        if not isinstance(raw, str) or not raw:
            raise ctx.err(f"spec.clusterSets[{i}]", "must be a ManagedClusterSet name")
        sets.append(raw)
    number = opt_int(ctx, spec, "numberOfClusters", "spec.numberOfClusters", minimum=0)
    policy = opt_map(ctx, spec, "prioritizerPolicy", "spec.prioritizerPolicy") or {}
    mode = enum_value(ctx, policy, "mode", "spec.prioritizerPolicy.mode", (*MODES, ""), "Additive")
    configs, problem = _configurations(ctx, policy)
    return Placement(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        tuple(sets),
        _predicates(ctx, spec),
        number,
        _tolerations(ctx, spec),
        mode or "Additive",
        configs,
        problem,
    )


def decision_clusters(doc: dict[str, Any]) -> list[str]:
    """A PlacementDecision's ``status.decisions[].clusterName``, checked."""
    ctx, _ = _ctx(doc)
    status = _section(ctx, doc, "status")
    out = []
    for i, raw in enumerate(opt_list(ctx, status, "decisions", "status.decisions")):
        d = item_map(ctx, raw, f"status.decisions[{i}]")
        name = opt_str(ctx, d, "clusterName", f"status.decisions[{i}].clusterName")
        opt_str(ctx, d, "reason", f"status.decisions[{i}].reason")
        out.append(name)
    return out


def parse_score(doc: dict[str, Any]) -> AddOnScore:
    ctx, meta = _ctx(doc)
    status = _section(ctx, doc, "status")
    scores = {}
    for i, raw in enumerate(opt_list(ctx, status, "scores", "status.scores")):
        p = f"status.scores[{i}]"
        s = item_map(ctx, raw, p)
        name = opt_str(ctx, s, "name", f"{p}.name")
        if not name:
            raise ctx.err(f"{p}.name", "required value")
        value = opt_int(ctx, s, "value", f"{p}.value", minimum=MIN_SCORE, maximum=MAX_SCORE)
        if value is None:
            raise ctx.err(f"{p}.value", "required value")
        scores[name] = value
    valid_until = _time(ctx, status.get("validUntil"), "status.validUntil")
    return AddOnScore(str(meta.get("namespace", "")), str(meta.get("name", "")), scores,
                      valid_until)  # fmt: skip


def check(doc: dict[str, Any]) -> None:
    """Raise ``ManifestError`` if an OCM kind's document is one OCM's API server would refuse."""
    kind = doc.get("kind")
    if kind == "ManagedCluster":
        parse_managed_cluster(doc)
    elif kind == "ManagedClusterSet":
        parse_cluster_set(doc)
    elif kind == "ManagedClusterSetBinding":
        parse_binding(doc)
    elif kind == "Placement":
        parse_placement(doc)
    elif kind == "PlacementDecision":
        decision_clusters(doc)
    elif kind == "AddOnPlacementScore":
        parse_score(doc)
    else:
        raise ManifestError(str(kind), None, None, "kind", "not an Open Cluster Management kind")


def gpu_available_score(available: int) -> int:
    """The resource-usage-collect add-on's ``gpuClusterAvailable``: free allocatable GPUs
    normalized with min 0 and max 20 into -100..100 (SDK ``score.go``): over 20 is 100, none
    or fewer is -100, else ``int(200 * available / 20 - 100)``."""
    if available > 20:
        return MAX_SCORE
    if available <= 0:
        return MIN_SCORE
    return int(200 * available / 20 - 100)
