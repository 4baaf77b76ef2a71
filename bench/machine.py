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

import os
import tempfile
import time
from pathlib import Path

import psutil


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


def disk_speed(directory: Path | str | None = None) -> str:
    """One line: the CPU a new file costs in ``directory``'s file system now (the system's
    temporary directory by default), measured on 50 files, best of 3.

    On the 2-core VM's disk (ext4 without a journal) a new inode skips every inode freed in the
    last one to six minutes (the kernel's ``recently_deleted``), reading the inode table for
    each: a file that costs 0.02 ms there after an idle spell cost 0.5-1.2 ms right after a
    bench removed its thousands of pods' files. Every pod's start creates its log, so a run's
    figures depend on what ran just before it; this line says which case a run was in."""
    best = float("inf")
    with tempfile.TemporaryDirectory(dir=directory, prefix="gpuaas-disk-") as tmp:
        for round_ in range(3):
            t0 = time.process_time()
            for i in range(50):
                os.close(os.open(os.path.join(tmp, f"{round_}-{i}"), os.O_WRONLY | os.O_CREAT))
            best = min(best, (time.process_time() - t0) / 50)
    where = directory or tempfile.gettempdir()
    return f"disk: a new file in {where} costs {best * 1000:.3f} ms of CPU (best of 3 x 50)"


def kernel_threads_cpu() -> dict[str, float]:
    """CPU seconds each kernel thread (a child of ``kthreadd``, pid 2) has used so far, by name:
    what runs on the machine's cores beside every process the benches start, such as the
    memory monitor ``kdamond`` some VMs run, whose page walks grow with processes that map
    the same pages (every pod leader is a fork of its launcher)."""
    out: dict[str, float] = {}
    for proc in psutil.process_iter(["ppid", "name", "cpu_times"]):
        info = proc.info
        if info["ppid"] == 2 and info["cpu_times"] is not None:
            name = str(info["name"]).split("/")[0]
            out[name] = out.get(name, 0.0) + info["cpu_times"].user + info["cpu_times"].system
    return out
