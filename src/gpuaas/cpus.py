"""Which CPUs the server's own threads run on (``gpuaas server --cpus``), and its children's.

A server's Python runs on one core at a time (the GIL), yet it hands work between its threads
all the time: the event loop to a write worker, the worker to the group commit, the commit back
to the waiting worker, the MultiKueue thread to its pool. Left to the kernel, those threads
spread over the machine, and every hand-off to a thread on another CPU is a cross-CPU wake-up:
an inter-processor interrupt, which on a virtual machine is an exit to the hypervisor on both
sides (``perf bench sched pipe`` here: 14 us per round trip across CPUs, 2.2 us on one). With
four servers on a 2-core machine (``bench/multicluster.py``), giving each its own CPU cut the
machine's CPU per MultiKueue workload from about 15.6 to about 12.9 ms. It is what Kubernetes
does for its own daemons with reserved CPUs, and what ``taskset -c`` or systemd's
``CPUAffinity=`` would do, but for the server alone: everything it starts for its workloads
(pods' commands, the Ray driver) gets back the CPUs the server started with, so pinning the
control plane never confines the tenants' work to its core. The pod launcher stays on the
server's CPUs: it is the server's helper, answering its requests one by one (it on any CPU and
its leaders with it gave 139-141/s in that bench, against 146-153/s beside its server).

A pinned server's threads also run as ``SCHED_BATCH``. On one CPU, a thread woken by another
(a queue put, an ack, a socket write to a neighbour server on the same CPU) preempts its waker
at once under the default policy; here the waker usually holds the GIL, so the woken thread
runs only to block on it, and the waker comes back: two context switches for nothing, counted
against the waker (py-spy: ``SimpleQueue.put`` was 6 % of the hub's GIL time and 15 % of a
worker's in that bench). A ``SCHED_BATCH`` thread that wakes does not preempt; it runs when the
waker blocks or its slice ends, which is where it could run anyway (the GIL is free then). With
it, that put fell to under 1 % of the worker's GIL time; nine pairs of that bench on 2026-12-07
ran 139/s on average against 132/s, seven of the nine in its favour (a small gain against the
bench's noise; an earlier trial that day saw none). Workloads get the default policy back with
their CPUs: the server's scheduling is the control plane's, never the tenants'.

``pin`` is called once, by ``server.run`` before any thread exists (threads inherit their
creator's CPUs and policy); ``for_children`` is what a child's start is given (``child_arg``: a
comma list in its arguments), applied by the child itself before it runs anything else, with
the default policy (``SCHED_OTHER``) back, so no command starts on the server's CPUs or with its
policy and no thread is left behind. Linux only (``sched_setaffinity``); elsewhere ``--cpus`` is
refused with that reason.
"""

from __future__ import annotations

import os

_before: frozenset[int] | None = None  # the CPUs this process had before pin(); None: unpinned
_arg = ""  # _before as a child's argument, written once by pin() (every pod's start reads it)


class CpuListError(ValueError):
    """A CPU list that cannot be used here; the message says which part and why."""


def parse(text: str) -> frozenset[int]:
    """A CPU list in ``taskset -c``'s syntax (``0``, ``0-3``, ``0,2-3``), checked against the
    CPUs this process may run on (a range past the last of them is refused before it is
    expanded: ``0-99999999999`` must not build a set of that size)."""
    allowed = available()
    if allowed is None:
        raise CpuListError("this system cannot bind a process to CPUs (no sched_setaffinity)")
    may = f"(it may use {describe(allowed)})"
    top = max(allowed)
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise CpuListError(
                f"{text!r}: {part.strip()!r} is not a CPU number or a range like 0-3"
            ) from None
        if low < 0 or high < low:
            raise CpuListError(f"{text!r}: {part.strip()!r} is not a range of CPU numbers")
        if high > top:
            out = max(low, top + 1)
            named = str(out) if out == high else f"{out}-{high}"
            raise CpuListError(f"{text!r}: CPU {named} is not one this process may run on {may}")
        cpus.update(range(low, high + 1))
    outside = cpus - allowed
    if outside:
        raise CpuListError(
            f"{text!r}: CPU {describe(outside)} is not one this process may run on {may}"
        )
    return frozenset(cpus)


def available() -> frozenset[int] | None:
    """The CPUs this process may run on now; None where the system cannot say."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return frozenset(os.sched_getaffinity(0))


def describe(cpus: frozenset[int] | set[int]) -> str:
    """``0-3,6``: the list as ``taskset -c`` and ``/proc/PID/status`` write it."""
    out: list[str] = []
    ordered = sorted(cpus)
    start = prev = ordered[0] if ordered else 0
    for cpu in [*ordered[1:], -2]:  # -2: no CPU follows the last
        if cpu == prev + 1:
            prev = cpu
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(out) if ordered else ""


def pin(cpus: frozenset[int]) -> str:
    """Run this process (the calling thread, and every thread it starts from now on) on
    ``cpus`` as ``SCHED_BATCH``; remember the CPUs it had for its children (``for_children``).
    The policy it runs with, as the server says it: the CPUs are what ``--cpus`` asks for and
    their failure is an error, the policy is a gain the system may refuse (a sandbox's seccomp
    filter), so a refusal leaves the policy as it was and is said, not fatal."""
    global _before, _arg
    if _before is None:
        _before = frozenset(os.sched_getaffinity(0))
        _arg = ",".join(map(str, sorted(_before)))
    os.sched_setaffinity(0, cpus)
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (OSError, AttributeError) as exc:  # AttributeError: no SCHED_BATCH on this system
        return f"its policy unchanged: SCHED_BATCH refused ({exc})"
    return "SCHED_BATCH"


def for_children() -> frozenset[int] | None:
    """The CPUs a workload's process must get back: those the server had before ``pin``; None
    where the server was never pinned (its children inherit what it has)."""
    return _before


def child_arg() -> str:
    """``for_children`` as a child's argument: CPU numbers joined by commas, "" for none."""
    return _arg
