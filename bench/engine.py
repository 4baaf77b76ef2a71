"""Replay Kueue's scheduler performance shapes in virtual time and print the engine's figures.

Shapes follow kubernetes-sigs/kueue test/performance/scheduler/configs (baseline and large-scale):
every ClusterQueue has 20 CPU nominal, borrowingLimit 100, reclaimWithinCohort Any and
withinClusterQueue LowerPriority; three workload classes arrive at fixed intervals per CQ and run
for a fixed time (the ``gpuaas.dev/runtime-seconds`` annotation).

Usage:
    python bench/engine.py [--shape baseline|large-scale|both] [--scale F] [--cli] [--repeat N]

``--scale`` multiplies the number of workloads per CQ (for the n log n growth check); ``--cli``
also times the whole ``gpuaas scenario run`` process on the generated JSON file; ``--repeat``
runs each shape N times and prints the fastest run and the spread.
Figures: wall time, admissions/s, preemptions, p50/p99 of a scheduling pass and of a preemption
search, and peak RSS. Admissions per second are given three ways: of the whole replay's wall
time (parsing 50,000 objects, arrivals, finishes and checks included), of settling time (the
time inside ``Cluster.schedule``, which the scenario contract calls settling: popping heads,
scheduling cycles, completing evictions) and of scheduling-cycle time (``Scheduler.cycle``
alone). Timing wraps the engine from outside, so the core itself reads no clock.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHAPES: dict[str, dict[str, Any]] = {
    "baseline": {
        "cohorts": 5,
        "cqs": 6,
        "classes": [  # (name, count, interval_ms, runtime_ms, priority, cpu)
            ("small", 350, 100, 200, 50, 1),
            ("medium", 100, 500, 500, 100, 5),
            ("large", 50, 1200, 1000, 200, 20),
        ],
    },
    "large-scale": {
        "cohorts": 10,
        "cqs": 100,
        "classes": [
            ("small", 35, 60, 150, 50, 1),
            ("medium", 11, 300, 350, 100, 5),
            ("large", 4, 700, 700, 200, 20),
        ],
    },
}


def build_scenario(shape: str, scale: float = 1.0) -> dict[str, Any]:
    """A scenario document (the scenario-format contract) for one shape."""
    cfg = SHAPES[shape]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "rf"},
        },
    ]
    arrivals: dict[float, list[dict[str, Any]]] = {}
    for co in range(cfg["cohorts"]):
        for q in range(cfg["cqs"]):
            cq = f"cohort-{co}-cq-{q}"
            objects.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "ClusterQueue",
                    "metadata": {"name": cq},
                    "spec": {
                        "cohort": f"cohort-{co}",
                        "namespaceSelector": {},
                        "preemption": {
                            "reclaimWithinCohort": "Any",
                            "withinClusterQueue": "LowerPriority",
                        },
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {
                                        "name": "rf",
                                        "resources": [
                                            {
                                                "name": "cpu",
                                                "nominalQuota": 20,
                                                "borrowingLimit": 100,
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                }
            )
            objects.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "LocalQueue",
                    "metadata": {"name": cq, "namespace": "bench"},
                    "spec": {"clusterQueue": cq},
                }
            )
            for cls, count, interval, runtime, prio, cpu in cfg["classes"]:
                for i in range(int(count * scale)):
                    at = round(i * interval / 1000.0, 3)
                    arrivals.setdefault(at, []).append(
                        {
                            "apiVersion": "kueue.x-k8s.io/v1beta1",
                            "kind": "Workload",
                            "metadata": {
                                "name": f"{cq}-{cls}-{i}",
                                "namespace": "bench",
                                "annotations": {
                                    "gpuaas.dev/runtime-seconds": str(runtime / 1000.0)
                                },
                            },
                            "spec": {
                                "queueName": cq,
                                "priority": prio,
                                "podSets": [
                                    {
                                        "name": "main",
                                        "count": 1,
                                        "template": {
                                            "spec": {
                                                "containers": [
                                                    {
                                                        "name": "c",
                                                        "resources": {
                                                            "requests": {"cpu": str(cpu)}
                                                        },
                                                    }
                                                ]
                                            }
                                        },
                                    }
                                ],
                            },
                        }
                    )
    steps = [{"at": at, "apply": arrivals[at]} for at in sorted(arrivals)]
    # A final step late enough for everything to have run, checking the queues drained.
    steps.append({"at": (max(arrivals) + 3600.0), "expect": {"pending": [], "admitted": []}})
    return {
        "apiVersion": "gpuaas.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {
            "name": f"bench-{shape}-x{scale:g}",
            "source": "kueue test/performance/scheduler",
        },
        "spec": {"objects": objects, "steps": steps},
    }


def _pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def _timing(method: Callable[..., Any], sink: list[float]) -> Callable[..., Any]:
    """``method``, appending each call's duration to ``sink``."""

    def timed(*args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args)
        finally:
            sink.append(time.perf_counter() - t0)

    return timed


def run_in_process(doc: dict[str, Any]) -> dict[str, Any]:
    """Run the scenario through the runner with timing wrappers around the engine."""
    import gc

    from gpuaas.core import cluster as cluster_mod
    from gpuaas.core import preemption as preemption_mod
    from gpuaas.core import scheduler as scheduler_mod
    from gpuaas.sim import runner
    from gpuaas.sim.scenario import parse_scenario

    gc.collect()  # the previous run's cluster, if any
    gc.disable()  # as `gpuaas scenario run` does
    cycle_times: list[float] = []
    search_times: list[float] = []
    settle_times: list[float] = []
    # (class, method, where its durations go): wrapped from outside, put back afterwards.
    timed = [
        (scheduler_mod.Scheduler, "cycle", cycle_times),
        (preemption_mod.ClassicalPreemption, "targets", search_times),
        (cluster_mod.Cluster, "schedule", settle_times),
    ]
    originals = [(cls, name, getattr(cls, name)) for cls, name, _ in timed]
    for (cls, name, sink), (_, _, orig) in zip(timed, originals, strict=True):
        setattr(cls, name, _timing(orig, sink))
    try:
        seen: list[Any] = []
        t0, c0 = time.perf_counter(), time.process_time()
        scenario = parse_scenario(doc, "<bench>")
        outcome = runner.run_scenario(scenario, on_step=lambda _s, c: seen.append(c))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        for cls, name, orig in originals:
            setattr(cls, name, orig)
    cluster = seen[-1]
    admissions = sum(w.admission_count for w in cluster.workloads.values())
    return {
        "workloads": len(cluster.workloads),
        "passed": outcome.passed,
        "wall_s": wall,
        "cpu_s": cpu,
        "admissions": admissions,
        "admissions_per_s": admissions / wall if wall else 0.0,
        "engine_s": sum(cycle_times),
        "admissions_per_engine_s": admissions / sum(cycle_times) if cycle_times else 0.0,
        "settle_s": sum(settle_times),
        "admissions_per_settle_s": admissions / sum(settle_times) if settle_times else 0.0,
        "preemptions": len(cluster.preempted_keys),
        "evictions": sum(w.requeue_count for w in cluster.workloads.values()),
        "cycles": len(cycle_times),
        "cycle_p50_ms": _pct(cycle_times, 0.5) * 1000,
        "cycle_p99_ms": _pct(cycle_times, 0.99) * 1000,
        "searches": len(search_times),
        "search_p50_ms": _pct(search_times, 0.5) * 1000,
        "search_p99_ms": _pct(search_times, 0.99) * 1000,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_cli(doc: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        path.write_text(json.dumps(doc))
        size_mb = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "gpuaas", "scenario", "run", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
    return {"file_mb": size_mb, "process_wall_s": wall, "exit_code": proc.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["baseline", "large-scale", "both"], default="both")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cli", action="store_true", help="also time the whole CLI process")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each shape N times; print the fastest run and the spread (these shared "
        "VMs vary by 20%% or more from run to run)",
    )
    ap.add_argument(
        "--growth",
        action="store_true",
        help="run the shape at scale/10 and scale and compare (use baseline: at x0.1 the "
        "large-scale shape's 4 large workloads per CQ round down to 0, a different mix)",
    )
    args = ap.parse_args()
    shapes = ["baseline", "large-scale"] if args.shape == "both" else [args.shape]
    print(f"gpuaas engine bench (python {sys.version.split()[0]}, {os.cpu_count()} cpus)")
    for shape in shapes:
        scales = [args.scale / 10, args.scale] if args.growth else [args.scale]
        results = []
        for scale in scales:
            doc = build_scenario(shape, scale)
            runs = [run_in_process(doc) for _ in range(max(1, args.repeat))]
            r = min(runs, key=lambda x: x["wall_s"])
            results.append({**r, "median_wall_s": statistics.median(x["wall_s"] for x in runs)})
            print(
                f"{shape} x{scale:g}: {r['workloads']} workloads, wall {r['wall_s']:.2f} s "
                f"(cpu {r['cpu_s']:.2f} s), "
                f"{r['admissions']} admissions ({r['admissions_per_s']:,.0f}/s of wall time, "
                f"{r['admissions_per_settle_s']:,.0f}/s of settling time, "
                f"{r['admissions_per_engine_s']:,.0f}/s of scheduling-cycle time), "
                f"{r['preemptions']} preempted ({r['evictions']} evictions), "
                f"{r['cycles']} cycles p50 {r['cycle_p50_ms']:.3f} ms p99 {r['cycle_p99_ms']:.3f} ms, "
                f"{r['searches']} preemption searches p50 {r['search_p50_ms']:.3f} ms "
                f"p99 {r['search_p99_ms']:.3f} ms, peak RSS {r['peak_rss_mib']:.0f} MiB, "
                f"expectations {'held' if r['passed'] else 'FAILED'}"
            )
            if len(runs) > 1:
                print(f"  {len(runs)} runs, admissions/s (min / median / max):")
                for label, key in (
                    ("wall time", "admissions_per_s"),
                    ("settling time", "admissions_per_settle_s"),
                    ("scheduling-cycle time", "admissions_per_engine_s"),
                ):
                    v = sorted(x[key] for x in runs)
                    print(
                        f"    {label:22s} {v[0]:>8,.0f} / {statistics.median(v):>8,.0f} / "
                        f"{v[-1]:>8,.0f}"
                    )
            if args.cli:
                c = run_cli(doc)
                print(
                    f"  cli: gpuaas scenario run on {c['file_mb']:.1f} MB JSON: "
                    f"{c['process_wall_s']:.2f} s, exit {c['exit_code']}"
                )
        if args.growth and len(results) == 2:
            small, big = results
            n_ratio = big["workloads"] / max(1, small["workloads"])
            # Medians: the smaller run is short enough for one lucky or unlucky run to skew it.
            t_ratio = big["median_wall_s"] / max(1e-9, small["median_wall_s"])
            print(
                f"  growth: {n_ratio:.1f}x workloads -> {t_ratio:.1f}x time (median wall) "
                f"(n log n would be {n_ratio * (1 + __import__('math').log10(n_ratio) / 4):.1f}x or less)"
            )


if __name__ == "__main__":
    main()
