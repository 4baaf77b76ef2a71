"""MultiKueue through a hub to three workers on this machine, all four ``gpuaas server`` processes.

Kueue's own MultiKueue benchmark (kubernetes-sigs/kueue PR #13936: 1 manager, 3 envtest workers,
1,000 QPS clients) admits 97-102 workloads/s. Here a hub (``--runtime none``: its Jobs are managed
by MultiKueue and never run on it) and three workers (``--runtime local``: each pod is a real
process) are joined with ``gpuaas cluster join``; N Jobs are created on the hub by 8 client
threads. Figures:

- admitted through the hub per second: N over the time from the first create to the last hub
  workload Admitted (its MultiKueue check Ready: a worker admitted its copy and the Job was
  created there), seen on a watch of the hub's workloads;
- dispatch latency, hub create to worker pod started (first seen running in the worker's
  ``/runtime/pods``, polled every 50 ms: up to 50 ms late; not polled at all with
  ``--worker-runtime none``, where no pod ever runs, so the workers serve only MultiKueue),
  p50 and p99;
- hub create to hub Admitted, p50 and p99.

Usage: python bench/multicluster.py [--jobs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.main import build_app

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
POD_POLL = 0.05  # seconds between reads of a worker's pods (each one costs the worker CPU)
KUEUE_FIGURE = "97-102/s (Kueue PR #13936: 1 manager + 3 envtest workers, 1,000 QPS clients)"


def _queues(check: bool) -> list[dict[str, Any]]:
    cq: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default-flavor", "resources": [
                {"name": "cpu", "nominalQuota": "1000"},
                {"name": "memory", "nominalQuota": "1000Gi"}]}]}]},
    }  # fmt: skip
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "default-flavor"}}]  # fmt: skip
    if check:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                     "metadata": {"name": "mk"},
                     "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                              "parameters": {"apiGroup": "kueue.x-k8s.io",
                                             "kind": "MultiKueueConfig", "name": "default"}}})  # fmt: skip
    docs.append(cq)
    docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": "user-queue", "namespace": "default"},
                 "spec": {"clusterQueue": "cluster-queue"}})  # fmt: skip
    return docs


def _post_all(c: httpx.Client, docs: list[dict[str, Any]]) -> None:
    for d in docs:
        ns = d["metadata"].get("namespace")
        plural = d["kind"].lower() + "s"
        path = f"{KUEUE}/namespaces/{ns}/{plural}" if ns else f"{KUEUE}/{plural}"
        r = c.post(path, json=d)
        r.raise_for_status()


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["sleep", "120"],
             "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}]}}},
    }  # fmt: skip


def _lines(r: httpx.Response) -> Any:
    """The watch's lines until the hub closes the stream (when the bench stops it)."""
    try:
        yield from r.iter_lines()
    except httpx.HTTPError:
        return


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] if xs else float("nan")


def _cpu(srv: ServerProcess) -> float:
    """CPU seconds a server process (and its pods, once reaped) used so far."""
    try:
        t = psutil.Process(srv.proc.pid if srv.proc else -1).cpu_times()
    except psutil.Error:
        return float("nan")
    return float(t.user + t.system + t.children_user + t.children_system)


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--keep", type=Path, default=None, help="keep data dirs here")
    ap.add_argument(
        "--worker-runtime",
        default="local",
        help="the workers' runtime: local (real processes) or none (no pods: admission only)",
    )
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="gpuaas-mk-bench-"))
    hub = ServerProcess(base / "hub")
    workers = [
        ServerProcess(base / f"w{i}", extra=("--runtime", args.worker_runtime, "--fake-gpus", "0"))
        for i in (1, 2, 3)
    ]
    created: dict[str, float] = {}
    admitted: dict[str, float] = {}
    started: dict[str, float] = {}
    stop = threading.Event()
    try:
        hub.start()
        for w in workers:
            w.start()
        with hub.client() as hc:
            _post_all(hc, _queues(check=True))
        for i, w in enumerate(workers, 1):
            with w.client() as wc:
                _post_all(wc, _queues(check=False))
            env = {"GPUAAS_SERVER": w.url, "GPUAAS_TOKEN": w.admin_token,
                   "GPUAAS_CONFIG": str(base / "cli.json")}  # fmt: skip
            res = CliRunner().invoke(build_app(), ["cluster", "join", "--hub", hub.url,
                                                   "--hub-token", hub.admin_token, "--name",
                                                   f"w{i}", "--config", "default"], env=env)  # fmt: skip
            assert res.exit_code == 0, res.output
        with hub.client() as hc:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ac = hc.get(f"{KUEUE}/admissionchecks/mk").json()
                conds = (ac.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Active" and c["status"] == "True" for c in conds):
                    break
                time.sleep(0.1)

        def watch_hub() -> None:
            with (
                hub.client() as hc,
                hc.stream(
                    "GET", f"{KUEUE}/namespaces/default/workloads?watch=true", timeout=None
                ) as r,
            ):
                for line in _lines(r):
                    if stop.is_set():
                        return
                    if not line.strip():
                        continue
                    obj = json.loads(line).get("object") or {}
                    name = (obj.get("metadata") or {}).get("name")
                    conds = (obj.get("status") or {}).get("conditions") or []
                    if (
                        name
                        and name not in admitted
                        and any(
                            c.get("type") == "Admitted" and c.get("status") == "True" for c in conds
                        )
                    ):
                        admitted[name] = time.monotonic()

        def poll_pods(w: ServerProcess) -> None:
            with w.client() as wc:
                while not stop.is_set():
                    try:
                        items = wc.get("/apis/gpuaas.dev/v1alpha1/runtime/pods").json()["items"]
                    except (httpx.HTTPError, ValueError, KeyError):
                        continue
                    now = time.monotonic()
                    for it in items:
                        if any(p.get("phase") == "Running" for p in it.get("pods") or []):
                            started.setdefault(it["workload"], now)
                    time.sleep(POD_POLL)

        pods = args.worker_runtime != "none"
        threads = [threading.Thread(target=watch_hub, daemon=True)]
        if pods:  # each poll is a request the worker serves: none where no pod can start
            threads += [threading.Thread(target=poll_pods, args=(w,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        time.sleep(0.5)
        names = [f"bench-{i:05d}" for i in range(args.jobs)]
        clients = [hub.client() for _ in range(8)]

        def create(i: int) -> None:
            name = names[i]
            created[name] = time.monotonic()
            r = clients[i % 8].post("/apis/batch/v1/namespaces/default/jobs", json=_job(name))
            r.raise_for_status()

        load0 = os.getloadavg()
        cpu0 = {"bench": _self_cpu(), "hub": _cpu(hub)} | {
            f"w{i}": _cpu(w) for i, w in enumerate(workers, 1)
        }
        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(args.jobs)))
        t_created = time.monotonic()
        deadline = t_created + max(120.0, args.jobs / 2)
        while time.monotonic() < deadline and (
            len(admitted) < args.jobs or (pods and len(started) < args.jobs)
        ):
            time.sleep(0.1)
        t_end = time.monotonic()
        cpu1 = {"bench": _self_cpu(), "hub": _cpu(hub)} | {
            f"w{i}": _cpu(w) for i, w in enumerate(workers, 1)
        }
        load1 = os.getloadavg()
        for c in clients:
            c.close()
        done = [n for n in names if n in admitted]
        last = max((admitted[n] for n in done), default=t0)
        rate = len(done) / (last - t0) if done else 0.0
        lat_admit = [admitted[n] - created[n] for n in done]
        lat_pod = [started[n] - created[n] for n in names if n in started]
        print(f"MultiKueue bench: hub + 3 workers on this machine, {args.jobs} Jobs, 8 clients")
        print(
            f"  created on the hub in {t_created - t0:.2f} s ({args.jobs / (t_created - t0):.0f}/s)"
        )
        print(f"  admitted through the hub: {len(done)}/{args.jobs} in {last - t0:.2f} s: "
              f"{rate:.1f} workloads/s   (Kueue: {KUEUE_FIGURE})")  # fmt: skip
        print(f"  hub create -> hub Admitted: p50 {_pct(lat_admit, 50):.3f} s, "
              f"p99 {_pct(lat_admit, 99):.3f} s")  # fmt: skip
        print(f"  hub create -> worker pod started: {len(lat_pod)}/{args.jobs} seen, "
              f"p50 {_pct(lat_pod, 50):.3f} s, p99 {_pct(lat_pod, 99):.3f} s")  # fmt: skip
        print("  target: >= 200 workloads/s, p99 < 1 s")
        wall = t_end - t0
        used = {k: cpu1[k] - cpu0[k] for k in cpu0}
        total = sum(used.values())
        print(f"  load average before {load0[0]:.2f}, after {load1[0]:.2f} (1 min; "
              f"{os.cpu_count()} CPUs)")  # fmt: skip
        print(f"  CPU over {wall:.1f} s: " + ", ".join(
            f"{k} {v:.1f} s ({v / wall:.0%} of a core)" for k, v in used.items()))  # fmt: skip
        print("  CPU per workload admitted: " + ", ".join(
            f"{k} {v / max(1, len(done)) * 1000:.2f} ms" for k, v in used.items())
            + f", all {total / max(1, len(done)) * 1000:.2f} ms")  # fmt: skip
        print(f"  the load generator (this process: clients, watch, pod polling) used "
              f"{used['bench'] / total:.0%} of the CPU the bench's processes used")  # fmt: skip
    finally:
        stop.set()
        hub.kill()
        for w in workers:
            w.stop()
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
