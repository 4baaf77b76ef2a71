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
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations (net of frees) between young collections; CPython's default is 700
MIDDLE = 10  # young collections per collection of the middle generation (as CPython)
OLD = 100  # middle collections before a full one is considered (default 10)


def apply() -> None:
    """Set the thresholds and freeze the start-up heap (see the module docstring)."""
    gc.set_threshold(YOUNG, MIDDLE, OLD)
    gc.collect()
    gc.freeze()
