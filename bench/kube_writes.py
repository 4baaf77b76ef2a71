"""What a kubectl-style write costs on ``gpuaas server``: server-side apply (create, no-op
re-apply, a change), merge, JSON and strategic patches, each timed per request.

Field ownership (``managedFields``) and the patch are computed under the engine's lock, so this
shows what they add to a write. Starts a real server, applies N LocalQueues and N Jobs, and
prints requests/s and latency percentiles per operation.

Usage:
    python bench/kube_writes.py [--objects 200] [--db postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from gpuaas.api.testing import ServerProcess

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
APPLY = {"content-type": "application/apply-patch+yaml"}


def _lq(i: int, cq: str) -> str:
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": f"lq-{i}", "labels": {"i": str(i)}},
                       "spec": {"clusterQueue": cq}})  # fmt: skip


def _job(i: int) -> dict[str, object]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"job-{i}", "labels": {"kueue.x-k8s.io/queue-name": "lq-0"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}}}  # fmt: skip


def _timed(name: str, n: int, call: Callable[[int], httpx.Response]) -> None:
    took = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        r = call(i)
        took.append(time.perf_counter() - t)
        if r.status_code >= 300:
            raise SystemExit(f"{name} #{i}: {r.status_code} {r.text[:200]}")
    wall = time.perf_counter() - start
    q = statistics.quantiles(took, n=100)
    print(
        f"{name:<28} {n / wall:8.1f} req/s   p50 {q[49] * 1e3:6.1f} ms   p99 {q[98] * 1e3:6.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    n = args.objects
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProcess(Path(tmp) / "data", args.db).start()
        try:
            with srv.client() as c:
                c.post("/api/v1/namespaces", json={"metadata": {"name": "b"}})
                lqs = f"{KUEUE}/namespaces/b/localqueues"
                jobs = "/apis/batch/v1/namespaces/b/jobs"
                ssa = {"fieldManager": "bench"}
                _timed("apply --server-side (new)", n,
                       lambda i: c.patch(f"{lqs}/lq-{i}", content=_lq(i, "cq"), headers=APPLY,
                                         params=ssa))  # fmt: skip
                _timed("apply --server-side (same)", n,
                       lambda i: c.patch(f"{lqs}/lq-{i}", content=_lq(i, "cq"), headers=APPLY,
                                         params=ssa))  # fmt: skip
                _timed("apply --server-side (change)", n,
                       lambda i: c.patch(f"{lqs}/lq-{i}", content=_lq(i, "cq2"), headers=APPLY,
                                         params=ssa))  # fmt: skip
                _timed("patch --type merge", n,
                       lambda i: c.patch(f"{lqs}/lq-{i}", json={"metadata": {"labels": {"m": "1"}}},
                                         headers={"content-type": "application/merge-patch+json"}))  # fmt: skip
                ops = [{"op": "replace", "path": "/metadata/labels/m", "value": "2"}]
                _timed("patch --type json", n,
                       lambda i: c.patch(f"{lqs}/lq-{i}", json=ops,
                                         headers={"content-type": "application/json-patch+json"}))  # fmt: skip
                _timed("create job", n, lambda i: c.post(jobs, json=_job(i)))
                env = {"spec": {"template": {"spec": {"containers": [
                    {"name": "c", "env": [{"name": "A", "value": "1"}]}]}}}}  # fmt: skip
                strategic = {"content-type": "application/strategic-merge-patch+json"}
                _timed("patch job --type strategic", n,
                       lambda i: c.patch(f"{jobs}/job-{i}", json=env, headers=strategic))  # fmt: skip
        finally:
            srv.kill()


if __name__ == "__main__":
    main()
