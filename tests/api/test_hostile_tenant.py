"""A hostile tenant cannot hurt anyone else through the API (issue 17, items 1, 2, 5, 6, 7, 10).

The real server wiring (``gpuaas.server.build``, admission only) is served by uvicorn on a thread.
Every hostile body is refused with a 4xx Status naming the field, the stored state is exactly what
it was (lists still answer 200, every watcher would still read JSON), a batch of other tenants'
writes committed together with hostile ones all succeed, and tokens can be listed and revoked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from served import serve
from typer.testing import CliRunner

from gpuaas.cli.main import build_app
from gpuaas.server import Server, ServerOptions, build

SEED = Path(__file__).parents[1] / "cli_client" / "seed"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
WORKLOADS = f"{KUEUE}/namespaces/team-a/workloads"
TOKENS = "/apis/gpuaas.dev/v1alpha1/tokens"


def workload(name: str, **requests: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "queueName": "local-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}
                            ]
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = build(ServerOptions(tmp_path / "data", runtime="none"), say=lambda _: None)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    client, web = serve(server)
    try:
        for doc in yaml.safe_load_all((SEED / "setup.yaml").read_text()):
            if doc:
                r = client.post(_collection(doc), json=doc)
                assert r.status_code == 201, r.text
        yield client
    finally:
        client.close()
        web.should_exit = True


def _collection(doc: dict[str, Any]) -> str:
    plural = {
        "Namespace": "/api/v1/namespaces",
        "ResourceFlavor": f"{KUEUE}/resourceflavors",
        "ClusterQueue": f"{KUEUE}/clusterqueues",
        "WorkloadPriorityClass": f"{KUEUE}/workloadpriorityclasses",
        "LocalQueue": f"{KUEUE}/namespaces/{doc['metadata'].get('namespace')}/localqueues",
    }
    return plural[doc["kind"]]


def _yaml_text(doc: dict[str, Any], replace: tuple[str, str]) -> bytes:
    return yaml.safe_dump(doc).replace(*replace).encode()


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def _with_meta(name: str, **meta: Any) -> dict[str, Any]:
    doc = workload(name)
    doc["metadata"].update(meta)
    return doc


DEEP = workload("deep")
DEEP["spec"]["podSets"][0]["template"]["metadata"] = {"x": json.loads("[" * 700 + "]" * 700)}
JSON, YAML = "application/json", "application/yaml"
INT_KEY = ("count: 1", "count: 1\n  1: x")
HOSTILE = [
    ("json NaN", _json(workload("nan", cpu=float("nan"))), JSON),
    ("json Infinity", _json({**workload("inf"), "x": float("inf")}), JSON),
    ("json 1e400", _json(workload("e400")).replace(b'"1"', b"1e400"), JSON),
    ("yaml .nan", _yaml_text(workload("ynan"), ("'1'", ".nan")), YAML),
    ("yaml int key", _yaml_text(workload("ykey"), INT_KEY), YAML),
    ("700 levels", _json(DEEP), JSON),
    ("arabic digit", _json(workload("digit", cpu="\u0663")), JSON),
    ("half a GPU", _json(workload("half", **{"nvidia.com/gpu": "0.5"})), JSON),
    ("label key", _json(_with_meta("lbl", labels={"bad key!": "x"})), JSON),
    ("3.9 MB annotation", _json(_with_meta("big", annotations={"a": "x" * (3900 * 1024)})), JSON),
]


def test_hostile_bodies_are_refused_and_change_nothing(http: httpx.Client) -> None:
    assert http.post(WORKLOADS, json=workload("good")).status_code == 201
    before = http.get(WORKLOADS).json()["items"]
    for case, body, ctype in HOSTILE:
        r = http.post(WORKLOADS, content=body, headers={"content-type": ctype})
        assert 400 <= r.status_code < 500, (case, r.status_code, r.text)
        assert r.json()["kind"] == "Status", case
        r = http.put(f"{WORKLOADS}/good", content=body, headers={"content-type": ctype})
        assert 400 <= r.status_code < 500, (case, r.status_code, r.text)
    r = http.patch(
        f"{WORKLOADS}/good",
        content=b'{"metadata": {"annotations": {"x": NaN}}}',
        headers={"content-type": "application/merge-patch+json"},
    )
    assert r.status_code == 400, r.text
    after = http.get(WORKLOADS)
    assert after.status_code == 200
    assert [w["metadata"] for w in after.json()["items"]] == [w["metadata"] for w in before]


def test_hostile_writes_do_not_fail_other_tenants_writes(http: httpx.Client) -> None:
    bad = _yaml_text(workload("bad"), INT_KEY)

    def hostile(_: int) -> int:
        return http.post(
            WORKLOADS, content=bad, headers={"content-type": "application/yaml"}
        ).status_code

    def good(i: int) -> int:
        return http.post(WORKLOADS, json=workload(f"w{i}")).status_code

    with ThreadPoolExecutor(16) as pool:
        bad_codes = pool.map(hostile, range(40))
        good_codes = list(pool.map(good, range(120)))
    assert set(bad_codes) == {400}
    assert good_codes == [201] * 120
    assert len(http.get(WORKLOADS).json()["items"]) == 120


@pytest.mark.parametrize("namespaces", [["../b"], [""], ["Team-A"], ["a/b"], ["x" * 64], []])
def test_tokens_only_for_namespace_names(http: httpx.Client, namespaces: list[str]) -> None:
    r = http.post(TOKENS, json={"namespaces": namespaces})
    assert r.status_code == 422, r.text
    assert all(t["admin"] for t in http.get(TOKENS).json()["items"])


def test_tokens_are_listed_and_revoked_at_once(server: Server, http: httpx.Client) -> None:
    made = http.post(TOKENS, json={"namespaces": ["team-a"], "name": "ci"}).json()
    listed = http.get(TOKENS).json()["items"]
    assert [(t["name"], t["namespaces"]) for t in listed] == [("admin", []), ("ci", ["team-a"])]
    assert all("token" not in t and len(t["id"]) == 12 for t in listed)
    tenant, web = serve(server, made["token"])
    try:
        assert tenant.get(WORKLOADS).status_code == 200  # now cached
        assert tenant.get(TOKENS).status_code == 403
        assert http.delete(f"{TOKENS}/{made['id']}").json()["name"] == "ci"
        assert tenant.get(WORKLOADS).status_code == 401
        assert http.delete(f"{TOKENS}/{made['id']}").status_code == 404
    finally:
        tenant.close()
        web.should_exit = True
    assert [t["name"] for t in http.get(TOKENS).json()["items"]] == ["admin"]


@pytest.mark.parametrize(
    "rv", ["99999999999999999999999", "-1", "\u0663", "1e3", "9223372036854775808"]
)
def test_watch_resource_version_out_of_range_is_a_400(http: httpx.Client, rv: str) -> None:
    r = http.get(WORKLOADS, params={"watch": "true", "resourceVersion": rv})
    assert r.status_code == 400, r.text
    assert "resourceVersion" in r.json()["message"]


def test_watch_ahead_of_the_server_is_told_so(http: httpx.Client) -> None:
    rv = int(http.get(WORKLOADS).json()["metadata"]["resourceVersion"])
    with http.stream(
        "GET", WORKLOADS, params={"watch": "true", "resourceVersion": str(rv + 1000)}
    ) as r:
        events = [json.loads(line) for line in r.iter_lines() if line]
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 504
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_an_empty_token_is_a_clear_cli_error(tmp_path: Path) -> None:
    env = {
        "GPUAAS_SERVER": "http://127.0.0.1:9",
        "GPUAAS_TOKEN": "",
        "GPUAAS_CONFIG": str(tmp_path / "c"),
    }
    result = CliRunner().invoke(build_app(), ["get", "cq"], env=env)
    assert result.exit_code == 1
    assert "GPUAAS_TOKEN" in result.output and "Illegal header" not in result.output


def test_preemption_names_the_preemptor_by_uid_only(http: httpx.Client) -> None:
    jobs = {}
    for name in ("team-b-job", "team-a-job"):
        doc = yaml.safe_load((SEED / f"{name}.yaml").read_text())
        ns = doc["metadata"]["namespace"]
        r = http.post(f"/apis/batch/v1/namespaces/{ns}/jobs", json=doc)
        assert r.status_code == 201, r.text
        jobs[name] = r.json()["metadata"]["uid"]
    pre = http.get(f"{KUEUE}/namespaces/team-a/workloads/team-a-job").json()
    for _ in range(200):
        victim = http.get(f"{KUEUE}/namespaces/team-b/workloads/team-b-job").json()
        conds = {c["type"]: c for c in victim.get("status", {}).get("conditions", [])}
        if "Evicted" in conds:
            break
        time.sleep(0.05)
    message = conds["Evicted"]["message"]
    assert f"(UID: {pre['metadata']['uid']}, JobUID: {jobs['team-a-job']})" in message
    assert "team-a-job" not in message
    events = http.get("/api/v1/namespaces/team-a/events").json()["items"]
    assert events and not any("team-b-job" in e["message"] for e in events)
    # the dashboard's overview counts the evicted (pending again) workload as its queues do
    summary = http.get("/apis/gpuaas.dev/v1alpha1/dashboard/summary").json()
    queued = sum(q["pendingWorkloads"] for q in summary["clusterQueues"])
    assert summary["totals"]["pending"] == queued >= 1


def test_apply_of_an_example_dir_skips_its_scenario_with_a_note(
    http: httpx.Client, tmp_path: Path
) -> None:
    example = Path(__file__).parents[2] / "examples" / "004-jobs"
    env = {
        "GPUAAS_SERVER": str(http.base_url).rstrip("/"),
        "GPUAAS_TOKEN": http.headers["Authorization"].removeprefix("Bearer "),
        "GPUAAS_CONFIG": str(tmp_path / "cfg.json"),
    }
    result = CliRunner().invoke(build_app(), ["apply", "-f", str(example)], env=env)
    assert result.exit_code == 0, result.output
    assert "scenario.yaml: a Scenario, skipped" in result.output
    assert "job.batch/team-a-job created" in result.output


def test_a_new_namesake_does_not_inherit_a_deleted_workloads_events(http: httpx.Client) -> None:
    selector = {"fieldSelector": "involvedObject.kind=Workload,involvedObject.name=again"}
    for _ in range(2):
        assert http.post(WORKLOADS, json=workload("again")).status_code == 201
        events = http.get("/api/v1/namespaces/team-a/events", params=selector).json()["items"]
        assert [e["reason"] for e in events].count("QuotaReserved") == 1, events
        assert http.delete(f"{WORKLOADS}/again").status_code == 200
