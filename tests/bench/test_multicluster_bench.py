"""``bench/multicluster.py`` runs a hub and three workers, admits every Job it posts through the
hub, sees each pod start, and prints the figures the README quotes (among them the whole
machine's busy CPU per workload, where the pods' and the kernel's share shows)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from bench_run import run_bench

SERVERS = ("hub", "w1", "w2", "w3")


def test_multicluster_bench_admits_every_job_and_prints_its_figures(tmp_path: Path) -> None:
    out = run_bench(
        "multicluster.py",
        "--jobs",
        "6",
        "--generator",
        "processes",
        "--keep",
        str(tmp_path),
        timeout=240,
    )
    assert "admitted through the hub: 6/6 in" in out, out
    assert "hub create -> worker pod started: 6/6 seen" in out, out
    assert "never seen Admitted" not in out
    machine = re.search(r"whole machine: ([0-9.]+) CPU s busy .* ([0-9.]+) ms per workload", out)
    servers = re.search(r"CPU per workload admitted: .*, all ([0-9.]+) ms", out)
    assert machine is not None and servers is not None, out
    # both measured over the run, neither left at zero
    assert float(machine.group(1)) > 0 and float(servers.group(1)) > 0
    # the state of the disk the pods' logs go to, measured where they go, and the kernel
    # threads' share of the machine
    disk = re.search(r"disk: a new file in (\S+) costs ([0-9.]+) ms of CPU", out)
    assert disk is not None and disk.group(1) == str(tmp_path), out
    assert re.search(r"of which kernel threads [0-9.]+ s \(", out), out
    # each server on one CPU in turn (--cpus spread, the default), and said so
    cpus = sorted(os.sched_getaffinity(0))
    layout = ", ".join(f"{n} on CPU {cpus[i % len(cpus)]}" for i, n in enumerate(SERVERS))
    assert f"server threads: {layout} (gpuaas server --cpus;" in out, out
    for name in SERVERS:  # and each server said it when it started
        log = next((tmp_path / name).glob("server-*.log")).read_text()
        assert "server threads on CPU " in log, log
