"""Cost of one GPU sample without NVML: the simulated collector, per GPU, per profile.

Two figures, each the median over ``--rounds`` samples of ``--gpus`` held GPUs:

- ``profile``: every GPU held under a fixed profile (``busy``), the path taken when a workload
  sets ``gpuaas.dev/simulated-gpu-profile`` (and, before idle detection read processes, the
  only path);
- ``processes``: every GPU held by a real pod of the local runtime (``sleep``), its load read
  from the pod's process tree (``LocalRuntime.pod_cpu``: /proc through psutil), the default
  without NVML since then. Skipped where the code has no ``processes`` profile (an older tree),
  so the same script prints the figure before and after.

The pods are started and stopped by this script; nothing is left running.

Usage:
    python bench/telemetry.py [--gpus 8] [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gpuaas.inventory import parse_fake_gpus
from gpuaas.runtimes import LocalRuntime, PodSpec
from gpuaas.telemetry import Profile, SimulatedCollector


def per_gpu_us(sample: Callable[[float], object], gpus: int, rounds: int) -> float:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        sample(float(i) * 15.0)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / gpus * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    n = args.gpus

    fixed = SimulatedCollector(n)
    fixed.set_assignments({i: (f"ns/w{i}", Profile.BUSY) for i in range(n)})
    print(f"profile   (busy):  {per_gpu_us(fixed.sample, n, args.rounds):8.1f} us per GPU sample")

    processes = getattr(Profile, "PROCESSES", None)
    if processes is None:
        print("processes:          not in this tree (no profile reads pod processes)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        runtime = LocalRuntime(Path(tmp) / "rt", parse_fake_gpus(str(n)))
        try:
            for i in range(n):
                runtime.start(f"ns/w{i}", [PodSpec(f"w{i}-0", ("sleep", "300"), gpus=1)])
            deadline = time.monotonic() + 30
            while len(runtime.pod_cpu()) < n:
                if time.monotonic() > deadline:
                    raise SystemExit("the pods did not start")
                runtime.poll()
                time.sleep(0.05)
            owners = runtime.gpu_owners()
            col = SimulatedCollector(n, cpu_source=runtime.pod_cpu)
            col.set_assignments({i: (key, processes, pod) for i, (key, pod) in owners.items()})
            us = per_gpu_us(col.sample, n, args.rounds)
            print(f"processes (sleep): {us:8.1f} us per GPU sample (one pod per GPU)")
        finally:
            runtime.shutdown(grace_seconds=0)


if __name__ == "__main__":
    main()
