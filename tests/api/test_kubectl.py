"""The real ``kubectl`` and the ``kubernetes`` Python client against a live server (SQLite and
PostgreSQL): discovery, tables, selectors, explain, field validation, watch, describe, events,
errors and tenancy.

kubectl sends a bearer token only over TLS, so the server runs with a self-signed certificate,
and the kubeconfig comes from ``gpuaas kubeconfig``. Without ``/usr/bin/kubectl`` (Debian's
``kubernetes-client``) these tests skip, or fail under ``GPUAAS_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubectl_harness import KUBECTL, Kube, apply_file, rows, start_kube

from gpuaas.api.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "examples/004-jobs/setup.yaml"


@pytest.fixture
def kube(
    tmp_path: Path,
    db_url: str | None,
    servers: Callable[..., ServerProcess],
    require_service: Callable[[str, bool, str], None],
) -> Iterator[Kube]:
    yield start_kube(tmp_path, db_url, servers, require_service)


def test_discovery_get_and_errors(kube: Kube) -> None:
    assert "Server Version: v1.32" in kube.run("version").stdout
    versions = kube.run("api-versions").stdout.split()
    assert {"v1", "batch/v1", "kueue.x-k8s.io/v1beta2", "events.k8s.io/v1"} <= set(versions)
    resources = kube.run("api-resources", "--api-group=kueue.x-k8s.io", "-o", "wide").stdout
    assert "queue,queues,lq" in resources and "kwl,kueueworkload,kueueworkloads" in resources
    # The namespaces of a cluster with Kueue exist from the first start.
    names = [r[0] for r in rows(kube.get("ns"))[1:]]
    assert {"default", "kube-system", "kueue-system"} <= set(names)

    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    assert rows(kube.get("cq"))[0] == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
    wide = kube.get("cq", "-o", "wide")
    assert wide.splitlines()[0].split() == [
        "NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS",
    ]  # fmt: skip
    assert rows(wide)[2][:2] == ["team-a-cq", "team-ab"]
    out = kube.get("cq,lq", "-A")
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq" in out and "localqueue" in out
    assert rows(kube.get("kwl", "-A"))[0] == [
        "NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE",
    ]  # fmt: skip
    jobs = kube.get("jobs", "-A", "-o", "wide")
    assert rows(jobs)[0][:5] == ["NAMESPACE", "NAME", "STATUS", "COMPLETIONS", "DURATION"]
    doc = json.loads(kube.get("kwl", "team-b-job", "-n", "team-b", "-o", "json"))
    assert doc["kind"] == "Workload" and doc["spec"]["queueName"] == "local-queue"
    assert "kind: ClusterQueue" in kube.get("cq", "team-a-cq", "-o", "yaml")
    assert kube.get("cq", "-o", "name").split()[0] == "clusterqueue.kueue.x-k8s.io/shared-cq"
    assert kube.get("cq", "-o", "jsonpath={.items[*].metadata.name}").split() == [
        "shared-cq", "team-a-cq", "team-b-cq",
    ]  # fmt: skip
    assert "team-b-cq" not in kube.get("cq", "--field-selector", "metadata.name!=team-b-cq")
    assert rows(kube.get("cq", "--chunk-size=1", "-o", "name")) == [
        ["clusterqueue.kueue.x-k8s.io/shared-cq"],
        ["clusterqueue.kueue.x-k8s.io/team-a-cq"],
        ["clusterqueue.kueue.x-k8s.io/team-b-cq"],
    ]
    labelled = kube.get("kwl", "-A", "-l", "kueue.x-k8s.io/queue-name=local-queue", "--show-labels")
    assert "team-b-job" in labelled and "LABELS" in labelled
    assert "No resources found" in kube.run("get", "kwl", "-A", "-l", "x=y").stderr
    sorted_out = kube.get("cq", "--sort-by=.metadata.name", "-o", "custom-columns=N:.metadata.name")
    assert rows(sorted_out) == [["N"], ["shared-cq"], ["team-a-cq"], ["team-b-cq"]]
    assert kube.get("--raw", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-b-cq/status")

    missing = kube.run("get", "cq", "nope", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): clusterqueues.kueue.x-k8s.io "nope" not found' in (
        missing.stderr
    )
    bad = kube.run("get", "cq", "--field-selector", "spec.cohort=x", check=False)
    assert bad.returncode == 1 and "BadRequest" in bad.stderr


def test_explain_and_field_validation(kube: Kube) -> None:
    out = kube.run("explain", "clusterqueue.spec.preemption").stdout
    assert "reclaimWithinCohort" in out and "VERSION:    v1beta2" in out
    queue = kube.home / "lq.yaml"
    queue.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
        "metadata: {name: lq, namespace: default}\nspec: {clusterQueue: cq, bogus: 1}\n"
    )
    strict = kube.run("create", "-f", str(queue), check=False)
    assert strict.returncode == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in strict.stderr
    warned = kube.run("create", "-f", str(queue), "--validate=warn")
    assert 'unknown field "spec.bogus"' in warned.stderr
    assert "lq" in kube.get("lq", "-n", "default")
    with kube.srv.client() as c:
        for path in ("/openapi/v2", "/openapi/v3/apis/kueue.x-k8s.io/v1beta1"):
            assert "io.x-k8s.kueue.v1beta1.Workload" in c.get(path).text


def test_describe_events_and_preemption_trail(kube: Kube) -> None:
    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    apply_file(kube, REPO / "examples/004-jobs/team-a-job.yaml")
    described = kube.run("describe", "kwl", "team-b-job", "-n", "team-b").stdout
    assert "Events:" in described and "Preempted" in described
    assert "Events:" in kube.run("describe", "job", "team-a-job", "-n", "team-a").stdout
    assert "Events:" in kube.run("describe", "cq", "team-a-cq").stdout
    assert "Cluster Queue:" in kube.run("describe", "lq", "local-queue", "-n", "team-a").stdout
    events = kube.get("events", "-n", "team-b", "--sort-by=.lastTimestamp")
    assert rows(events)[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "workload/team-b-job" in events and "Preempted" in events
    assert "Admitted" in kube.get("events.v1.events.k8s.io", "-n", "team-a")
    visibility = "/apis/visibility.kueue.x-k8s.io/v1beta1"
    pending = json.loads(
        kube.get("--raw", f"{visibility}/clusterqueues/team-b-cq/pendingworkloads")
    )
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in pending["items"]] == [
        ("team-b-job", 0)
    ]
    assert "kueue_pending_workloads" in kube.get("--raw", "/metrics")


def test_watch_prints_table_rows_and_410(kube: Kube) -> None:
    apply_file(kube, SETUP)
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "HOME": str(kube.home)}
    with subprocess.Popen(
        [KUBECTL, "get", "kwl", "-A", "-w", "--request-timeout=20s"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            apply_file(kube, REPO / "examples/004-jobs/team-a-job.yaml")
            seen = ""
            while "team-a-job" not in seen:
                seen = proc.stdout.readline()
                assert seen, "watch ended"
            assert seen.split()[:3] == ["team-a", "team-a-job", "local-queue"]
        finally:
            proc.kill()
    with kube.srv.client() as c:
        url = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
        lines = [json.loads(x) for x in c.get(url, params=params).text.splitlines()]
        assert lines[-1]["type"] == "BOOKMARK" and lines[-1]["object"]["kind"] == "ClusterQueue"


def test_watch_of_jobs_sees_a_preempted_job_suspended(kube: Kube) -> None:
    """A Job's status changes reach ``kubectl get jobs -w`` as the job controller's writes do:
    team-b's Job runs, team-a's reclaims the quota, and the watch sees team-b's suspended."""
    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "HOME": str(kube.home)}
    with subprocess.Popen(
        [KUBECTL, "get", "jobs", "-A", "-w", "--output-watch-events", "-o", "json",
         "--request-timeout=20s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None

        def events() -> Iterator[tuple[str, str, dict[str, Any]]]:
            """(type, name, conditions by type), one event per line as kubectl prints them."""
            assert proc.stdout is not None
            for line in proc.stdout:
                event = json.loads(line)
                obj = event["object"]
                conds = (obj.get("status") or {}).get("conditions") or []
                yield event["type"], obj["metadata"]["name"], {c["type"]: c for c in conds}
            raise AssertionError("watch ended")

        try:
            seen = events()
            # the watch has started (its first event: team-b's Job as it is), then team-a comes
            first = next(seen)
            assert first[:2] == ("ADDED", "team-b-job")
            assert first[2]["Suspended"]["status"] == "False"
            apply_file(kube, REPO / "examples/004-jobs/team-a-job.yaml")
            for type_, name, conds in seen:
                if name == "team-b-job" and conds.get("Suspended", {}).get("status") == "True":
                    assert type_ == "MODIFIED" and conds["Suspended"]["reason"] == "JobSuspended"
                    break
        finally:
            proc.kill()


def test_watch_from_a_forgotten_version_is_410(
    tmp_path: Path, servers: Callable[..., ServerProcess]
) -> None:
    srv = servers(None, extra=("--watch-history", "2"))
    with srv.client() as c:
        for name in ("a", "b", "c", "d"):
            doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            assert c.post("/api/v1/namespaces", json=doc).status_code == 201
        r = c.get("/api/v1/namespaces", params={"watch": "true", "resourceVersion": "1"})
        event = json.loads(r.text.splitlines()[0])
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_tenant_kubeconfig_sees_only_its_namespaces(kube: Kube) -> None:
    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    apply_file(kube, REPO / "examples/004-jobs/team-a-job.yaml")
    with kube.srv.client() as c:
        token = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-a"]})
    tenant = kube.config_for(token.json()["token"], "team-a", namespace="team-a")
    assert [r[0] for r in rows(tenant.get("kwl", "-A"))[1:]] == ["team-a"]
    assert [r[0] for r in rows(tenant.get("ns"))[1:]] == ["team-a"]
    assert "team-a-job" in tenant.get("kwl")  # the context's namespace
    denied = tenant.run("get", "kwl", "-n", "team-b", check=False)
    assert denied.returncode == 1 and "Forbidden" in denied.stderr
    assert {r[0] for r in rows(tenant.get("events", "-A"))[1:]} == {"team-a"}
    assert "Events:" in tenant.run("describe", "kwl", "team-a-job").stdout
    anonymous = kube.config_for("wrong", "nobody")
    refused = anonymous.run("get", "cq", check=False)
    assert refused.returncode == 1 and "You must be logged in to the server" in refused.stderr


def test_kubernetes_python_client(kube: Kube) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    apply_file(kube, SETUP)
    client = kubernetes.config.new_client_from_config(str(kube.kubeconfig))
    try:
        assert kubernetes.client.VersionApi(client).get_code().minor == "32"
        core = kubernetes.client.CoreV1Api(client)
        assert "default" in [n.metadata.name for n in core.list_namespace().items]
        custom = kubernetes.client.CustomObjectsApi(client)
        cqs = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        assert sorted(i["metadata"]["name"] for i in cqs["items"]) == [
            "shared-cq", "team-a-cq", "team-b-cq",
        ]  # fmt: skip
        with pytest.raises(kubernetes.client.ApiException) as err:
            custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "nope")
        assert err.value.status == 404
        assert json.loads(err.value.body)["reason"] == "NotFound"
    finally:
        client.close()
    assert httpx.get(f"{kube.srv.url}/version", verify=False).json()["major"] == "1"
