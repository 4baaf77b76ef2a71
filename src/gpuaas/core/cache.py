"""Long-lived per-ClusterQueue state: spec, quota node, pending queue and admitted workloads.

Kueue splits this across its cache and queue manager; here one record per ClusterQueue keeps the
pieces the scheduler reads together. Nothing in this module decides anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuaas.core.objects import ClusterQueue, QueueingStrategy, ResourceGroup
from gpuaas.core.queues import ClusterQueueQueue
from gpuaas.core.quota import QuotaNode, quotas_of
from gpuaas.core.state import WorkloadState


@dataclass(slots=True)
class CQState:
    spec: ClusterQueue
    node: QuotaNode
    queue: ClusterQueueQueue
    rg_by_resource: dict[str, ResourceGroup] = field(default_factory=dict)
    admitted: dict[str, WorkloadState] = field(
        default_factory=dict
    )  # holding quota (incl. evicting)
    generation: int = 0  # Kueue's AllocatableResourceGeneration
    inactive_reason: str | None = None
    inactive_code: str = ""  # Kueue's Active=False reason (FlavorNotFound, Stopped, ...)
    terminating: bool = False
    sticky: str | None = None  # BestEffortFIFO preemptor pinned to the head
    # The spec's name, fixed for the record's life (a replaced spec keeps it): read so often
    # by the scheduler that a property lookup shows in profiles.
    name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.name = self.spec.name

    @property
    def active(self) -> bool:
        return self.inactive_reason is None

    @classmethod
    def build(cls, spec: ClusterQueue) -> CQState:
        node = QuotaNode(spec.name, True, quotas_of(spec.resource_groups))
        queue = ClusterQueueQueue(strict=spec.queueing_strategy == QueueingStrategy.STRICT_FIFO)
        state = cls(spec=spec, node=node, queue=queue)
        state.index_groups()
        return state

    def index_groups(self) -> None:
        self.rg_by_resource = {
            res: rg for rg in self.spec.resource_groups for res in rg.covered_resources
        }
