"""The HTTP API against a real server process, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.api.testing import ServerProcess

SEED = Path(__file__).parents[1] / "cli_client" / "seed"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


def seed_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def path_for(doc: dict[str, Any]) -> str:
    kind, ns = doc["kind"], doc["metadata"].get("namespace")
    plural = {
        "Namespace": "/api/v1/namespaces",
        "ResourceFlavor": f"{KUEUE}/resourceflavors",
        "ClusterQueue": f"{KUEUE}/clusterqueues",
        "WorkloadPriorityClass": f"{KUEUE}/workloadpriorityclasses",
        "LocalQueue": f"{KUEUE}/namespaces/{ns}/localqueues",
        "Workload": f"{KUEUE}/namespaces/{ns}/workloads",
        "Job": f"/apis/batch/v1/namespaces/{ns}/jobs",
    }
    return plural[kind]


def apply_all(c: httpx.Client, docs: list[dict[str, Any]]) -> None:
    for d in docs:
        r = c.post(path_for(d), json=d)
        assert r.status_code == 201, r.text


def workload(name: str, ns: str = "team-a", cpu: str = "1", prio: int = 100) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": "local-queue",
            "priorityClassName": "prod-priority" if prio >= 1000 else "dev-priority",
            "priority": prio,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
    }


def cond(doc: dict[str, Any], type_: str) -> str | None:
    for c in doc.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return str(c["status"])
    return None


def test_health_and_openapi(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert f"{KUEUE}/clusterqueues" in spec["paths"]
    assert "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads/{name}" in spec["paths"]
    assert "/apis/ray.io/v1/namespaces/{namespace}/rayclusters" in spec["paths"]


def test_admin_token_file_is_private(server: ServerProcess) -> None:
    assert (server.data_dir / "admin-token").stat().st_mode & 0o777 == 0o600


def test_crud_verbs(server: ServerProcess) -> None:
    with server.client() as c:
        apply_all(c, seed_docs("setup.yaml"))
        rf = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
              "metadata": {"name": "extra"}}  # fmt: skip
        assert c.post(f"{KUEUE}/resourceflavors", json=rf).status_code == 201
        assert c.post(f"{KUEUE}/resourceflavors", json=rf).status_code == 409
        got = c.get(f"{KUEUE}/resourceflavors/extra").json()
        assert got["metadata"]["uid"] and got["metadata"]["resourceVersion"]
        listing = c.get(f"{KUEUE}/resourceflavors").json()
        assert listing["kind"] == "ResourceFlavorList"
        assert [i["metadata"]["name"] for i in listing["items"]] == [
            "default-flavor", "extra", "gpu-flavor"]  # fmt: skip
        got["spec"] = {"nodeLabels": {"a": "b"}}
        r = c.put(f"{KUEUE}/resourceflavors/extra", json=got)
        assert r.status_code == 200 and r.json()["spec"]["nodeLabels"] == {"a": "b"}
        stale = c.put(f"{KUEUE}/resourceflavors/extra", json=got)
        assert stale.status_code == 409  # the resourceVersion moved on
        r = c.patch(
            f"{KUEUE}/resourceflavors/extra",
            content=json.dumps({"spec": {"nodeLabels": {"c": "d"}}}),
            headers={"content-type": "application/merge-patch+json"},
        )
        assert r.json()["spec"]["nodeLabels"] == {"a": "b", "c": "d"}
        assert c.delete(f"{KUEUE}/resourceflavors/extra").status_code == 200
        assert c.get(f"{KUEUE}/resourceflavors/extra").status_code == 404
        assert c.delete(f"{KUEUE}/resourceflavors/extra").status_code == 404
        # v1beta2 paths serve the same objects
        v2 = c.get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a-cq").json()
        assert v2["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_seed_preemption_shows_in_status_and_events(server: ServerProcess) -> None:
    with server.client() as c:
        apply_all(c, seed_docs("setup.yaml") + seed_docs("team-b-job.yaml"))
        b = c.get(f"{KUEUE}/namespaces/team-b/workloads/team-b-job").json()
        assert cond(b, "Admitted") == "True"
        assert b["status"]["admission"]["clusterQueue"] == "team-b-cq"
        psa = b["status"]["admission"]["podSetAssignments"][0]
        assert psa["flavors"] == {"cpu": "default-flavor"}
        assert psa["resourceUsage"] == {"cpu": "5"}
        apply_all(c, seed_docs("team-a-job.yaml"))
        b = c.get(f"{KUEUE}/namespaces/team-b/workloads/team-b-job").json()
        a = c.get(f"{KUEUE}/namespaces/team-a/workloads/team-a-job").json()
        assert cond(a, "Admitted") == "True" and cond(b, "Admitted") == "False"
        assert cond(b, "Preempted") == "True" and cond(b, "Evicted") == "True"
        events = c.get(
            "/api/v1/namespaces/team-b/events",
            params={"fieldSelector": "involvedObject.kind=Workload,involvedObject.name=team-b-job"},
        ).json()["items"]
        uid = a["metadata"]["uid"]  # Kueue names the preemptor by UID, never by name
        assert any(e["reason"] == "Preempted" and f"UID: {uid}," in e["message"] for e in events)
        assert not any("team-a-job" in e["message"] for e in events)
        all_wl = c.get(f"{KUEUE}/workloads").json()["items"]
        assert {w["metadata"]["name"] for w in all_wl} == {"team-a-job", "team-b-job"}
        summary = {
            i["name"]: i
            for i in c.get("/apis/gpuaas.dev/v1alpha1/clusterqueuestatus").json()["items"]
        }
        assert summary["team-a-cq"]["admittedWorkloads"] == 1
        assert summary["team-b-cq"]["pendingWorkloads"] == 1
        cq = c.get(f"{KUEUE}/clusterqueues/team-b-cq").json()
        assert cq["status"]["pendingWorkloads"] == 1
        # a job's Workload deleted alone is made anew for the job (Kueue's job reconciler);
        # deleted with its job, it is gone
        assert c.delete(f"{KUEUE}/namespaces/team-a/workloads/team-a-job").status_code == 200
        again = c.get(f"{KUEUE}/namespaces/team-a/workloads/team-a-job").json()
        assert again["metadata"]["uid"] != uid
        assert c.delete("/apis/batch/v1/namespaces/team-a/jobs/team-a-job").status_code == 200
        assert c.get(f"{KUEUE}/namespaces/team-a/workloads/team-a-job").status_code == 404
        # Readmitted once the quota came back: Kueue requeues released workloads after its 1 s
        # batch (requeueBatchPeriod), so this takes up to about a second and a tick.
        deadline = time.monotonic() + 10
        b = c.get(f"{KUEUE}/namespaces/team-b/workloads/team-b-job").json()
        while cond(b, "Admitted") != "True" and time.monotonic() < deadline:
            time.sleep(0.1)
            b = c.get(f"{KUEUE}/namespaces/team-b/workloads/team-b-job").json()
        assert cond(b, "Admitted") == "True"


BAD_INPUT = [
    ("malformed json", b'{"kind": ', "application/json", 400),
    ("malformed yaml", b"a: [1, 2", "application/yaml", 400),
    ("not an object", b"[1, 2]", "application/json", 422),
    ("binary", b"\xff\xfe\x00", "application/json", 400),
    ("empty", b"", "application/json", 400),
    ("yaml alias", b"a: &x [1]\nb: *x\n", "application/yaml", 400),
    ("deep json", b"[" * 100000 + b"]" * 100000, "application/json", 400),
]


@pytest.mark.parametrize(
    ("case", "body", "ctype", "code"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT]
)
def test_malformed_bodies_never_500(
    server: ServerProcess, case: str, body: bytes, ctype: str, code: int
) -> None:
    with server.client() as c:
        r = c.post(f"{KUEUE}/resourceflavors", content=body, headers={"content-type": ctype})
        assert r.status_code == code, r.text
        assert r.json()["kind"] == "Status"


def test_invalid_objects_name_the_field(server: ServerProcess) -> None:
    with server.client() as c:
        apply_all(c, seed_docs("setup.yaml"))
        bad = workload("w1")
        bad["spec"]["podSets"][0]["count"] = -1
        r = c.post(f"{KUEUE}/namespaces/team-a/workloads", json=bad)
        assert r.status_code == 422
        # kube-apiserver's form, which kubectl prints as 'The Workload "w1" is invalid: ...'
        assert r.json()["message"].startswith('Workload.kueue.x-k8s.io "w1" is invalid: spec.')
        assert "count" in r.json()["message"] and r.json()["details"]["kind"] == "Workload"
        other = workload("w2", ns="team-b")
        r = c.post(f"{KUEUE}/namespaces/team-a/workloads", json=other)
        assert r.status_code == 422 and "metadata.namespace" in r.json()["message"]
        r = c.put(f"{KUEUE}/clusterqueues/team-a-cq", json={"metadata": {"name": "other"}})
        assert r.status_code == 422 and "metadata.name" in r.json()["message"]
        cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
              "metadata": {"name": "q"}, "spec": {"resourceGroups": "nope"}}  # fmt: skip
        r = c.post(f"{KUEUE}/clusterqueues", json=cq)
        assert r.status_code == 422 and "resourceGroups" in r.json()["message"]
        r = c.post(f"{KUEUE}/namespaces/nowhere/workloads", json=workload("w", ns="nowhere"))
        assert r.status_code == 404
        yaml_body = yaml.safe_dump(workload("w3"))
        r = c.post(
            f"{KUEUE}/namespaces/team-a/workloads",
            content=yaml_body,
            headers={"content-type": "application/yaml"},
        )
        assert r.status_code == 201
        # nothing above left a trace
        names = [w["metadata"]["name"] for w in c.get(f"{KUEUE}/workloads").json()["items"]]
        assert names == ["w3"]


def test_oversized_body_and_unknown_token(server: ServerProcess) -> None:
    with server.client() as c:
        r = c.post(f"{KUEUE}/resourceflavors", content=b"{" + b" " * (5 * 1024 * 1024) + b"}")
        assert r.status_code == 413

        def chunks() -> Any:
            for _ in range(80):
                yield b" " * 65536

        r = c.post(f"{KUEUE}/resourceflavors", content=chunks())  # no Content-Length
        assert r.status_code == 413
    with server.client("not-a-token") as c:
        assert c.get(f"{KUEUE}/clusterqueues").status_code == 401
    assert httpx.get(f"{server.url}{KUEUE}/clusterqueues").status_code == 401


def test_watch_streams_changes_from_a_resource_version(server: ServerProcess) -> None:
    with server.client() as c:
        apply_all(c, seed_docs("setup.yaml"))
        rv = c.get(f"{KUEUE}/workloads").json()["metadata"]["resourceVersion"]
        seen: list[tuple[str, str, str | None]] = []
        raw: list[str] = []
        done = threading.Event()

        def watch() -> None:
            with server.client() as w, w.stream(
                "GET", f"{KUEUE}/workloads",
                params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "20"},
            ) as resp:  # fmt: skip
                for line in resp.iter_lines():
                    raw.append(line)
                    ev = json.loads(line)
                    obj = ev["object"]
                    seen.append((ev["type"], obj["metadata"]["name"], cond(obj, "Admitted")))
                    if ev["type"] == "DELETED":
                        done.set()
                        return

        t = threading.Thread(target=watch)
        t.start()
        apply_all(c, [workload("w1", cpu="3")])
        c.delete(f"{KUEUE}/namespaces/team-a/workloads/w1")
        assert done.wait(30)
        t.join(30)
    assert seen[0][:2] == ("ADDED", "w1")
    assert ("MODIFIED", "w1", "True") in seen
    assert seen[-1][:2] == ("DELETED", "w1")
    # replay: the same changes again, from the change log
    with server.client() as c, c.stream(
        "GET", f"{KUEUE}/namespaces/team-a/workloads",
        params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "2"},
    ) as resp:  # fmt: skip
        lines = list(resp.iter_lines())
        replay = [json.loads(x)["type"] for x in lines]
    assert replay == [s[0] for s in seen]
    # compact JSON, one event a line, as kube-apiserver writes them
    assert all(x.startswith('{"type":"') and ": " not in x[:20] for x in raw + lines)


def test_restart_keeps_admissions_order_and_events(
    servers: Any, db_url: str | None, tmp_path: Path
) -> None:
    srv = servers(db_url)
    with srv.client() as c:
        apply_all(c, seed_docs("setup.yaml"))
        # shared-cq lends 10 cpu to the cohort: two 4-cpu workloads fit, the rest wait
        for i in range(5):
            apply_all(c, [workload(f"w{i}", cpu="4")])
        before = {w["metadata"]["name"]: w for w in c.get(f"{KUEUE}/workloads").json()["items"]}
        n_events = len(c.get("/api/v1/events").json()["items"])
    admitted = {n for n, w in before.items() if cond(w, "Admitted") == "True"}
    assert admitted == {"w0", "w1"}
    srv.kill()
    srv2 = servers(db_url, data_dir=srv.data_dir)
    with srv2.client() as c:
        after = {w["metadata"]["name"]: w for w in c.get(f"{KUEUE}/workloads").json()["items"]}
        assert {n for n, w in after.items() if cond(w, "Admitted") == "True"} == admitted
        for n in admitted:
            assert after[n]["status"]["admission"] == before[n]["status"]["admission"]
        assert len(c.get("/api/v1/events").json()["items"]) >= n_events
        # pending order survives: finishing room for one admits w2, not a later one
        c.delete(f"{KUEUE}/namespaces/team-a/workloads/w0")
        deadline = time.monotonic() + 10  # after Kueue's 1 s requeue batch
        while True:
            now = {w["metadata"]["name"]: w for w in c.get(f"{KUEUE}/workloads").json()["items"]}
            admitted_now = {n for n, w in now.items() if cond(w, "Admitted") == "True"}
            if admitted_now != {"w1"} or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert admitted_now == {"w1", "w2"}
