"""OCM's placement scheduler as a pure function: which ManagedClusters a Placement selects, and why.

Follows open-cluster-management-io/ocm ``pkg/placement/controllers/scheduling``: (1) the
ManagedClusterSets bound to the Placement's namespace by a ManagedClusterSetBinding (whose set
exists), intersected with ``spec.clusterSets`` when given; (2) their member clusters; (3) the
filters, predicates (ORed; a predicate's label and claim selectors ANDed) then taints against
tolerations (``PreferNoSelect`` never filters, ``NoSelectIfNew`` keeps clusters already decided,
``tolerationSeconds`` from the taint's ``timeAdded``); (4) the prioritizers, weights from
``prioritizerPolicy`` (Additive adds the policy's to the defaults Balance 1, Steady 1; Exact
uses only the policy's), each cluster's score the sum of weight x score, AddOn scores read from
the cluster's AddOnPlacementScore (0 when missing or past ``validUntil``); (5) clusters sorted by
score, highest first, ties by name, and the first ``numberOfClusters`` taken. The
``PlacementSatisfied`` condition's reason and message are OCM's. Every cluster not chosen gets
its reason, for ``explain`` and the dashboard. Pure: ``now`` is an argument, nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuaas.core.ocm import (
    MAX_SCORE,
    AddOnScore,
    ClusterPredicate,
    ClusterTaint,
    ManagedCluster,
    ManagedClusterSet,
    Placement,
    ScoreConfig,
    SetBinding,
    Toleration,
)

DEFAULT_WEIGHTS = {"Balance": 1, "Steady": 1}  # OCM's defaultPrioritizerConfig


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """The scheduler's answer for one Placement."""

    decisions: tuple[str, ...]  # the chosen clusters, best first
    satisfied: bool
    reason: str  # PlacementSatisfied's reason
    message: str
    misconfigured: str = ""  # PlacementMisconfigured's message, "" when configured well
    scores: dict[str, int] = field(default_factory=dict)  # total score per feasible cluster
    parts: dict[str, dict[str, int]] = field(default_factory=dict)  # prioritizer -> cluster ->
    excluded: dict[str, str] = field(default_factory=dict)  # cluster -> why not chosen
    warnings: tuple[str, ...] = ()  # e.g. expired AddOnPlacementScores


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the scheduler reads of the hub: every cluster, set, binding, score and decision."""

    clusters: Sequence[ManagedCluster]
    sets: Mapping[str, ManagedClusterSet]
    bindings: Sequence[SetBinding]
    scores: Mapping[tuple[str, str], AddOnScore] = field(default_factory=dict)  # (cluster, res)
    decided: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)  # (ns, name)


def _predicate_matches(pred: ClusterPredicate, cluster: ManagedCluster) -> bool:
    if pred.labels is not None and not pred.labels.matches(cluster.labels):
        return False
    return pred.claims is None or pred.claims.matches(cluster.claims)


def _tolerated(taint: ClusterTaint, tolerations: Sequence[Toleration], now: float) -> bool:
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if t.operator == "Equal" and t.value != taint.value:
            continue
        if t.seconds is None:
            return True
        added = taint.time_added if taint.time_added is not None else now
        if now < added + t.seconds:
            return True
    return False


def _untolerated(
    cluster: ManagedCluster, placement: Placement, in_decision: bool, now: float
) -> ClusterTaint | None:
    for taint in cluster.taints:
        if taint.effect == "PreferNoSelect":
            continue
        if taint.effect == "NoSelectIfNew" and in_decision:
            continue
        if not _tolerated(taint, placement.tolerations, now):
            return taint
    return None


def _weights(placement: Placement) -> dict[str, tuple[ScoreConfig, int]]:
    out: dict[str, tuple[ScoreConfig, int]] = {}
    if placement.mode != "Exact":
        for name, w in DEFAULT_WEIGHTS.items():
            out[name] = (ScoreConfig("BuiltIn", name), w)
    for cfg in placement.configurations:
        out[cfg.coordinate] = (cfg, cfg.weight)
    return {k: v for k, v in out.items() if v[1] != 0}


def _balance(placement: Placement, snap: Snapshot, names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (ns, name), clusters in snap.decided.items():
        if (ns, name) == (placement.namespace, placement.name):
            continue
        for c in clusters:
            counts[c] = counts.get(c, 0) + 1
    top = max(counts.values(), default=0)
    out = {}
    for n in names:
        if n in counts:
            out[n] = 2 * int(MAX_SCORE * (0.5 - counts[n] / top))
        else:
            out[n] = MAX_SCORE
    return out


def _allocatable(cfg: ScoreConfig, feasible: list[ManagedCluster]) -> dict[str, int]:
    resource = "cpu" if cfg.built_in.endswith("CPU") else "memory"
    have = {c.name: float(c.allocatable[resource]) for c in feasible if resource in c.allocatable}
    if not have:
        return {}
    low, high = min(have.values()), max(have.values())
    if high == low:
        return dict.fromkeys(have, MAX_SCORE)
    return {n: int(((v - low) / (high - low) - 0.5) * 2.0 * 100.0) for n, v in have.items()}


def _addon(
    cfg: ScoreConfig, snap: Snapshot, names: list[str], now: float, warnings: list[str]
) -> dict[str, int]:
    out = {}
    for n in names:
        out[n] = 0
        score = snap.scores.get((n, cfg.resource_name))
        if score is None:
            continue
        if score.valid_until is not None and now > score.valid_until:
            warnings.append(f"AddOnPlacementScores {n}/{cfg.resource_name} expired")
            continue
        out[n] = score.scores.get(cfg.score_name, 0)
    return out


def schedule(placement: Placement, snap: Snapshot, now: float) -> PlacementResult:
    """The clusters ``placement`` selects from ``snap`` at ``now``, with OCM's reasons."""
    decided = set(snap.decided.get((placement.namespace, placement.name), ()))
    # 1. The sets bound to the namespace, then those the Placement names.
    bound = sorted({b.cluster_set for b in snap.bindings
                    if b.namespace == placement.namespace and b.cluster_set in snap.sets})  # fmt: skip
    if not bound:
        return PlacementResult((), False, "NoManagedClusterSetBindings",
                               "No valid ManagedClusterSetBindings found in placement namespace")  # fmt: skip
    eligible = [s for s in bound if not placement.cluster_sets or s in placement.cluster_sets]
    if not eligible:
        return PlacementResult((), False, "NoIntersection", "None of ManagedClusterSets "
                               f"[{','.join(placement.cluster_sets)}] is bound to placement "
                               "namespace")  # fmt: skip
    # 2. Their members.
    excluded: dict[str, str] = {}
    members = []
    for c in sorted(snap.clusters, key=lambda c: c.name):
        if any(snap.sets[s].has(c) for s in eligible):
            members.append(c)
        else:
            excluded[c.name] = f"not in ManagedClusterSets [{','.join(eligible)}]"
    if not members:
        return PlacementResult((), False, "AllManagedClusterSetsEmpty", "All ManagedClusterSets "
                               f"[{','.join(eligible)}] have no member ManagedCluster",
                               excluded=excluded)  # fmt: skip
    if placement.misconfigured:
        return PlacementResult(tuple(sorted(decided)), False, "NotAllDecisionsScheduled",
                               placement.misconfigured, misconfigured=placement.misconfigured,
                               excluded=excluded)  # fmt: skip
    # 3. Filters: predicates, then taints.
    feasible = []
    for c in members:
        if placement.predicates and not any(_predicate_matches(p, c) for p in placement.predicates):
            excluded[c.name] = "matches none of the Placement's predicates"
            continue
        taint = _untolerated(c, placement, c.name in decided, now)
        if taint is not None:
            excluded[c.name] = f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
            continue
        feasible.append(c)
    # 4. Prioritizers.
    names = [c.name for c in feasible]
    total = dict.fromkeys(names, 0)
    parts: dict[str, dict[str, int]] = {}
    warnings: list[str] = []
    for coordinate, (cfg, weight) in sorted(_weights(placement).items()):
        if cfg.type == "AddOn":
            got = _addon(cfg, snap, names, now, warnings)
        elif cfg.built_in == "Balance":
            got = _balance(placement, snap, names)
        elif cfg.built_in == "Steady":
            got = {n: MAX_SCORE if n in decided else 0 for n in names}
        else:
            got = _allocatable(cfg, feasible)
        parts[coordinate] = got
        for n, v in got.items():
            total[n] += v * weight
    # 5. Sort (score, then name) and take numberOfClusters.
    ranked = sorted(names, key=lambda n: (-total[n], n))
    want = len(ranked) if placement.number_of_clusters is None else placement.number_of_clusters
    chosen = tuple(ranked[:want])
    for n in ranked[want:]:
        excluded[n] = f"score {total[n]} below the {want} chosen (numberOfClusters: {want})"
    unscheduled = want - len(chosen) if placement.number_of_clusters is not None else 0
    if not feasible:
        reason, message = "NoManagedClusterMatched", "No ManagedCluster matches any of the cluster predicate"  # fmt: skip
    elif unscheduled == 0:
        reason, message = "AllDecisionsScheduled", "All cluster decisions scheduled"
    else:
        reason, message = "NotAllDecisionsScheduled", f"{unscheduled} cluster decisions unscheduled"
    return PlacementResult(chosen, reason == "AllDecisionsScheduled", reason, message,
                           scores=total, parts=parts, excluded=excluded,
                           warnings=tuple(warnings))  # fmt: skip
