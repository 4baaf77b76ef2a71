"""Durable-write throughput of ``gpuaas server``: sequential versus concurrent clients.

Every acknowledged create is durable (SQLite with synchronous=FULL in WAL mode, or a PostgreSQL
commit). Group commit batches concurrent writes into one transaction, so throughput with many
clients should exceed one fsync per request. This script starts a real server, creates
Workloads from 1 client and then from N clients, and prints requests/s and latency percentiles.

Usage:
    python bench/api.py [--requests 400] [--clients 8] [--db postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

from gpuaas.api.testing import ServerProcess

SETUP = [
    (
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
    ),
    (
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "rf"},
        },
    ),
    (
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 64}]}
                        ],
                    }
                ],
            },
        },
    ),
    (
        "/apis/kueue.x-k8s.io/v1beta1/namespaces/bench/localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "bench"},
            "spec": {"clusterQueue": "cq"},
        },
    ),
]


def _workload(name: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
    }


def _run(url: str, token: str, total: int, clients: int) -> tuple[float, list[float]]:
    path = f"{url}/apis/kueue.x-k8s.io/v1beta1/namespaces/bench/workloads"
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = total // clients

    def client() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            for _ in range(per_client):
                t0 = time.perf_counter()
                r = c.post(path, json=_workload(f"w-{uuid.uuid4().hex[:12]}"))
                dt = time.perf_counter() - t0
                if r.status_code != 201:
                    raise RuntimeError(f"create failed: {r.status_code} {r.text}")
                with lock:
                    latencies.append(dt)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--db", default=None, help="PostgreSQL URL (default: SQLite in a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp), args.db) as srv:
        token = srv.admin_token
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as c:
            for path, doc in SETUP:
                r = c.post(f"{srv.url}{path}", json=doc)
                if r.status_code != 409:  # a PostgreSQL database may hold them from a last run
                    r.raise_for_status()
        print(f"gpuaas API bench ({args.db or 'SQLite'}), {args.requests} durable creates per run")
        for clients in (1, args.clients):
            wall, lat = _run(srv.url, token, args.requests, clients)
            lat.sort()
            print(
                f"  {clients} client(s): {len(lat) / wall:,.0f} creates/s, latency p50 "
                f"{statistics.median(lat) * 1000:.1f} ms p99 {lat[int(0.99 * (len(lat) - 1))] * 1000:.1f} ms"
            )


if __name__ == "__main__":
    main()
