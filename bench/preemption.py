"""Preemption latency and pod start rate, on the local runtime and on a three-node Ray cluster.

For each runtime a real ``gpuaas server`` runs one ClusterQueue of 4 GPUs that may preempt lower
priorities. Each run: a dev Job (4 GPUs, grace 0) runs; then a prod Job (4 GPUs) is submitted and
two instants are taken from its submission: the dev pod is gone (grace 0: SIGKILL, its process
vanishes) and the prod pod starts (it writes the time on its first line). p50/p99 over ``--runs``
runs, beside Slurm's figure measured on this kind of machine (``../shared/bench/slurm``: a prod
job runs 1.0-1.15 s after submission, evicting dev). Then pods started per second: ``--pods``
one-pod Jobs (no GPU) submitted at once, until every pod has started. The Ray cluster
(``testing.ray_cluster``: a head and two GPU workers, 1 and 4 GPUs, each labelled as seed 001's
node types) is started and stopped by this script; nothing it starts is left running.

Usage:
    python bench/preemption.py [--runs 50] [--pods 30] [--runtimes local,ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from gpuaas.api.testing import ServerProcess
from gpuaas.testing.ray_cluster import LocalRayCluster, RayNodeSpec

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
BATCH = "/apis/batch/v1/namespaces/bench/jobs"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"
TYPE = "node.kubernetes.io/instance-type"
SLURM = "1.0-1.15 s (../shared/bench/slurm/README.md: prod runs after submission, evicting dev)"


def setup(node_labels: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    flavor: dict[str, Any] = {"nodeLabels": node_labels} if node_labels else {}
    return [
        ("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "bench"}}),
        (f"{KUEUE}/resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": "gpu"},
                                      "spec": flavor}),
        (f"{KUEUE}/workloadpriorityclasses", {"kind": "WorkloadPriorityClass",
                                              "metadata": {"name": "dev"}, "value": 100}),
        (f"{KUEUE}/workloadpriorityclasses", {"kind": "WorkloadPriorityClass",
                                              "metadata": {"name": "prod"}, "value": 1000}),
        (f"{KUEUE}/clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                {"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": 100},
                                              {"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}],
        }}),
        (f"{KUEUE}/namespaces/bench/localqueues", {"kind": "LocalQueue", "metadata": {
            "name": "q", "namespace": "bench"}, "spec": {"clusterQueue": "cq"}}),
        # pods that may run on any node, for the start rate
        (f"{KUEUE}/resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": "any"}}),
        (f"{KUEUE}/clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cq-any"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "any",
                    "resources": [{"name": "cpu", "nominalQuota": 100},
                                  {"name": "nvidia.com/gpu", "nominalQuota": 0}]}]}]}}),
        (f"{KUEUE}/namespaces/bench/localqueues", {"kind": "LocalQueue", "metadata": {
            "name": "any", "namespace": "bench"}, "spec": {"clusterQueue": "cq-any"}}),
    ]  # fmt: skip


def job(name: str, gpus: int, priority: str, marks: Path, queue: str = "q") -> dict[str, Any]:
    script = f'date +%s.%N > {marks}/"$GPUAAS_POD"; exec sleep 300'
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": "bench", "labels": {
            "kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": priority}},
        "spec": {"template": {"spec": {
            "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox",
                            "command": ["/bin/sh", "-c", script],
                            "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": gpus}}}]}}},
    }  # fmt: skip


def until(what: Callable[[], Any], why: str, timeout: float = 60.0, step: float = 0.001) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    raise TimeoutError(f"timed out waiting for {why}")


def pod_pid(c: httpx.Client, name: str) -> int | None:
    for item in c.get(f"{GPUAAS}/runtime/pods").json()["items"]:
        if item["workload"] == name and not item["stopping"]:
            pods = item["pods"]
            if pods and pods[0]["phase"] == "Running" and pods[0]["pid"]:
                return int(pods[0]["pid"])
    return None


def mark(marks: Path, pod: str) -> float | None:
    try:
        return float((marks / pod).read_text())
    except (OSError, ValueError):
        return None


def preemptions(c: httpx.Client, marks: Path, runs: int) -> tuple[list[float], list[float]]:
    stops, starts = [], []
    for i in range(runs):
        dev, prod = f"dev-{i}", f"prod-{i}"
        c.post(BATCH, json=job(dev, 4, "dev", marks)).raise_for_status()
        until(lambda d=dev: mark(marks, f"{d}-0"), f"{dev} to start")  # type: ignore[misc]
        pid = until(lambda d=dev: pod_pid(c, d), f"{dev}'s pid")  # type: ignore[misc]
        gone: list[float] = []
        watcher = threading.Thread(target=_watch_gone, args=(pid, gone), daemon=True)
        watcher.start()
        t0 = time.time()
        c.post(BATCH, json=job(prod, 4, "prod", marks)).raise_for_status()
        started = until(lambda p=prod: mark(marks, f"{p}-0"), f"{prod} to start")  # type: ignore[misc]
        watcher.join(timeout=30)
        stops.append(gone[0] - t0)
        starts.append(started - t0)
        for name in (dev, prod):
            c.delete(f"{BATCH}/{name}").raise_for_status()
        until(lambda: not c.get(f"{GPUAAS}/runtime/pods").json()["items"], "pods gone", step=0.01)
    return stops, starts


def _watch_gone(pid: int, out: list[float]) -> None:
    while _alive(pid):
        time.sleep(0.0005)
    out.append(time.time())


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def start_rate(c: httpx.Client, marks: Path, pods: int) -> float:
    t0 = time.time()
    for i in range(pods):
        c.post(BATCH, json=job(f"many-{i}", 0, "dev", marks, "any")).raise_for_status()
    until(lambda: all(mark(marks, f"many-{i}-0") for i in range(pods)), "every pod", 120, 0.01)
    last = max(mark(marks, f"many-{i}-0") or 0.0 for i in range(pods))
    for i in range(pods):
        c.delete(f"{BATCH}/many-{i}").raise_for_status()
    until(lambda: not c.get(f"{GPUAAS}/runtime/pods").json()["items"], "pods gone", 60, 0.05)
    return pods / (last - t0)


def measure(name: str, extra: tuple[str, ...], labels: dict[str, str], args: argparse.Namespace,
            root: Path) -> None:  # fmt: skip
    marks = root / f"marks-{name}"
    marks.mkdir()
    server = ServerProcess(root / f"data-{name}", extra=extra).start()
    try:
        with server.client() as c:
            for path, doc in setup(labels):
                c.post(path, json={"apiVersion": "kueue.x-k8s.io/v1beta1", **doc}
                       if "kueue" in path else {"apiVersion": "v1", **doc}).raise_for_status()  # fmt: skip
            stops, starts = preemptions(c, marks, args.runs)
            rate = start_rate(c, marks, args.pods)
    finally:
        server.stop()
    print(
        f"{name:6} dev pod gone   p50 {_ms(stops, 50)}  p99 {_ms(stops, 99)}  ({len(stops)} runs)"
    )
    print(f"{name:6} prod pod start p50 {_ms(starts, 50)}  p99 {_ms(starts, 99)}")
    print(f"{name:6} pods started per second: {rate:.1f} ({args.pods} one-pod Jobs at once)")
    print(f"{name:6} load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)


def _ms(values: list[float], pct: int) -> str:
    ordered = sorted(values)
    if pct == 50:
        value = statistics.median(ordered)
    else:
        value = ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]
    return f"{value * 1000:7.1f} ms"


def ray_phases(cluster: LocalRayCluster, runs: int, marks: Path) -> None:
    """Where a pod start goes on Ray, step by step as the Ray runtime takes them: the placement
    group placed (``pg.ready()``, once the previous group's resources are back in Ray's view),
    the lease task in its bundle answered (node and GPU ids), the node's launcher started the
    pod and its command runs (its mark)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from gpuaas.runtimes.ray_actor import lease
    from gpuaas.runtimes.ray_launchers import Launchers, free_per_node

    ray.init(address=cluster.address, namespace="gpuaas-bench", logging_level="ERROR",
             log_to_driver=False)  # fmt: skip
    lease_task = ray.remote(lease)
    launchers = Launchers(ray, "gpuaas-bench")
    phases: dict[str, list[float]] = {"group placed": [], "leased": [], "command runs": []}
    try:
        for i in range(runs):
            t0 = time.time()
            pg = placement_group([{"CPU": 0.1, "GPU": 4.0}], strategy="PACK")
            ray.get(pg.ready(), timeout=60)
            t1 = time.time()
            answer = ray.get(lease_task.options(
                num_cpus=0.1, num_gpus=4, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)
            ).remote(), timeout=60)  # fmt: skip
            t2 = time.time()
            launcher = launchers.get(answer["nodeId"])
            script = f"date +%s.%N > {marks}/phase-{i}; exec sleep 300"
            ray.get(launcher.start.remote(f"bench-{i}", ["/bin/sh", "-c", script], {}, None,
                                          answer["gpus"]), timeout=60)  # fmt: skip
            t3 = until(lambda i=i: mark(marks, f"phase-{i}"), "the command")  # type: ignore[misc]
            phases["group placed"].append(t1 - t0)
            phases["leased"].append(t2 - t1)
            phases["command runs"].append(t3 - t2)
            ray.get(launcher.terminate.remote(f"bench-{i}", 0.0))
            gone = launcher.state.remote
            until(lambda g=gone, i=i: ray.get(g(f"bench-{i}"))["phase"] != "Running",
                  "the pod gone", step=0.01)  # fmt: skip
            before = (free_per_node(ray) or {}).get(answer["nodeId"], {}).get("GPU", 0.0)
            remove_placement_group(pg)
            until(
                lambda n=answer["nodeId"], b=before: (  # type: ignore[misc]
                    (free_per_node(ray) or {}).get(n, {}).get("GPU", 0.0) >= b + 4
                ),
                "GPUs back",
            )
    finally:
        launchers.stop_all()
        ray.shutdown()
    for name, values in phases.items():
        print(f"ray    phase {name:13} p50 {_ms(values, 50)}  p99 {_ms(values, 99)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--runtimes", default="local,ray")
    parser.add_argument(
        "--phases", type=int, default=0, help="also time N Ray pod starts step by step"
    )
    args = parser.parse_args()
    wanted = args.runtimes.split(",")
    with tempfile.TemporaryDirectory(prefix="gpuaas-bench-") as tmp:
        root = Path(tmp)
        if "local" in wanted:
            measure("local", ("--runtime", "local", "--fake-gpus", "4"), {}, args, root)
        if "ray" in wanted:
            nodes = [
                RayNodeSpec("head", {}, num_gpus=0, num_cpus=2),
                RayNodeSpec("l4-1", {TYPE: "g6.4xlarge"}, num_gpus=1, num_cpus=4),
                RayNodeSpec("l4-4", {TYPE: "g6.12xlarge"}, num_gpus=4, num_cpus=4),
            ]
            cluster = LocalRayCluster(root / "ray", nodes).start()
            try:
                extra = ("--runtime", "ray", "--ray-address", cluster.address)
                measure("ray", extra, {TYPE: "g6.12xlarge"}, args, root)
                if args.phases:
                    (root / "marks-phases").mkdir()
                    ray_phases(cluster, args.phases, root / "marks-phases")
            finally:
                cluster.stop()
        print(f"slurm  prod job runs after submission: {SLURM}")


if __name__ == "__main__":
    main()
