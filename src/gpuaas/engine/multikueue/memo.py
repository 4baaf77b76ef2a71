"""What each workload's last MultiKueue plan was made of, so that a pass plans a workload only
when something it is planned from changed.

A plan (``core.multikueue.reconcile`` and what the controller makes of it) is a function of
what it reads: of the hub's workload its check entry, nomination, chosen worker, quota, finish,
owner and uid (``facts``); of each worker its state, what ``remote_copy`` makes of its copy and
whether it has the Job and with which status; and the worker the Job went to. The same inputs
plan the same, with what that plan sent in flight or answered and what it wrote applied, so a
pass skips a workload whose inputs equal its last plan's. At 1,000 Jobs, passes woken by events
the plan could do nothing with, full passes replanning the few hundred workloads waiting on
workers each second, and each workload's own update read back all planned for nothing: seven
plans per workload where four lead somewhere. What makes a plan needed again forgets it: a
remote write that failed (planned at the next full pass, as before), an update not applied, a
commit not stored. A plan waiting for a lost worker, which the clock moves, and Incremental
dispatch, whose nomination moves with the clock, are never skipped (the controller does not
record them). It reads documents only; it decides and writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpuaas.core import multikueue as plan_mk
from gpuaas.engine.multikueue.writes import WorkloadUpdate

if TYPE_CHECKING:
    from gpuaas.engine.multikueue.workers import WorkerView

JsonDoc = dict[str, Any]
Inputs = tuple[Any, ...]


def condition(doc: JsonDoc | None, type_: str) -> JsonDoc | None:
    for c in ((doc or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def is_true(doc: JsonDoc | None, type_: str) -> bool:
    c = condition(doc, type_)
    return c is not None and c.get("status") == "True"


def owner_ref(doc: JsonDoc) -> JsonDoc:
    """A workload's first owner reference (its Job), or an empty one."""
    refs = (doc.get("metadata") or {}).get("ownerReferences") or [{}]
    return refs[0] if isinstance(refs[0], dict) else {}


def leads_nowhere(u: WorkloadUpdate) -> bool:
    """An update after which a plan of the same workload has nothing to do until a worker or
    the manager says something new (which wakes it on its own): one that only nominates
    workers or says why the check is still Pending, or one that records the worker chosen
    (Ready with ``clusterName``: its Job is there, the other copies' removals are in flight
    or answered, and its Job's status went with it). Finishing (its copies go next) and
    Retry (the manager evicts it next) lead somewhere."""
    if u.finish is not None:
        return False
    if u.cluster_name is not None:
        return u.state is not None and u.state[0] == plan_mk.READY
    return u.state is None or u.state[0] == plan_mk.PENDING


def facts(doc: JsonDoc, check: str) -> Inputs:
    """What a plan reads of a hub workload (not the document: see ``foretold``)."""
    status = doc.get("status") or {}
    entry: JsonDoc = next(
        (e for e in status.get("admissionChecks", []) if e.get("name") == check), {}
    )
    owner = owner_ref(doc)
    return (
        check,
        (entry.get("state"), entry.get("message")),
        tuple(status.get("nominatedClusterNames") or ()),
        status.get("clusterName"),
        is_true(doc, "QuotaReserved"),
        is_true(doc, "Finished"),
        (owner.get("kind"), owner.get("uid"), owner.get("name")),
        (doc.get("metadata") or {}).get("uid"),  # one deleted and made again differs
    )


def foretold(inputs: Inputs, u: WorkloadUpdate) -> Inputs:
    """The inputs of a plan once its update ``u`` is applied: the check's state, the
    nomination and the chosen worker as ``u`` wrote them (``writes.apply_workloads``). The
    manager admitting a workload made Ready, or nominating one, changes nothing else a plan
    reads; anything else that changed meanwhile makes the next inputs differ."""
    hub, *rest = inputs
    check, state, nominated, cluster, *more = hub
    if u.state is not None:
        state = u.state
    if u.nominated is not None or u.cluster_name is not None:
        nominated = nominated if u.nominated is None else tuple(u.nominated)
        cluster = u.cluster_name
    return ((check, state, nominated, cluster, *more), *rest)


class PlanMemo:
    """Each workload's last plan's inputs, and the workloads whose remote writes failed."""

    def __init__(self) -> None:
        self._planned: dict[str, Inputs] = {}
        self._facts: dict[str, tuple[JsonDoc, str, Inputs]] = {}  # key -> (doc, check, facts)
        self._failed: set[str] = set()  # told from the pool's threads: under _lock
        self._lock = threading.Lock()

    def inputs(
        self,
        key: str,
        doc: JsonDoc,
        check: str,
        clusters: list[str],
        views: Mapping[str, WorkerView],
        copy_of: Callable[[str, str, WorkerView], plan_mk.RemoteCopy],
        placing: str | None,
    ) -> Inputs:
        """All a workload's plan is made of, bar the clock. ``copy_of``: ``remote_copy`` of
        a worker's copy (remembered per copy by the controller)."""
        seen = self._facts.get(key)
        if seen is not None and seen[0] is doc and seen[1] == check:
            hub = seen[2]
        else:
            hub = facts(doc, check)
            self._facts[key] = (doc, check, hub)
        workers = tuple(
            (
                n,
                w.client is not None,
                w.active,
                w.lost_since,
                copy_of(n, key, w) if key in w.copies else None,
                (job := w.jobs.get(key)) is not None,
                job.get("status") or None if job is not None else None,
            )
            for n, w in views.items()
        )
        return hub, tuple(clusters), workers, placing

    def unchanged(self, key: str, inputs: Inputs) -> bool:
        """Whether ``inputs`` are those of the workload's last plan."""
        last = self._planned.get(key)
        return last is not None and last == inputs

    def planned(self, key: str, inputs: Inputs) -> None:
        self._planned[key] = inputs

    def forget(self, key: str) -> None:
        self._planned.pop(key, None)

    def clear(self) -> None:
        """A commit not stored: every workload is planned again."""
        self._planned.clear()

    def applied(self, updates: Iterable[WorkloadUpdate], applied: set[str]) -> None:
        """A pass's updates were applied (those in ``applied``) or skipped (the workload
        moved past meanwhile: planned again)."""
        for u in updates:
            if u.key not in applied:
                self._planned.pop(u.key, None)
            elif leads_nowhere(u) and u.key in self._planned:
                self._planned[u.key] = foretold(self._planned[u.key], u)

    def failed(self, key: str) -> None:
        """A remote write for ``key`` failed (from any thread)."""
        with self._lock:
            self._failed.add(key)

    def retry_failed(self) -> None:
        """At a full pass: the workloads whose writes failed are planned again."""
        with self._lock:
            failed, self._failed = self._failed, set()
        for key in failed:
            self._planned.pop(key, None)

    def keep_only(self, present: set[str]) -> None:
        """A full pass forgets workloads gone from the hub."""
        for key in set(self._planned) - present:
            del self._planned[key]
        for key in set(self._facts) - present:
            del self._facts[key]


__all__ = [
    "Inputs",
    "PlanMemo",
    "condition",
    "facts",
    "foretold",
    "is_true",
    "leads_nowhere",
    "owner_ref",
]
