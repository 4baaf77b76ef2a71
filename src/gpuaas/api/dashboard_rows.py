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

import threading
from typing import Any

from gpuaas.api import dashboard_patch
from gpuaas.api.dashboard_view import SummaryParts, holds_gpus, state_counts, workload_rows
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
    worker thread at a time (the feed's).

    What a summary counts over the rows (pending keys, each state's and each LocalQueue's
    counts, the rows holding GPUs) is kept as rows come and go, so an update costs what
    changed and what is pending, not a pass over every row: with 20,000 admitted workloads
    and writes coming in, those passes were a tenth of the server's time."""

    def __init__(self, parts: SummaryParts) -> None:
        self.parts = parts
        self.rows: dict[str, JsonDoc] = {}
        self._queues: list[tuple[str, str, str]] = []  # (namespace, name, ClusterQueue)
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._queues_dirty = True
        self._started = False
        self._uids: dict[str, int] = {}  # each row's workload uid: rows are in creation order
        self._pending: set[str] = set()  # keys of the rows shown pending
        self._states: dict[str, int] = state_counts([])
        self._counts: dict[tuple[str, str], list[int]] = {}  # (ns, queue) -> [pending, reserving]
        self._gpu_keys: set[str] = set()  # rows whose GPUs the quota panel lists

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
        rows, first = self.rows, not self._started
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
            stale = dirty | self._pending
            fresh = engine.workloads(keys=stale, namespaces=namespaces) if stale else ()
            read = [w for w in fresh if w.phase != Phase.PENDING or w.key not in waiting]
            read = sorted([*view.workloads, *read], key=lambda w: w.uid)
            gone = stale - {w.key for w in fresh} - waiting
        before: dict[str, JsonDoc] = {}  # the rows replaced or removed, as they were
        removed = [k for k in gone if k in rows]
        for key in gone:
            old = rows.pop(key, None)
            if old is not None:
                before[key] = old
                self._count(old, -1)
            self._uids.pop(key, None)
        moved: set[str] = set()
        for w in read:
            if self._uids.get(w.key, w.uid) != w.uid:  # deleted and created again: goes last
                before[w.key] = old = rows.pop(w.key)
                self._count(old, -1)
                moved.add(w.key)
        removed += sorted(moved)
        last = self._uids[next(reversed(rows))] if rows else None  # the newest row kept
        in_order = True
        new_rows = workload_rows(read)
        for w, row in zip(read, new_rows, strict=True):
            key = row["key"]
            old = rows.get(key)
            if old is None:  # appended: rows stay in creation order while it is the newest
                in_order = in_order and (last is None or last < w.uid)
                last = w.uid
            else:
                before.setdefault(key, old)
                self._count(old, -1)
            self._uids[key] = w.uid
            rows[key] = row
            self._count(row, 1)
        if queues_dirty:
            self._list_queues()
        kept = (self._states, [rows[k] for k in sorted(self._gpu_keys, key=self._uids.__getitem__)])
        summary = self.parts.assemble(view, list(rows.values()), self._queue_rows(), kept)
        if first or not in_order:
            # first, or a workload read late went after a newer one: in creation order, whole
            self.rows = dict(sorted(rows.items(), key=lambda kv: self._uids[kv[0]]))
            summary["workloads"] = list(self.rows.values())
            return summary, None
        changed = [r for r in new_rows if r["key"] in moved or before.get(r["key"]) != r]
        return summary, dashboard_patch.patch(summary, changed, removed)

    def _count(self, row: JsonDoc, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) what ``row`` counts for."""
        key, phase = row["key"], row["phase"]
        if row["state"] in self._states:
            self._states[row["state"]] += sign
        if phase == _PENDING:
            (self._pending.add if sign > 0 else self._pending.discard)(key)
        if holds_gpus(row):
            (self._gpu_keys.add if sign > 0 else self._gpu_keys.discard)(key)
        slot = 0 if phase == _PENDING else 1 if phase in _RESERVING else None
        if slot is not None:
            c = self._counts.setdefault((row["namespace"], row["queue"]), [0, 0])
            c[slot] += sign

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
        rows = []
        for ns, name, cq in self._queues:
            pending, admitted = self._counts.get((ns, name), (0, 0))
            rows.append(
                {
                    "namespace": ns,
                    "name": name,
                    "clusterQueue": cq,
                    "pending": pending,
                    "admitted": admitted,
                }
            )
        return rows
