"""How fast this machine's CPU runs plain Python right now, printed by the benches beside their
figures.

The same code on the same kind of VM has measured 2-3x apart from one day to the next (server
CPU per create 0.47-0.65 ms on one evening, 1.07-1.40 ms on the next, with no load of ours
beside it and no steal time shown): the host's other tenants, or a different host, change what a
core does. A figure is only comparable with another taken on a machine of the same speed, so
each bench prints the time of one fixed piece of pure-Python work (the interpreter loop and
small-object allocation that dominate a server's request path) measured just before it starts.
"""

from __future__ import annotations

import time


def python_speed() -> str:
    """One line: the process CPU seconds 3 million loop iterations with a small dict each took
    (best of 3, so a moment's interruption does not count)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        acc = 0
        for i in range(3_000_000):
            acc += len({"i": i})
        best = min(best, time.process_time() - t0)
    return f"machine speed: 3M Python loop steps with a dict each in {best:.2f} s CPU (best of 3)"
