"""What a DELETE costs ``gpuaas server`` when many come at once, as a MultiKueue worker gets them.

A MultiKueue hub removes the copies its workers did not win (two per workload on three workers),
a pass's removals to one worker sent together, each on its own kept-alive connection
(``engine.multikueue.connections``). This starts a real server (``--runtime none``, SQLite,
durable), creates N admitted Workloads, then deletes them all in waves with the hub's own client
(``RemoteClient.calls``, from one thread): ``--clients`` DELETEs at once, each on its own
connection, the next wave once all are answered. It prints:

- deletes/s over the delete phase, and p50/p99 of the time a wave took to be answered;
- the server's CPU per delete over that phase (its process, from ``/proc``), user and system.

The server hands the engine the deletes of one event-loop step as one call
(``Engine.delete_many``: one scheduling cycle and one commit for all of them); before 2026-12-07
each DELETE was a call of its own.

Usage: python bench/deletes.py [--workloads 2000] [--clients 16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from gpuaas.api.testing import ServerProcess
from gpuaas.engine.multikueue.remote import Call, RemoteClient, RemoteError, Target
from machine import python_speed

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOADS = f"{KUEUE}/namespaces/default/workloads"


def _setup() -> list[tuple[str, dict[str, Any]]]:
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "100000"}]}
                    ],
                }
            ],
        },
    }
    return [
        (f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2",
                                      "kind": "ResourceFlavor", "metadata": {"name": "f"}}),
        (f"{KUEUE}/clusterqueues", cq),
        (f"{KUEUE}/namespaces/default/localqueues",
         {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}),
    ]  # fmt: skip


def _workload(i: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"wl-{i:06d}", "namespace": "default"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "1"}}}]}}}]}}  # fmt: skip


def _waves(client: RemoteClient, size: int, calls: list[Call]) -> list[float]:
    """``calls`` in waves of ``size`` sent at once; each wave's time, once all are answered."""
    took = []
    for start in range(0, len(calls), size):
        t = time.perf_counter()
        for answer in client.calls(calls[start : start + size]):
            if isinstance(answer, RemoteError):
                raise SystemExit(str(answer))
        took.append(time.perf_counter() - t)
    return took


def _wait_admitted(server: ServerProcess, n: int, timeout: float = 60.0) -> None:
    """Until all ``n`` Workloads hold quota (a delete then frees it: a scheduling cycle)."""
    deadline = time.monotonic() + timeout
    with server.client() as c:
        while True:
            items = c.get(WORKLOADS).json()["items"]
            admitted = sum(1 for w in items if (w.get("status") or {}).get("admission"))
            if admitted == n:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"{admitted} of {n} workloads admitted after {timeout:.0f} s")
            time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=16)
    args = ap.parse_args()
    speed = python_speed()
    with (
        tempfile.TemporaryDirectory(prefix="gpuaas-deletes-") as tmp,
        ServerProcess(Path(tmp) / "server", extra=("--runtime", "none")) as server,
    ):
        with server.client() as c:
            for path, doc in _setup():
                c.post(path, json=doc).raise_for_status()
        client = RemoteClient(Target(server.url, server.admin_token, None))
        n = args.workloads
        _waves(client, args.clients, [Call("POST", WORKLOADS, _workload(i)) for i in range(n)])
        _wait_admitted(server, n)
        assert server.proc is not None
        proc = psutil.Process(server.proc.pid)
        cpu0, t0 = proc.cpu_times(), time.perf_counter()
        deletes = [Call("DELETE", f"{WORKLOADS}/wl-{i:06d}") for i in range(n)]
        took = _waves(client, args.clients, deletes)
        wall, cpu1 = time.perf_counter() - t0, proc.cpu_times()
        client.close()
        with server.client() as c:
            left = c.get(WORKLOADS).json()["items"]
        if left:
            raise SystemExit(f"{len(left)} workloads left after the deletes")
    user, system = (cpu1.user - cpu0.user) / n * 1e3, (cpu1.system - cpu0.system) / n * 1e3
    q = statistics.quantiles(took, n=100)
    print(f"Deletes: {n} admitted Workloads deleted from {args.clients} connections at once")
    print(f"  {speed}")
    print(
        f"  {n / wall:.0f} deletes/s; a wave of {args.clients} answered in "
        f"p50 {q[49] * 1e3:.1f} ms, p99 {q[98] * 1e3:.1f} ms"
    )
    print(f"  server CPU per delete: {user + system:.2f} ms (user {user:.2f}, system {system:.2f})")


if __name__ == "__main__":
    main()
