"""A workload whose pods can never be created fails and frees its quota (issue 17, item 11).

It used to keep its quota with no pods (a FailedCreate warning, then nothing), as when Ray's temp
dir under a long TMPDIR is too long for its sockets. Here the pod's env has an entry without a
name, which the runtime cannot run: the workload finishes as failed, the quota goes to the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from served import serve

from gpuaas.server import Server, ServerOptions, build

SEED = Path(__file__).parents[1] / "cli_client" / "seed"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = build(
        ServerOptions(tmp_path / "data", runtime="local", fake_gpus="4", tick=0.1),
        say=lambda _: None,
    )
    srv.start_ticking()
    try:
        yield srv
    finally:
        srv.close()


def _conditions(c: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    doc = c.get(f"{KUEUE}/namespaces/{ns}/workloads/{name}").json()
    return {x["type"]: x for x in doc.get("status", {}).get("conditions", [])}


def test_pods_that_cannot_be_created_fail_the_workload(server: Server) -> None:
    c, web = serve(server)
    try:
        for doc in yaml.safe_load_all((SEED / "setup.yaml").read_text()):
            if doc:
                kind = doc["kind"]
                path = {
                    "Namespace": "/api/v1/namespaces",
                    "ResourceFlavor": f"{KUEUE}/resourceflavors",
                    "ClusterQueue": f"{KUEUE}/clusterqueues",
                    "WorkloadPriorityClass": f"{KUEUE}/workloadpriorityclasses",
                    "LocalQueue": f"{KUEUE}/namespaces/{doc['metadata'].get('namespace')}/localqueues",
                }[kind]
                assert c.post(path, json=doc).status_code == 201
        job = yaml.safe_load((SEED / "team-b-job.yaml").read_text())
        job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"value": "no name"}]
        assert c.post("/apis/batch/v1/namespaces/team-b/jobs", json=job).status_code == 201
        deadline = time.monotonic() + 20
        while "Finished" not in _conditions(c, "team-b", "team-b-job"):
            assert time.monotonic() < deadline, _conditions(c, "team-b", "team-b-job")
            time.sleep(0.05)
        finished = _conditions(c, "team-b", "team-b-job")["Finished"]
        assert finished["status"] == "True" and finished["reason"] == "Failed"
        summary = c.get("/apis/gpuaas.dev/v1alpha1/clusterqueuestatus").json()["items"]
        assert all(r["usage"] == 0 for q in summary for r in q["resources"])
        events = c.get("/api/v1/namespaces/team-b/events").json()["items"]
        assert any(e["reason"] == "FailedCreate" for e in events)
    finally:
        c.close()
        web.should_exit = True
