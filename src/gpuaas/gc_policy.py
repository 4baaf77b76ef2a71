"""The server process's garbage-collector settings: young collections rarer, old ones rarest.

A server keeps every object it serves in memory (documents, core records, views' inputs), so
the heap only grows, and CPython's default thresholds (a young collection every 700
allocations) promote the short-lived objects of the requests in flight (32 clients' bodies,
futures, batches waiting for their commit) into the old generation, which then triggers full
collections. Each full collection walks the whole heap while holding the GIL. Under
``bench/api.py`` (32 clients, 2026-11-26) the server spent 3.1 s of a 12 s run in 8-11 full
collections of up to 0.4-0.9 s each: about 40 % of its CPU per create, and all of its p99.

``apply`` (called by ``server.run``, not by ``build``: in-process tests keep the interpreter's
defaults) therefore:

1. collects young objects every ``YOUNG`` allocations instead of 700, so a request's objects are
   mostly freed before a collection sees them (a middle collection walks at most ``MIDDLE``
   young collections' survivors: a bounded pause), and considers a full collection only every
   ``MIDDLE * OLD`` young ones, 10 million allocations (CPython's own rule then still skips it
   until the objects awaiting one are a quarter of those that survived the last);
2. collects once and freezes what the start-up left (imported modules, the store's objects as
   restored): the collector never walks them again. Documents are trees, freed by reference
   counting when the engine drops them; a frozen object caught in a reference cycle that
   becomes unreachable is not reclaimed before the process ends (``gc.freeze``'s trade-off).

No decision or stored byte depends on this: it changes when memory is reclaimed, not what.

With ``GPUAAS_GC_LOG=1`` in its environment, ``apply`` also times every collection
(``gc.callbacks``) and logs, at most once a second, the collections so far per generation with
their total and longest pause, and every full collection as it ends: the evidence for or against
the collector when the server's CPU per request grows with its heap.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from typing import Any

YOUNG = 10_000  # allocations (net of frees) between young collections; CPython's default is 700
MIDDLE = 10  # young collections per collection of the middle generation (as CPython)
OLD = 100  # middle collections before a full one is considered (default 10)


LOG_ENV = "GPUAAS_GC_LOG"

log = logging.getLogger(__name__)


def apply() -> None:
    """Set the thresholds and freeze the start-up heap (see the module docstring)."""
    gc.set_threshold(YOUNG, MIDDLE, OLD)
    gc.collect()
    gc.freeze()
    if os.environ.get(LOG_ENV) == "1":
        gc.callbacks.append(PauseLog().callback)


class PauseLog:
    """Collections per generation, their total and longest pause: a ``gc.callbacks`` entry."""

    def __init__(self, clock: Any = time.perf_counter, every: float = 1.0) -> None:
        self.clock, self.every = clock, every
        self.count = [0, 0, 0]
        self.total = [0.0, 0.0, 0.0]  # seconds
        self.longest = [0.0, 0.0, 0.0]
        self._started = 0.0
        self._logged = clock()

    def callback(self, phase: str, info: dict[str, int]) -> None:
        now = self.clock()
        if phase == "start":
            self._started = now
            return
        gen, pause = info["generation"], now - self._started
        self.count[gen] += 1
        self.total[gen] += pause
        self.longest[gen] = max(self.longest[gen], pause)
        if gen == 2:
            log.warning(
                "gc: full collection %.1f ms, %d collected", 1000 * pause, info["collected"]
            )
        if now - self._logged >= self.every:
            self._logged = now
            log.warning("gc: %s", self.summary())

    def summary(self) -> str:
        """``gen0 N T ms (max M ms), gen1 ..., gen2 ...``: cumulative since ``apply``."""
        return ", ".join(
            f"gen{g} {self.count[g]} {1000 * self.total[g]:.1f} ms (max {1000 * self.longest[g]:.1f} ms)"
            for g in range(3)
        )
