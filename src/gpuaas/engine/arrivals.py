"""Creates acknowledged before they are scheduled: the engine's arrivals and its scheduler thread.

``Engine`` inherits ``Arrivals``. With the scheduler thread started (``start_scheduler``, as the
server does), a Workload create is stored, acknowledged and queued here as an arrival; whoever
takes the engine lock next (``engine.settling.SettlingLock``: the scheduler thread, woken by every
arrival, or any read, tick or other write) first applies and schedules every arrival in order,
each at the instant it arrived, exactly as a create that scheduled itself would have, and
persists what that decided as one batch. ``settle`` waits for that without reading anything. It
also offers the watch subscriptions (``engine.watch``). No admission rule lives here.

``create_many`` makes several creates from one thread: each is begun (checked and stored under
the lock) as ``create`` begins it, in order, and then all are waited for together. Arrivals'
writes go to the group commit as one item (``Shared``), submitted before the lock is let go
(or before a create that settles at once), so nothing decided later is stored before them.
The server hands it the creates that arrive in one event-loop step
(``api.write_workers.offload_many``): one thread wakes, waits and answers for all of them,
instead of one thread per request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuaas.core.cluster import Cluster
from gpuaas.core.objects import Workload
from gpuaas.core.state import Event
from gpuaas.engine import documents
from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.engine.settling import SettlingLock
from gpuaas.engine.watch import Encoding, Lines, Subscription, WatchHub
from gpuaas.store import Ack, Change, GroupCommitter, ObjectKey, ObjectRecord
from gpuaas.vocab.kinds import WORKLOAD, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import _Batch

log = logging.getLogger(__name__)

GATHER_S = 0.005  # how long the scheduler thread lets arrivals gather before it settles them


class Later:
    """The ``Ack`` of a create whose writes wait in a ``Shared``, once it is submitted."""

    __slots__ = ("ack",)

    def __init__(self) -> None:
        self.ack: Ack | None = None


class Shared:
    """The arrivals of one ``create_many``, gathered under the engine lock in order and
    submitted to the group commit as one item (one ``Ack``, one watch hand-off) by ``flush``,
    still under the lock, before anything else is committed."""

    __slots__ = ("_batch", "_commit", "_new_batch", "_waiting")

    def __init__(self, commit: Callable[[_Batch], Ack], new_batch: Callable[[], _Batch]) -> None:
        self._commit = commit
        self._new_batch = new_batch
        self._batch = new_batch()
        self._waiting: list[Later] = []

    def add(self, batch: _Batch) -> Later:
        self._batch.writes += batch.writes
        self._batch.changes += batch.changes
        later = Later()
        self._waiting.append(later)
        return later

    def flush(self) -> None:
        if not self._waiting:
            return
        ack = self._commit(self._batch)
        for later in self._waiting:
            later.ack = ack
        self._batch, self._waiting = self._new_batch(), []


class Begun(NamedTuple):
    """A create stored under the lock and submitted to the group commit, not yet durable."""

    kind: Kind
    key: ObjectKey
    doc: dict[str, Any]  # as stored
    shown: dict[str, Any] | None  # the answer; None: read back once durable (it was settled)
    ack: Ack | Later


class Arrivals:
    """The arrivals queue and the scheduler thread; see the module docstring."""

    _lock: SettlingLock
    _cluster: Cluster
    _arrivals: deque[tuple[Workload, float]]
    _scheduler: threading.Thread | None
    _wake: threading.Event
    committer: GroupCommitter
    _stopping: bool
    hub: WatchHub
    objects: ObjectIndex
    rv: int
    restore_problems: list[str]

    if TYPE_CHECKING:  # the engine's own, for the type checker only

        def _decide(self, now: float) -> list[Event]: ...

        def _collect_statuses(self, batch: _Batch) -> None: ...

        def _collect_events(self, events: list[Event], batch: _Batch) -> None: ...

        def _commit(self, batch: _Batch, waiting: bool = True) -> Ack: ...

        def _new_batch(self) -> _Batch: ...

        def _shown(self, kind: Kind, rec: ObjectRecord) -> dict[str, Any]: ...

        def _wait(self, fut: Ack) -> None: ...

        def _begin_create(
            self, kind: Kind, namespace: str | None, doc: dict[str, Any], shared: Shared | None
        ) -> Begun: ...

    def _finish_create(self, begun: Begun) -> dict[str, Any]:
        """Wait until a begun create is durable; its answer."""
        ack = begun.ack.ack if isinstance(begun.ack, Later) else begun.ack
        assert ack is not None, "a create's shared writes were never submitted"
        self._wait(ack)
        if begun.shown is not None:  # what was stored: its admission is decided after the reply
            return begun.shown
        with self._lock:
            current = self.objects.get(begun.key)
            return self._shown(begun.kind, current) if current is not None else begun.doc

    def create_many(
        self, kind: Kind, items: Sequence[tuple[str | None, dict[str, Any]]]
    ) -> list[dict[str, Any] | Exception]:
        """``create(kind, namespace, doc)`` for each item, begun in order (as concurrent creates
        arriving in that order) and waited for together: each answer, or what its create raised."""
        begun: list[Begun | Exception] = []
        if self._scheduler is not None and (kind is WORKLOAD or kind.job):  # acknowledged once
            # stored: their writes go to the group commit together, submitted under the lock
            shared = Shared(self._commit, self._new_batch)
            with self._lock.quick():
                for namespace, doc in items:
                    if self.committer.failed:  # what it holds drains (and fails) before a reload
                        shared.flush()
                    begun.append(self._begun(kind, namespace, doc, shared))
                shared.flush()
        else:  # each settles, and takes the lock, as a create does
            begun = [self._begun(kind, namespace, doc, None) for namespace, doc in items]
        out: list[dict[str, Any] | Exception] = []
        for one in begun:
            if isinstance(one, Exception):
                out.append(one)
                continue
            try:
                out.append(self._finish_create(one))
            except Exception as exc:
                out.append(exc)
        return out

    def _begun(
        self, kind: Kind, namespace: str | None, doc: dict[str, Any], shared: Shared | None
    ) -> Begun | Exception:
        try:
            return self._begin_create(kind, namespace, doc, shared)
        except Exception as exc:  # that create's answer; the others go on
            return exc

    def _has_arrivals(self) -> bool:
        return bool(self._arrivals)

    def _catch_up(self) -> None:
        """Under the lock: apply and schedule every arrival, in order, each at its own instant
        (as a synchronous create would have), then persist the statuses and events of all of
        them as one batch. Its commit is not waited for: nobody is waiting on these writes."""
        batch = self._new_batch()
        events: list[Event] = []
        try:
            while self._arrivals:
                # one at a time: if an observer raises, the later arrivals stay queued
                obj, now = self._arrivals.popleft()
                try:
                    self._cluster.apply(obj, now)
                except (ValueError, KeyError, TypeError) as exc:
                    # Stored, but the core refused it: reported as a restart reports it.
                    msg = f"not scheduled: Workload {documents.obj_name(obj)}: {exc}"
                    log.error("%s", msg)
                    self.restore_problems.append(msg)
                    held = self.objects.get(ObjectKey(WORKLOAD.gk, obj.namespace, obj.name))
                    if held is not None:  # no status replaces its first record: deflated here
                        held.compact()
                    continue
                events += self._decide(now)
        finally:  # what was decided is persisted even when a later arrival failed
            self._collect_statuses(batch)
            self._collect_events(events, batch)
            if batch.writes:  # nobody waits for them: they may share a later write's commit
                self._commit(batch, waiting=False)

    def start_scheduler(self) -> None:
        """From now on Workload creates are acknowledged once stored and scheduled by a thread
        of their own, in batches (the server's mode; without it every create settles itself)."""
        with self._lock:
            if self._scheduler is not None:
                return
            self._stopping = False
            self._scheduler = threading.Thread(
                target=self._schedule_loop, name="gpuaas-scheduler", daemon=True
            )
            self._scheduler.start()

    def _schedule_loop(self) -> None:
        while True:
            self._wake.wait()
            if self._stopping:
                return
            # What arrives in the next few milliseconds joins this catch-up: one status commit
            # (and fsync) for all of them instead of one per create, which a lone client's
            # creates otherwise queue behind. Reads do not wait for this: they settle first.
            time.sleep(GATHER_S)
            self._wake.clear()
            if self._stopping:  # close() set it (and the wake just cleared) while we gathered
                return
            try:
                with self._lock:  # taking it settles what arrived (engine.settling)
                    pass
            except Exception:  # the next request or tick retries after a reload
                log.exception("scheduling what arrived failed")

    def settle(self) -> None:
        """Decide everything acknowledged so far (a read does the same): for callers that want
        the admission of what they created before they go on, without reading anything."""
        with self._lock:
            pass

    # -- watch subscriptions: one callback per change, or one encoding per kind of stream ---------
    def _current(self, kind: Kind, match: Callable[[Change], bool]) -> list[Change]:
        """Under the lock: the objects of ``kind`` that ``match``, as ADDED changes, oldest first."""
        current = [
            Change(r.rv, "ADDED", r.key, self._shown(kind, r))
            for r in sorted(self.objects.of_kind(kind.gk).values(), key=lambda r: r.rv)
        ]
        return [c for c in current if match(c)]

    def snapshot_for_watch(
        self, kind: Kind, match: Callable[[Change], bool], deliver: Callable[[Change], None]
    ) -> tuple[list[Change], int, Any]:
        """Subscribe, and return the current objects as ADDED changes plus the rv they reflect."""
        with self._lock:
            sub = self.hub.subscribe(deliver, match)
            return self._current(kind, match), self.rv, sub

    def subscribe(self, match: Callable[[Change], bool], deliver: Callable[[Change], None]) -> Any:
        with self._lock:
            return self.hub.subscribe(deliver, match)

    def snapshot_for_encoded_watch(
        self,
        kind: Kind,
        match: Callable[[Change], bool],
        encoding: Encoding,
        deliver_lines: Callable[[Lines], None],
        filter_key: Hashable | None = None,
    ) -> tuple[list[Change], int, Subscription]:
        """``snapshot_for_watch`` for a stream whose changes are encoded once per encoding
        for every watcher that shares it (``WatchHub.subscribe_encoded``)."""
        with self._lock:
            sub = self.hub.subscribe_encoded(match, encoding, deliver_lines, filter_key)
            return self._current(kind, match), self.rv, sub

    def subscribe_encoded(
        self,
        match: Callable[[Change], bool],
        encoding: Encoding,
        deliver_lines: Callable[[Lines], None],
        filter_key: Hashable | None = None,
    ) -> Subscription:
        with self._lock:
            return self.hub.subscribe_encoded(match, encoding, deliver_lines, filter_key)
