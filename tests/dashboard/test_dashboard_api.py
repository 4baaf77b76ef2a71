"""The dashboard's HTTP side without a browser: assets, summary, tenancy, and the SSE feed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from dashboard_helpers import GPUAAS, KUEUE, apply_seed, namespace_token

from gpuaas.api.dashboard_patch import apply_patch
from gpuaas.api.testing import ServerProcess

DASH = f"{GPUAAS}/dashboard"


def by_key(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["key"]: w for w in summary["workloads"]}


def settled(c: httpx.Client) -> dict[str, Any]:
    """The summary once the runtime has stopped team-b's pods, team-a-job is admitted and the
    preemption's event is in the store. A read sees the engine's state as soon as a settle
    made it, while that settle's events are read from the store only once its batch is
    committed, a moment later (as Kubernetes Events trail the objects they tell of): so both
    are waited for."""
    deadline = time.monotonic() + 15
    while True:
        s: dict[str, Any] = c.get(f"{DASH}/summary").json()
        admitted = by_key(s).get("team-a/team-a-job", {}).get("state") == "Admitted"
        if admitted and any(e["reason"] == "Preempted" for e in s["events"]):
            return s
        assert time.monotonic() < deadline, f"not settled: {by_key(s)} {s['events']}"
        time.sleep(0.1)


def test_assets_are_served_from_the_package(plain_server: ServerProcess) -> None:
    with httpx.Client(base_url=plain_server.url) as c:
        index = c.get("/")
        assert index.status_code == 200 and "text/html" in index.headers["content-type"]
        assert '<script src="/static/app.js"' in index.text
        assert "javascript" in c.get("/static/app.js").headers["content-type"]
        assert "text/css" in c.get("/static/style.css").headers["content-type"]
        for bad in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/nope.js", "/static/"):
            r = c.get(bad)
            assert r.status_code == 404, bad
        assert "http" not in c.get("/static/style.css").text.replace("http://www.w3.org", "")


def test_summary_needs_a_token(plain_server: ServerProcess) -> None:
    with httpx.Client(base_url=plain_server.url) as c:
        assert c.get(f"{DASH}/summary").status_code == 401
        assert c.get(f"{DASH}/summary", params={"token": "nope"}).status_code == 401
        ok = c.get(f"{DASH}/summary", params={"token": plain_server.admin_token})
        assert ok.status_code == 200 and ok.json()["principal"]["admin"] is True


def test_summary_shows_the_seed_preemption(plain_server: ServerProcess) -> None:
    with plain_server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml", "team-a-job.yaml")
        s = settled(c)
    wl = by_key(s)
    b, a = wl["team-b/team-b-job"], wl["team-a/team-a-job"]
    assert a["state"] == "Admitted" and a["flavors"] == {
        "cpu": "default-flavor",
        "nvidia.com/gpu": "gpu-flavor",
    }
    assert a["priority"] == 1000 and a["priorityClass"] == "prod-priority"
    assert b["state"] == "Evicted" and b["phase"] == "Pending"
    assert b["preemptedBy"] == "team-a/team-a-job"
    assert b["preemptionReason"] == "InCohortReclaimWhileBorrowing"
    assert (b["position"], b["queueLength"]) == (1, 1)
    assert "insufficient unused quota for cpu" in b["whyPending"]
    cqs = {q["name"]: q for q in s["clusterQueues"]}
    assert cqs["team-a-cq"]["borrowing"] and cqs["team-a-cq"]["admittedWorkloads"] == 1
    assert cqs["team-b-cq"]["pendingWorkloads"] == 1
    assert cqs["team-a-cq"]["history"]["resources"]["nvidia.com/gpu"][-1] == 2
    (cohort,) = s["cohorts"]
    assert cohort["name"] == "team-ab" and cohort["members"] == [
        "shared-cq",
        "team-a-cq",
        "team-b-cq",
    ]
    cpu = next(r for r in cohort["resources"] if r["resource"] == "cpu")
    assert (cpu["usage"], cpu["capacity"]) == (7000, 10000)
    assert s["gpus"]["source"] == "quota" and "not wired" in s["gpus"]["note"]
    assert [g["workload"] for g in s["gpus"]["gpus"]] == ["team-a/team-a-job"] * 2
    flavors = {f["name"]: f for f in s["flavors"]}
    assert flavors["gpu-flavor"]["clusterQueues"] == ["team-a-cq", "team-b-cq"]
    # seed 004's flavors declare no labels or taints: this server's own node serves both
    assert [n["matches"] for f in flavors.values() for n in f["nodes"]] == [True, True]
    assert any(e["reason"] == "Preempted" for e in s["events"])
    assert s["totals"]["admitted"] == 1 and s["totals"]["evicted"] == 1


def test_namespace_token_summary_is_filtered(plain_server: ServerProcess) -> None:
    with plain_server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml", "team-a-job.yaml")
        token = namespace_token(c, "team-b")
    with httpx.Client(base_url=plain_server.url) as c:
        s = c.get(f"{DASH}/summary", params={"token": token}).json()
    assert set(by_key(s)) == {"team-b/team-b-job"}
    assert {q["namespace"] for q in s["localQueues"]} == {"team-b"}
    assert all(e["metadata"]["namespace"] in ("team-b", "") for e in s["events"])
    assert {q["name"] for q in s["clusterQueues"]} == {"shared-cq", "team-a-cq", "team-b-cq"}
    assert s["gpus"]["gpus"] == []  # team-a's GPUs are not shown to team-b
    assert s["principal"] == {"name": "team-b", "admin": False, "namespaces": ["team-b"]}


def test_stream_pushes_a_change_as_a_patch(plain_server: ServerProcess) -> None:
    """A change reaches an open stream as a patch of the summary it sent. How soon is a speed,
    measured by ``bench/dashboard_push.py``, not asserted here."""
    with plain_server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml")
    got: list[dict[str, Any]] = []
    kinds: list[str] = []
    ready = threading.Event()

    def listen() -> None:
        params = {"token": plain_server.admin_token}
        with httpx.stream(
            "GET", f"{plain_server.url}{DASH}/stream", params=params, timeout=30
        ) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("event:"):
                    kinds.append(line[6:].strip())
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    if kinds[-1] == "patch":  # what the dashboard shows after it
                        data = apply_patch(got[-1], data)
                    got.append(data)
                    ready.set()
                    if any(
                        by_key(s).get("team-a/team-a-job", {}).get("state") == "Admitted"
                        for s in got
                    ):
                        return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert ready.wait(10), "no initial summary on the stream"
    assert by_key(got[0])["team-b/team-b-job"]["state"] == "Admitted"
    with plain_server.client() as c:
        apply_seed(c, "team-a-job.yaml")
    t.join(10)
    assert not t.is_alive(), "the stream never showed team-a-job admitted"
    assert by_key(got[-1])["team-b/team-b-job"]["state"] == "Evicted"
    # the whole summary once, then only what changed
    assert kinds[0] == "summary" and set(kinds[1:]) == {"patch"}


NODE_CONFIG = """\
name: dash-node
labels: {gpuaas.dev/pool: training}
taints: [{key: dedicated, value: ml, effect: NoSchedule}]
"""
ML_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
# flavor -> (spec, matches, the reason when it does not)
FLAVOR_CASES: dict[str, tuple[dict[str, Any], bool, str | None]] = {
    "training": (
        {"nodeLabels": {"gpuaas.dev/pool": "training"}, "tolerations": [ML_TOLERATION]},
        True,
        None,
    ),
    "inference": (
        {"nodeLabels": {"gpuaas.dev/pool": "inference"}, "tolerations": [ML_TOLERATION]},
        False,
        "flavor inference needs label gpuaas.dev/pool=inference, node has 'training'",
    ),
    "untolerating": (
        {"nodeLabels": {"gpuaas.dev/pool": "training"}},
        False,
        "untolerated taint dedicated=ml:NoSchedule on the node (untolerating)",
    ),
}


def test_flavors_list_the_matching_node_and_its_gpus(tmp_path: Path) -> None:
    """--runtime none (ServerProcess's default) still knows its node: labels, taints, GPUs."""
    config = tmp_path / "node.yaml"
    config.write_text(NODE_CONFIG)
    extra = ("--fake-gpus", "2:NVIDIA-L4", "--node-config", str(config))
    with ServerProcess(tmp_path / "data", extra=extra) as srv, srv.client() as c:
        for name, (spec, _, _) in FLAVOR_CASES.items():
            doc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                   "metadata": {"name": name}, "spec": spec}  # fmt: skip
            assert c.post(f"{KUEUE}/resourceflavors", json=doc).status_code == 201
        s = c.get(f"{DASH}/summary").json()
        # cluster-scoped: a namespace token sees the same flavors and node
        other = c.get(f"{DASH}/summary", params={"token": namespace_token(c, "team-b")}).json()
    (node,) = s["nodes"]
    assert node["name"] == "dash-node" and node["gpus"] == 2
    assert node["labels"]["gpuaas.dev/pool"] == "training"
    assert node["labels"]["nvidia.com/gpu.count"] == "2"
    flavors = {f["name"]: f for f in s["flavors"]}
    assert set(flavors) == set(FLAVOR_CASES)
    for name, (_, matches, reason) in FLAVOR_CASES.items():
        (m,) = flavors[name]["nodes"]
        assert (m["name"], m["matches"], m["reason"]) == ("dash-node", matches, reason), name
        want = [
            {"index": i, "uuid": f"GPU-fake-{i:04d}-0000-0000-000000000000", "model": "NVIDIA-L4"}
            for i in range(2)
        ]
        assert m["gpus"] == (want if matches else []), name
    assert other["principal"]["admin"] is False
    assert (other["flavors"], other["nodes"]) == (s["flavors"], s["nodes"])
