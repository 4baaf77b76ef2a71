"""The MultiKueue controller's writes to workers, in flight: what a pass asks a worker to do
(create a Workload copy, create the Job, remove both), carried out on the pool while the
controller goes on: a pass's writes to one worker as one batch on one pool thread, their
calls made together (``RemoteClient.calls``).

A pass never waits for a worker's answers: each write is submitted here and the pass moves on,
so one slow worker or one busy pass holds up nothing else (Kueue's reconciler likewise handles
each workload apart). A write already in flight is not asked again by a later pass. When a
worker answers, what it did is assumed in that worker's watched cache at once (as Kueue's cache
assumes an admission before the API server confirms it) and the controller is woken: its next
pass sees the Job or the removal without waiting for the watch event, which later confirms it
(a created copy wakes nothing: what a pass waits for is its admission, which the watch sends). A
failed write is logged and its workload marked (``failed``): the next full pass (at the latest
after ``idle_interval``) plans it again from what the workers show.

It owns the bodies of the copies (Kueue's ``cloneForCreate`` and the Job adapter's) and the
in-flight set; it decides nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gpuaas.engine.multikueue.remote import WORKLOADS, Call, RemoteClient, RemoteError
from gpuaas.engine.multikueue.workers import Worker
from gpuaas.vocab import multikueue as mk

log = logging.getLogger(__name__)
JsonDoc = dict[str, Any]
CREATE_COPY, CREATE_JOB, REMOVE = "create-copy", "create-job", "remove"


def workload_copy(local: JsonDoc, origin: str) -> JsonDoc:
    """Kueue's ``cloneForCreate``: labels and annotations, the origin label, the spec."""
    meta = local.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "kueue.x-k8s.io/job-uid"}
    labels[mk.ORIGIN_LABEL] = origin
    out_meta: JsonDoc = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}
    if meta.get("annotations"):
        out_meta["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": out_meta,
        "spec": local.get("spec") or {},
    }


def job_copy(job: JsonDoc, workload: str, origin: str) -> JsonDoc:
    """The Job Kueue's batch Job adapter creates on the worker: naming the prebuilt Workload
    (as an annotation, as Kueue 0.18+ writes it, and as a label, which older workers read)
    and labelled with the origin, without ``managedBy`` (the worker runs it)."""
    meta = job.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels[mk.PREBUILT_WORKLOAD_LABEL] = workload
    labels[mk.ORIGIN_LABEL] = origin
    spec = {k: v for k, v in (job.get("spec") or {}).items() if k != "managedBy"}
    annotations = {**(meta.get("annotations") or {}), mk.PREBUILT_WORKLOAD_ANNOTATION: workload}
    out_meta: JsonDoc = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations}  # fmt: skip
    return {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"), "metadata": out_meta,
            "spec": spec}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Operation:
    """One write to one worker: ``verb`` on ``key``; ``body`` for a create."""

    verb: str
    worker: str
    key: str
    client: RemoteClient
    base: str = WORKLOADS
    plural: str = "workloads"
    body: JsonDoc | None = None
    # REMOVE: where the worker's job is, (API base path, plural), when it has one: deleted
    # first, since it owns the copy
    job: tuple[str, str] | None = None
    wake: bool = True  # wake the controller for this workload once answered

    def steps(self) -> list[Call]:
        """Its calls, in order: each is made only once the one before it succeeded."""
        ns, _, name = self.key.partition("/")
        if self.verb == REMOVE:
            copy = Call("DELETE", f"{WORKLOADS}/namespaces/{ns}/workloads/{name}", None, (404,))
            if self.job is None:
                return [copy]
            base, plural = self.job
            return [Call("DELETE", f"{base}/namespaces/{ns}/{plural}/{name}", None, (404,)), copy]
        assert self.body is not None
        return [Call("POST", f"{self.base}/namespaces/{ns}/{self.plural}", self.body, (409,))]


def run_batch(ops: Sequence[Operation]) -> list[RemoteError | None]:
    """The calls of ``ops`` (all to one worker), each op's first calls together, then the
    second ones of those whose first succeeded (a Job is deleted before the copy it owns);
    for each op None when it succeeded, else what failed."""
    if not ops:
        return []
    client = ops[0].client
    steps = [op.steps() for op in ops]
    outcome: list[RemoteError | None] = [None] * len(ops)
    step = 0
    while todo := [i for i, s in enumerate(steps) if step < len(s) and outcome[i] is None]:
        for i, got in zip(todo, client.calls([steps[i][step] for i in todo]), strict=True):
            if isinstance(got, RemoteError):
                outcome[i] = got
        step += 1
    return outcome


class InFlight:
    """Writes submitted to the pool and not answered yet, by (verb, worker, key)."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        workers: dict[str, Worker],
        wake: Callable[[str], None],
        failed: Callable[[str], None] | None = None,
    ) -> None:
        self._pool = pool
        self._workers = workers
        self._wake = wake
        self._failed = failed  # told the workload of a write that failed
        self._lock = threading.Lock()
        self._busy: set[tuple[str, str, str]] = set()

    def submit(self, op: Operation) -> bool:
        """Start ``op`` unless the same write is in flight already; True if started now."""
        return bool(self.submit_many([op]))

    def submit_many(self, ops: Sequence[Operation]) -> list[Operation]:
        """Start the writes of ``ops`` not in flight already, those to one worker together on
        one pool thread (``run_batch``: a thread hand-off per call was most of what a call
        cost the hub); the ones started now."""
        started: list[Operation] = []
        with self._lock:
            for op in ops:
                ident = (op.verb, op.worker, op.key)
                if ident not in self._busy:
                    self._busy.add(ident)
                    started.append(op)
        by_worker: dict[tuple[str, int], list[Operation]] = {}
        for op in started:
            by_worker.setdefault((op.worker, id(op.client)), []).append(op)
        for batch in by_worker.values():
            self._pool.submit(self._run, batch)
        return started

    def busy(self, verb: str, worker: str, key: str) -> bool:
        with self._lock:
            return (verb, worker, key) in self._busy

    def _run(self, ops: list[Operation]) -> None:
        try:
            outcome = run_batch(ops)
        except Exception:  # a bug must not leave the writes marked in flight for ever
            log.exception("MultiKueue: %d writes to %s", len(ops), ops[0].worker)
            outcome = [RemoteError("failed")] * len(ops)
        for op, error in zip(ops, outcome, strict=True):
            if error is not None:
                log.info("MultiKueue: %s %s on %s: %s", op.verb, op.key, op.worker, error)
            self._done(op, error is None)

    def _done(self, op: Operation, ok: bool) -> None:
        worker = self._workers.get(op.worker)
        if ok and worker is not None:
            worker.assume(op.verb == REMOVE, op.key, op.base, op.plural, op.body)
        with self._lock:
            self._busy.discard((op.verb, op.worker, op.key))
        # A copy's news is its admission, which its watch sends; a loser's removal leads
        # nowhere (the plan that asked for it had chosen the worker: Operation.wake).
        if ok and op.verb != CREATE_COPY and op.wake:
            self._wake(op.key)
        elif not ok and self._failed is not None:
            self._failed(op.key)


__all__ = [
    "CREATE_COPY",
    "CREATE_JOB",
    "REMOVE",
    "InFlight",
    "Operation",
    "job_copy",
    "run_batch",
    "workload_copy",
]
