"""The live feed's workload rows and LocalQueues, kept from the changes it is told of.

``build_summary`` reads every workload the caller may see, under the engine lock (about 0.35 s
for 10,000 workloads), and the LocalQueues' counts with a pass over every workload per queue: a
live feed that did that on every burst of changes held the lock most of the time while writes
came in. ``LiveRows`` reads everything once, and then, per burst, only the workloads whose
stored documents changed (the keys of the committed changes the feed receives) and those
pending (their queue positions and "why pending" move without a change of their own), and
those it showed pending last time (one admitted since, whose change is still on its way, would
otherwise stay shown pending). A row's other fields come from its stored status, so a workload
with no committed change and not pending shows what it showed. The LocalQueues are listed again
only after a LocalQueue changed; their counts come from the rows, as Kueue counts them
(pending; reserving: admitted or evicting).

Rows are in creation order, as a whole read has them: a changed row keeps its place, a new
workload's row goes last (one deleted and created again too), a deleted one's goes, and each
update says so as the feed's ``patch`` (``api.dashboard_patch``). In the rare case where a
workload is read after a newer one (its change was on its way), the rows are sorted again and
the update has no patch: the feed sends the summary whole.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from gpuaas.api import dashboard_patch
from gpuaas.api.dashboard_view import SummaryParts, workload_rows
from gpuaas.core.state import Phase
from gpuaas.store import Change
from gpuaas.vocab.kinds import BY_KIND

JsonDoc = dict[str, Any]
_WORKLOAD = BY_KIND["Workload"].gk
_LOCAL_QUEUE = BY_KIND["LocalQueue"].gk
_PENDING = str(Phase.PENDING)
_RESERVING = (str(Phase.ADMITTED), str(Phase.EVICTING))


class LiveRows:
    """One caller's rows. ``changed`` is called from the fan-out thread; ``update`` from one
    worker thread at a time (the feed's)."""

    def __init__(self, parts: SummaryParts) -> None:
        self.parts = parts
        self.rows: dict[str, JsonDoc] = {}
        self._queues: list[tuple[str, str, str]] = []  # (namespace, name, ClusterQueue)
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._queues_dirty = True
        self._started = False
        self._uids: dict[str, int] = {}  # each row's workload uid: rows are in creation order

    def changed(self, change: Change) -> None:
        """A committed change the caller may see."""
        gk = change.key.gk
        if gk == _WORKLOAD:
            with self._lock:
                self._dirty.add(f"{change.key.namespace}/{change.key.name}")
        elif gk == _LOCAL_QUEUE:
            with self._lock:
                self._queues_dirty = True

    def update(self) -> tuple[JsonDoc, JsonDoc | None]:
        """The summary now, and the patch that turns the last one into it (None the first
        time, and when rows had to move: the feed then sends the summary whole)."""
        engine, namespaces = self.parts.engine, self.parts.principal.namespace_filter()
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            queues_dirty, self._queues_dirty = self._queues_dirty, False
        before, first = self.rows, not self._started
        if first:  # everything once
            self._started = True
            view = engine.view(workloads=True, namespaces=namespaces, why_pending=True)
            read, gone = list(view.workloads), set()
        else:
            # 1. every pending workload, with its place in the queue and why it waits
            view = engine.view(
                workloads=True, namespaces=namespaces, why_pending=True, phases=(Phase.PENDING,)
            )
            waiting = {w.key for w in view.workloads}
            # 2. the workloads whose documents changed, and those shown pending last time (a
            # pending one read here has no place: the view's row, read just before, stands)
            stale = dirty | {k for k, w in before.items() if w["phase"] == _PENDING}
            fresh = engine.workloads(keys=stale, namespaces=namespaces) if stale else ()
            read = [w for w in fresh if w.phase != Phase.PENDING or w.key not in waiting]
            read = sorted([*view.workloads, *read], key=lambda w: w.uid)
            gone = stale - {w.key for w in fresh} - waiting
        rows = self.rows = dict(before)
        removed = [k for k in gone if k in rows]
        for key in gone:
            rows.pop(key, None)
            self._uids.pop(key, None)
        moved: set[str] = set()
        for w in read:
            if self._uids.get(w.key, w.uid) != w.uid:  # deleted and created again: goes last
                rows.pop(w.key)
                moved.add(w.key)
            self._uids[w.key] = w.uid
        removed += sorted(moved)
        for row in workload_rows(read):
            rows[row["key"]] = row
        if queues_dirty:
            self._list_queues()
        summary = self.parts.assemble(view, list(rows.values()), self._queue_rows())
        uids = [self._uids[k] for k in rows]
        if first or any(a > b for a, b in itertools.pairwise(uids)):
            # first, or a workload read late went after a newer one: in creation order, whole
            self.rows = dict(sorted(rows.items(), key=lambda kv: self._uids[kv[0]]))
            summary["workloads"] = list(self.rows.values())
            return summary, None
        changed = [w for k, w in rows.items() if before.get(k) is not w]
        changed = [w for w in changed if w["key"] in moved or before.get(w["key"]) != w]
        return summary, dashboard_patch.patch(summary, changed, removed)

    def _list_queues(self) -> None:
        lqs, _ = self.parts.engine.list_objects(
            BY_KIND["LocalQueue"], self.parts.principal.namespace_filter()
        )
        self._queues = [
            (
                d["metadata"]["namespace"],
                d["metadata"]["name"],
                str((d.get("spec") or {}).get("clusterQueue", "")),
            )
            for d in lqs
        ]

    def _queue_rows(self) -> list[JsonDoc]:
        counts = {(ns, name): [0, 0] for ns, name, _ in self._queues}
        for w in self.rows.values():
            c = counts.get((w["namespace"], w["queue"]))
            if c is None:
                continue
            if w["phase"] == _PENDING:
                c[0] += 1
            elif w["phase"] in _RESERVING:
                c[1] += 1
        return [
            {
                "namespace": ns,
                "name": name,
                "clusterQueue": cq,
                "pending": counts[(ns, name)][0],
                "admitted": counts[(ns, name)][1],
            }
            for ns, name, cq in self._queues
        ]
