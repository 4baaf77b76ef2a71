"""OCM placement: how fast the scheduler decides, and how soon a worker's GPU change reaches the hub.

1. ``core.placement.schedule`` alone: one Placement (a label predicate, ``numberOfClusters: 1``,
   Exact AddOn ``gpuClusterAvailable``) over N ManagedClusters with scores: decisions per second.
2. Live: a hub and two T4 workers on loopback (``gpuaas server`` processes, the local runtime,
   3 fake GPUs each), the seed's score Placement (``placement-demo2-2`` shape). Repeatedly a
   2-GPU Job starts directly on the chosen worker and the time until the hub's MultiKueueConfig
   lists the other worker is measured (worker pods -> hub's reading -> AddOnPlacementScore ->
   PlacementDecision -> MultiKueueConfig); then the Job is deleted and the flip back is timed.
   OCM's resource-usage agent refreshes every 60 s; the hub here reads every 0.5 s.

Prints the figures and the load average beside them (other work on the machine skews them).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess, create_all
from gpuaas.cli.main import build_app
from gpuaas.core import ocm
from gpuaas.core.placement import Snapshot, schedule

G = "cluster.open-cluster-management.io"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
PLACEMENT: dict[str, Any] = {
    "apiVersion": f"{G}/v1beta1", "kind": "Placement",
    "metadata": {"name": "best", "namespace": "kueue-system"},
    "spec": {"clusterSets": ["global"], "numberOfClusters": 1,
             "predicates": [{"requiredClusterSelector": {"labelSelector": {
                 "matchLabels": {"accelerator": "nvidia-tesla-t4"}}}}],
             "prioritizerPolicy": {"mode": "Exact", "configurations": [
                 {"scoreCoordinate": {"type": "AddOn", "addOn": {
                     "resourceName": "resource-usage-score", "scoreName": "gpuClusterAvailable"}},
                  "weight": 1}]}},
}  # fmt: skip


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def pure(n: int, rounds: int) -> float:
    rng = random.Random(7)
    clusters = [ocm.ManagedCluster(f"c{i:05d}", {"accelerator": "nvidia-tesla-t4" if i % 2 else "nvidia-l4"})
                for i in range(n)]  # fmt: skip
    scores = {(c.name, "resource-usage-score"): ocm.AddOnScore(
        c.name, "resource-usage-score", {"gpuClusterAvailable": rng.randint(-100, 100)})
        for c in clusters}  # fmt: skip
    snap = Snapshot(clusters, {"global": ocm.ManagedClusterSet("global", "LabelSelector")},
                    [ocm.SetBinding("kueue-system", "global")], scores)  # fmt: skip
    placement = ocm.parse_placement(PLACEMENT)
    start = time.perf_counter()
    for _ in range(rounds):
        schedule(placement, snap, 0.0)
    return rounds / (time.perf_counter() - start)


def _post(srv: ServerProcess, docs: list[dict[str, Any]]) -> None:
    with srv.client() as c:
        create_all(c, docs)


def _job(name: str) -> dict[str, Any]:
    c = {"name": "c", "command": ["sleep", "600"],
         "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"template": {"spec": {"containers": [c], "restartPolicy": "Never"}}}}  # fmt: skip


def live(rounds: int) -> list[float]:
    tmp = Path(tempfile.mkdtemp(prefix="gpuaas-bench-placement-"))
    hub = ServerProcess(tmp / "hub").start()
    workers = {n: ServerProcess(tmp / n, extra=("--runtime", "local", "--fake-gpus", "3:Tesla-T4"))
               for n in ("cluster2", "cluster3")}  # fmt: skip
    spoke = resources.files("gpuaas.demos").joinpath("002/addon-spoke.yaml").read_text()
    hub_docs = resources.files("gpuaas.demos").joinpath("002/addon-hub.yaml").read_text()
    times: list[float] = []
    try:
        for name, srv in workers.items():
            srv.start()
            _post(srv, [d for d in yaml.safe_load_all(spoke) if d])
            env = {"GPUAAS_SERVER": srv.url, "GPUAAS_TOKEN": srv.admin_token,
                   "GPUAAS_CONFIG": str(tmp / "cli.json")}  # fmt: skip
            args = ["cluster", "join", "--hub", hub.url, "--hub-token", hub.admin_token,
                    "--name", name, "--label", "accelerator=nvidia-tesla-t4"]  # fmt: skip
            assert CliRunner().invoke(build_app(), args, env=env).exit_code == 0
        binding = next(d for d in yaml.safe_load_all(hub_docs) if d)
        _post(hub, [binding, PLACEMENT, {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck",
            "metadata": {"name": "best"}, "spec": {"controllerName": "open-cluster-management.io/placement",
            "parameters": {"apiGroup": G, "kind": "Placement", "name": "best"}}}])  # fmt: skip
        with hub.client() as c:

            def chosen() -> list[str]:
                r = c.get(f"{KUEUE}/multikueueconfigs/best")
                return list(r.json()["spec"]["clusters"]) if r.status_code == 200 else []

            def until(want: str) -> float:
                start = time.perf_counter()
                while chosen() != [want]:
                    if time.perf_counter() - start > 60:
                        raise RuntimeError(f"MultiKueueConfig never listed {want}")
                    time.sleep(0.02)
                return time.perf_counter() - start

            until("cluster2")  # a tie: the first name
            for i in range(rounds):
                with workers["cluster2"].client() as w:
                    start = time.perf_counter()
                    assert (
                        w.post(
                            "/apis/batch/v1/namespaces/default/jobs", json=_job(f"b{i}")
                        ).status_code
                        == 201
                    )
                    while chosen() != ["cluster3"]:
                        time.sleep(0.02)
                    times.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    w.delete(f"/apis/batch/v1/namespaces/default/jobs/b{i}")
                    while chosen() != ["cluster2"]:
                        time.sleep(0.02)
                    times.append(time.perf_counter() - start)
    finally:
        hub.stop()
        for srv in workers.values():
            srv.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="live flips each way")
    ap.add_argument("--no-live", action="store_true", help="only the scheduler")
    args = ap.parse_args()
    print(load())
    for n in (10, 100, 1000, 5000):
        rate = pure(n, max(3, 20000 // n))
        print(
            f"schedule(): {n:5d} ManagedClusters: {rate:10.1f} decisions/s ({1000 / rate:.2f} ms each)"
        )
    if not args.no_live:
        times = live(args.rounds)
        print(f"worker GPU change -> hub MultiKueueConfig: {len(times)} flips, median "
              f"{statistics.median(times):.2f} s, max {max(times):.2f} s (OCM's agent: every 60 s)")  # fmt: skip
    print(load())


if __name__ == "__main__":
    main()
