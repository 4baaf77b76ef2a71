"""Kueue's objects as the core sees them: validated, defaulted, with every quantity an integer.

This module owns the shapes the engine decides on. It does not parse YAML or JSON (see
``core.manifests``) and holds no state about admissions (see ``core.state``). Quantities are in
Kueue's units: CPU in millicores, everything else in base units (bytes, GPUs, pods).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

FlavorResource = tuple[str, str]
"""(flavor, resource): the unit of quota accounting, Kueue's ``FlavorResource``."""


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class PreemptionPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class FungibilityAction(StrEnum):
    """``Borrow`` and ``Preempt`` are v1beta1 aliases of MayStopSearch and are normalised to it."""

    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


@dataclass(slots=True, frozen=True)
class SelectorRequirement:
    """One ``matchExpressions`` entry (label selectors) or node selector requirement."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (and Gt, Lt for node selectors)
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present and self.values:
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.operator == "Gt" else have < want
        return False


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(slots=True, frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key == "" and self.operator == "Exists":
            return True
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(slots=True, frozen=True)
class NodeSelectorTerm:
    """One term of ``requiredDuringSchedulingIgnoredDuringExecution``; terms are ORed."""

    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(slots=True)
class Namespace:
    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(slots=True, frozen=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class FlavorQuotas:
    name: str
    resources: dict[str, ResourceQuota]


@dataclass(slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: list[FlavorQuotas]


@dataclass(slots=True, frozen=True)
class BorrowWithinCohort:
    policy: PreemptionPolicy = PreemptionPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(slots=True, frozen=True)
class Preemption:
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()


@dataclass(slots=True, frozen=True)
class FlavorFungibility:
    when_can_borrow: FungibilityAction = FungibilityAction.MAY_STOP_SEARCH
    when_can_preempt: FungibilityAction = FungibilityAction.TRY_NEXT_FLAVOR
    preference: FungibilityPreference | None = None


@dataclass(slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    # None: Kueue's default for an absent selector, which admits no namespace.
    namespace_selector: LabelSelector | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    preemption: Preemption = Preemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_weight: float = 1.0
    # spec.admissionChecks (v1beta1, every flavor) and spec.admissionChecksStrategy, as rules.
    admission_checks: tuple[CheckRule, ...] = ()
    # gpuaas extension (annotation ``gpuaas.dev/min-runtime-seconds``): a workload admitted less
    # than this many seconds ago is not a preemption candidate.
    min_runtime_seconds: float = 0.0


@dataclass(slots=True, frozen=True)
class CheckRule:
    """One AdmissionCheck a ClusterQueue requires; ``on_flavors`` empty means every flavor."""

    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class AdmissionCheck:
    """Kueue's AdmissionCheck: a gate its controller opens per workload (``status.admissionChecks``).

    ``active`` is the Active condition of the object's status as applied (None when it has none);
    a check controller running in the engine overrides it (``Cluster.set_check_active``).
    """

    name: str
    controller_name: str
    parameters: tuple[str, str, str] | None = None  # (apiGroup, kind, name)
    active: bool | None = None
    active_message: str = ""


@dataclass(slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_weight: float = 1.0


@dataclass(slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE


@dataclass(slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(slots=True)
class PodSet:
    name: str
    count: int
    requests: dict[str, int]  # per pod, summed over containers as Kubernetes computes it
    min_count: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()


MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"  # a job's maximum execution time
SOURCE_WPC = "kueue.x-k8s.io/WorkloadPriorityClass"  # Workload.priority_source values
SOURCE_POD = "scheduling.k8s.io/PriorityClass/"  # + the class's name


@dataclass(slots=True)
class Workload:
    """A unit of admission. ``kind`` tells which object it was built from (Workload, Job, ...)."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: list[PodSet]
    priority: int | None = None  # explicit spec.priority
    priority_class: str | None = None  # WorkloadPriorityClass name
    active: bool = True
    kind: str = "Workload"
    runtime_seconds: float | None = None  # gpuaas.dev/runtime-seconds
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # metadata.uid of the Workload and of the Job it comes from ("" when not known, as in a
    # scenario): Kueue names a preemptor by these, never by its name.
    uid: str = field(default="", compare=False)
    job_uid: str = field(default="", compare=False)
    # Kueue's ValidateResources failure ("resources validation failed: ..."), "" when its
    # podSets are valid: Kueue accepts such a Workload and never admits it (Misconfigured).
    invalid_resources: str = ""
    # A Workload's priority source: "" none, SOURCE_WPC, or SOURCE_POD + the PriorityClass name;
    # Kueue's CEL rules keep it while quota is reserved (a WorkloadPriorityClass may be renamed).
    priority_source: str = ""
    # spec.active was written in the manifest (a Workload's; kubectl apply leaves a field the
    # manifest does not name as it is, so only an explicit true reactivates: Lifecycle).
    active_given: bool = field(default=False, compare=False)
    # Kueue's spec.maximumExecutionTimeSeconds (a job's max-exec-time-seconds label): None for
    # no limit (core.max_exec).
    max_exec_seconds: int | None = None
    # "namespace/name", computed once: namespace and name never change after parsing.
    key: str = field(init=False, default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"


KueueObject = (
    Namespace
    | AdmissionCheck
    | ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | WorkloadPriorityClass
    | Workload
)
