"""MultiKueue through a hub to three workers on this machine, all four ``gpuaas server`` processes.

Kueue's own MultiKueue benchmark (kubernetes-sigs/kueue PR #13936: 1 manager, 3 envtest workers,
1,000 QPS clients) admits 97-102 workloads/s. Here a hub (``--runtime none``: its Jobs are managed
by MultiKueue and never run on it) and three workers (``--runtime local``: each pod is a real
process) are joined with ``gpuaas cluster join``; N Jobs (``--jobs``, 1,000 by default: five
seconds or more at the target rate, so one slow second weighs less than in a one-second run) are
created on the hub by 8 clients of a load generator outside this process (``bench/job_load.py``:
``wrk`` with a Lua script where installed, else httpx clients in two processes), whose CPU is
printed beside the servers'. By default the clients post as fast as the hub answers (a burst: the
figures are those of a saturated machine, the latencies mostly queueing); with ``--rate R`` they
post open-loop, Job i due ``i / R`` seconds after the start whatever the answers (see
``job_load``), so dispatch latency is measured at an offered rate below saturation; how far the
sends fell behind their due times is printed too (a late send hides that wait from the latency;
wrk waits in whole milliseconds, so a send may also go up to 1 ms early). Figures:

- admitted through the hub per second: N over the time from the first create to the last hub
  workload Admitted (its MultiKueue check Ready: a worker admitted its copy and the Job was
  created there), seen on a watch of the hub's workloads (with ``--rate``, about the rate
  offered, as long as the machine keeps up);
- dispatch latency, hub create to worker pod started: the start time of the pod's first
  process (``pod_init``, spawned as the pod is, as a Kubernetes pod is Running once its
  container started; the command itself runs a few milliseconds later), read from /proc for
  the pid the worker's ``/runtime/pods`` gives (the kernel's record, in 10 ms ticks), the list
  read every 0.5 s (reading it every 50 ms and taking the time a pod was first seen, as before
  2026-11-27, cost each worker a list of all its pods 20 times a second and was up to 50 ms
  late); not read at all with ``--worker-runtime none``, where no pod ever runs, so the
  workers serve only MultiKueue; p50 and p99;
- hub create to hub Admitted, p50 and p99;
- CPU seconds of each process over the run, and per workload admitted: a worker's own (its
  pods' processes are not counted: they are its children only once reaped, after the run);
- the whole machine's busy CPU over the run (``/proc/stat``: user, nice, system, irq, softirq)
  per workload admitted: beside the processes above, the pods' own processes, the pod launchers
  and the kernel (and anything else running; the bench waits for nothing else to run).

"Hub create" is the moment just before the create request was sent. With real pods (the
default, ``--worker-runtime local``) every pod is ``pod_init``, forked by the worker's pod
launcher (``runtimes/pod_launcher.py``), running ``sleep 120``: about 1 ms of the launcher's CPU
per pod beside the worker's own, not in any figure above (like the pods, the launcher is the
worker's child, counted only once reaped, after the run) but in the load average, printed too.

Usage: python bench/multicluster.py [--jobs N] [--rate R] [--keep DIR] [--worker-runtime none]
                                   [--generator auto|wrk|processes] [--cpus spread|none]
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
from pathlib import Path
from typing import Any

import httpx
import psutil
from typer.testing import CliRunner

import job_load
from gpuaas.api.testing import ServerProcess
from gpuaas.cli.main import build_app
from machine import disk_speed, kernel_threads_cpu, python_speed

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
POD_POLL = 0.5  # seconds between reads of a worker's pods (each costs the worker CPU; a pod's
# start is read from the pod, so the period only sets when the bench sees the last one)
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


def _layout(mode: str) -> list[tuple[str, ...]]:
    """Each server's ``--cpus`` (hub, w1, w2, w3): with ``spread``, one CPU each, in turn over
    the CPUs this process may use (on 2 CPUs: the hub and w2 on the first, w1 and w3 on the
    second), as an operator gives each daemon of a small control plane its own core; nothing
    with ``none``. Pods, the load generator and this process are never bound."""
    if mode == "none" or not hasattr(os, "sched_getaffinity"):
        return [()] * 4
    cpus = sorted(os.sched_getaffinity(0))
    return [("--cpus", str(cpus[i % len(cpus)])) for i in range(4)]


def _describe_layout(layout: list[tuple[str, ...]]) -> str:
    if not any(layout):
        return "server threads: wherever the kernel puts them (--cpus none)"
    names = ("hub", "w1", "w2", "w3")
    return (
        "server threads: "
        + ", ".join(f"{n} on CPU {extra[1]}" for n, extra in zip(names, layout, strict=True))
        + " (gpuaas server --cpus; pods and the load generator on any)"
    )


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


_TICK = os.sysconf("SC_CLK_TCK")


def _process_start(pid: int) -> float | None:
    """When process ``pid`` started, on this process's ``time.monotonic()`` clock: the kernel's
    record (/proc/PID/stat's starttime, ticks since boot: 10 ms steps), not psutil's Unix time,
    which adds the boot time in whole seconds (up to a second off). The pods run on this machine."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    since_boot = int(stat[stat.rfind(")") + 2 :].split()[19]) / _TICK
    return since_boot - (time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic())


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


def _machine_busy() -> float:
    """CPU seconds this machine's CPUs spent busy so far, kernel included (user, nice, system,
    irq, softirq; not idle, I/O wait or time stolen by the hypervisor): beside the servers' own,
    what the pods' processes and the kernel add."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--keep", type=Path, default=None, help="keep data dirs here")
    ap.add_argument(
        "--worker-runtime",
        default="local",
        help="the workers' runtime: local (real processes) or none (no pods: admission only)",
    )
    ap.add_argument("--generator", choices=("auto", "wrk", "processes"), default="auto")
    ap.add_argument(
        "--rate", type=float, default=0.0, help="post open-loop at R Jobs/s (default: a burst)"
    )
    ap.add_argument(
        "--cpus",
        choices=("spread", "none"),
        default="spread",
        help="spread: each server's threads on one CPU, in turn (gpuaas server --cpus); "
        "none: wherever the kernel puts them",
    )
    args = ap.parse_args()
    speed = python_speed()  # before any server starts: the machine as the bench found it
    use_wrk = args.generator == "wrk" or (args.generator == "auto" and shutil.which("wrk"))
    base = args.keep or Path(tempfile.mkdtemp(prefix="gpuaas-mk-bench-"))
    base.mkdir(parents=True, exist_ok=True)  # --keep may name a directory not made yet
    disk = disk_speed(base)  # where the servers' data directories and the pods' logs go
    layout = _layout(args.cpus)
    hub = ServerProcess(base / "hub", extra=layout[0])
    workers = [
        ServerProcess(
            base / f"w{i}",
            extra=("--runtime", args.worker_runtime, "--fake-gpus", "0", *layout[i]),
        )
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
        with hub.client() as hc:  # every worker Active, not only the check: the check turns
            # Active with its first worker, and a worker that connects mid-burst is nominated
            # late, a second write of each workload already waiting (and no copy before then)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                items = hc.get(f"{KUEUE}/multikueueclusters").json().get("items") or []
                active = [
                    c for c in items
                    if any(k["type"] == "Active" and k["status"] == "True"
                           for k in (c.get("status") or {}).get("conditions") or [])
                ]  # fmt: skip
                if len(active) == len(workers):
                    break
                time.sleep(0.1)
            else:
                raise SystemExit("the workers did not all turn Active in 30 s")

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
                    for it in items:
                        if it["workload"] in started:
                            continue
                        starts = [
                            _process_start(p["pid"])
                            for p in it.get("pods") or []
                            if p.get("phase") == "Running" and p.get("pid")
                        ]
                        if starts and None not in starts:
                            started[it["workload"]] = min(s for s in starts if s is not None)
                    time.sleep(POD_POLL)

        pods = args.worker_runtime != "none"
        threads = [threading.Thread(target=watch_hub, daemon=True)]
        if pods:  # each poll is a request the worker serves: none where no pod can start
            threads += [threading.Thread(target=poll_pods, args=(w,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        time.sleep(0.5)
        names = job_load.names(args.jobs)
        wanted = set(names)

        def finished() -> bool:
            if len(admitted) < args.jobs or (pods and len(started) < args.jobs):
                return False
            return wanted <= admitted.keys() and (not pods or wanted <= started.keys())

        load0 = os.getloadavg()
        machine0 = _machine_busy()
        kernel0 = kernel_threads_cpu()
        cpu0 = {"bench": _self_cpu(), "hub": _cpu(hub)} | {
            f"w{i}": _cpu(w) for i, w in enumerate(workers, 1)
        }
        wait = max(120.0, args.jobs / 2)
        if use_wrk:
            load = job_load.run_wrk(
                hub.url, hub.admin_token, _job, args.jobs, 8, finished, wait, args.rate
            )
        else:
            load = job_load.run_processes(hub.url, hub.admin_token, _job, args.jobs, 8, args.rate)
            deadline = load.last_answer + wait
            while time.monotonic() < deadline and not finished():
                time.sleep(0.1)
        created.update(load.sent)
        t0 = min(created.values(), default=time.monotonic())
        t_created = load.last_answer
        t_end = time.monotonic()
        cpu1 = {"bench": _self_cpu(), "hub": _cpu(hub)} | {
            f"w{i}": _cpu(w) for i, w in enumerate(workers, 1)
        }
        cpu0["generator"], cpu1["generator"] = 0.0, load.cpu
        load1 = os.getloadavg()
        machine1 = _machine_busy()
        kernel1 = kernel_threads_cpu()
        done = [n for n in names if n in admitted]
        last = max((admitted[n] for n in done), default=t0)
        rate = len(done) / (last - t0) if done else 0.0
        lat_admit = [admitted[n] - created[n] for n in done]
        lat_pod = [started[n] - created[n] for n in names if n in started]
        gen = "wrk + Lua" if use_wrk else "httpx client processes"
        offered = f"open loop at {args.rate:g}/s" if args.rate > 0 else "a burst"
        print(f"MultiKueue bench: hub + 3 workers on this machine, {args.jobs} Jobs, "
              f"8 clients ({gen}), {offered}")  # fmt: skip
        print(f"  {speed}")
        print(f"  {disk}")
        print(f"  {_describe_layout(layout)}")
        span = max(t_created - t0, 1e-9)
        print(f"  created on the hub in {span:.2f} s ({args.jobs / span:.0f}/s, "
              f"{load.errors} errors)")  # fmt: skip
        if load.late:
            print(f"  sends behind their due times: p50 {_pct(load.late, 50) * 1000:.1f} ms, "
                  f"p99 {_pct(load.late, 99) * 1000:.1f} ms, max {max(load.late) * 1000:.1f} ms")  # fmt: skip
        print(f"  admitted through the hub: {len(done)}/{args.jobs} in {last - t0:.2f} s: "
              f"{rate:.1f} workloads/s   (Kueue: {KUEUE_FIGURE})")  # fmt: skip
        print(f"  hub create -> hub Admitted: p50 {_pct(lat_admit, 50):.3f} s, "
              f"p99 {_pct(lat_admit, 99):.3f} s")  # fmt: skip
        print(f"  hub create -> worker pod started: {len(lat_pod)}/{args.jobs} seen, "
              f"p50 {_pct(lat_pod, 50):.3f} s, p99 {_pct(lat_pod, 99):.3f} s")  # fmt: skip
        print("  target: >= 200 workloads/s, p99 < 1 s")
        missing = [n for n in names if n not in admitted]
        if missing:
            print(f"  never seen Admitted on the hub: {', '.join(missing[:5])}"
                  f"{' ...' if len(missing) > 5 else ''}")  # fmt: skip
        wall = t_end - t0
        used = {k: cpu1[k] - cpu0[k] for k in cpu0}
        total = sum(used.values())
        print(f"  load average before {load0[0]:.2f}, after {load1[0]:.2f} (1 min; "
              f"{os.cpu_count()} CPUs)")  # fmt: skip
        print(f"  CPU over {wall:.1f} s: " + ", ".join(
            f"{k} {v:.1f} s ({v / wall:.0%} of a core)" for k, v in used.items()))  # fmt: skip
        busy = machine1 - machine0
        print(f"  whole machine: {busy:.1f} CPU s busy over {wall:.1f} s "
              f"({busy / wall / (os.cpu_count() or 1):.0%} of {os.cpu_count()} CPUs), "
              f"{busy / max(1, len(done)) * 1000:.2f} ms per workload admitted: the processes "
              f"below, the pods' own, the kernel's and anything else running")  # fmt: skip
        threads = {k: v - kernel0.get(k, 0.0) for k, v in kernel1.items()}
        top = sorted(((v, k) for k, v in threads.items() if v > 0), reverse=True)[:3]
        print(f"  of which kernel threads {sum(threads.values()):.2f} s ("
              + ", ".join(f"{k} {v:.2f} s" for v, k in top) + ")")  # fmt: skip
        print("  CPU per workload admitted: " + ", ".join(
            f"{k} {v / max(1, len(done)) * 1000:.2f} ms" for k, v in used.items())
            + f", all {total / max(1, len(done)) * 1000:.2f} ms")  # fmt: skip
        print(f"  of the CPU the bench's processes used, the load generator ({gen}) used "
              f"{used['generator'] / total:.0%} and this process (the hub watch"
              f"{', pod polling' if pods else ''}) {used['bench'] / total:.0%}")  # fmt: skip
    finally:
        stop.set()
        hub.kill()
        for w in workers:
            w.stop()
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
