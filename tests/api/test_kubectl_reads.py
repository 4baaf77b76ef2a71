"""The real ``kubectl`` reading what issue 12 left: ``get wl``, pods (local runtime, fake GPUs),
``logs``, nodes, ``auth can-i``/``whoami``, watching events, and continue pages consistent at
their first page's resourceVersion; on SQLite and PostgreSQL.

The server runs over TLS (kubectl sends tokens only over TLS); the pod tests start it with the
local runtime and ``--fake-gpus``, and their pods are short shell commands.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubectl_harness import KUBECTL, Kube, apply_file, rows, start_kube, wait_for
from test_kubectl import REPO, SETUP
from test_kubectl import kube as kube  # the fixture: a TLS server (no runtime) and kubectl

from gpuaas.api.testing import ServerProcess


@pytest.fixture
def kube_pods(
    tmp_path: Path,
    db_url: str | None,
    servers: Callable[..., ServerProcess],
    require_service: Callable[[str, bool, str], None],
) -> Iterator[Kube]:
    """kubectl against a server whose local runtime runs pods on 4 fake GPUs."""
    extra = ("--runtime", "local", "--fake-gpus", "4")
    k = start_kube(tmp_path, db_url, servers, require_service, extra)
    yield k
    k.srv.stop()  # the server stops its pods (each within its grace) before it exits


def job(name: str, namespace: str, command: str, *, cpu: str = "1", grace: int = 30) -> dict:
    """A Job of one pod running ``sh -c command`` in ``namespace``'s local-queue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "local-queue"},
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", command],
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": grace,
                },
            }
        },
    }


def create_job(k: Kube, doc: dict) -> None:
    with k.srv.client() as c:
        ns = doc["metadata"]["namespace"]
        r = c.post(f"/apis/batch/v1/namespaces/{ns}/jobs", json=doc)
        assert r.status_code == 201, r.text


def pod_row(k: Kube, namespace: str, name: str, *args: str) -> list[str] | None:
    out = k.run("get", "pods", "-n", namespace, *args, check=False).stdout
    return next((r for r in rows(out)[1:] if r and r[0] == name), None)


def tenant(k: Kube, namespace: str) -> Kube:
    with k.srv.client() as c:
        token = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": [namespace]})
    return k.config_for(token.json()["token"], namespace, namespace=namespace)


def test_wl_resolves_as_every_name_of_workload(kube: Kube) -> None:
    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    expected = rows(kube.get("kwl", "-A"))
    assert expected[1][:2] == ["team-b", "team-b-job"]
    for name in ("wl", "workloads", "workload", "workload.kueue.x-k8s.io",
                 "workloads.kueue.x-k8s.io", "workloads.v1beta2.kueue.x-k8s.io"):  # fmt: skip
        assert [r[:-1] for r in rows(kube.get(name, "-A"))] == [r[:-1] for r in expected], name
    listed = rows(kube.run("api-resources", "--api-group=kueue.x-k8s.io").stdout)
    assert ["workloads", "kwl,kueueworkload,kueueworkloads,wl"] in [r[:2] for r in listed]


def test_pods_nodes_and_logs(kube_pods: Kube) -> None:
    k = kube_pods
    apply_file(k, SETUP)
    command = "echo hello from the pod; trap 'echo got TERM' TERM; while true; do sleep 0.1; done"
    create_job(k, job("dev", "team-b", command, cpu="5", grace=6))
    row = wait_for(lambda: pod_row(k, "team-b", "dev-0", "-o", "wide"), "pod dev-0")
    head = rows(k.get("pods", "-n", "team-b", "-o", "wide"))[0]
    assert head == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED",
                    "NODE", "READINESS", "GATES"]  # fmt: skip
    assert rows(k.get("pods", "-n", "team-b"))[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert isinstance(row, list)
    wait_for(lambda: (pod_row(k, "team-b", "dev-0") or [""] * 3)[2] == "Running", "Running")
    pod = json.loads(k.get("pod", "dev-0", "-n", "team-b", "-o", "json"))
    node = pod["spec"]["nodeName"]
    assert pod["status"]["phase"] == "Running" and node
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "dev", True)
    with k.srv.client() as c:
        uid = c.get("/apis/batch/v1/namespaces/team-b/jobs/dev").json()["metadata"]["uid"]
    assert owner["uid"] == uid
    assert pod["metadata"]["labels"]["app"] == "dev"  # from the pod template
    assert pod["metadata"]["labels"]["job-name"] == "dev"
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    wide = pod_row(k, "team-b", "dev-0", "-o", "wide")
    assert wide is not None and wide[1] == "1/1" and wide[3] == str(restarts)
    assert wide[6] == node
    assert k.get("pods", "-n", "team-b", "-l", "app=dev", "-o", "name").split() == ["pod/dev-0"]
    assert not k.get("pods", "-n", "team-b", "--field-selector", "status.phase=Pending").strip()
    assert "hello from the pod" in k.run("logs", "dev-0", "-n", "team-b").stdout

    # Nodes: kube-apiserver's columns, Ready, capacity from the node's fake GPUs.
    nodes = rows(k.get("nodes", "-o", "wide"))
    assert nodes[0][:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1][0] == node and nodes[1][1] == "Ready"
    n = json.loads(k.get("node", node, "-o", "json"))
    assert n["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert {"cpu", "memory", "nvidia.com/gpu"} <= set(n["status"]["allocatable"])

    # A preemption: the prod job reclaims the cohort's quota; the dev pod is Terminating for its
    # grace period (its shell ignores SIGTERM), then gone.
    env = {**os.environ, "KUBECONFIG": str(k.kubeconfig), "HOME": str(k.home)}
    with subprocess.Popen(
        [KUBECTL, "get", "pods", "-A", "-w", "--output-watch-events", "--request-timeout=60s"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as watch:
        assert watch.stdout is not None
        try:
            assert "dev-0" in watch.stdout.readline() + watch.stdout.readline()
            prod = job("prod", "team-a", "sleep 30", cpu="7")
            prod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "prod-priority"
            create_job(k, prod)
            wait_for(
                lambda: (pod_row(k, "team-b", "dev-0") or [""] * 3)[2] == "Terminating",
                "dev-0 Terminating",
            )
            terminating = json.loads(k.get("pod", "dev-0", "-n", "team-b", "-o", "json"))
            assert terminating["metadata"]["deletionTimestamp"]
            seen = ""
            while "Terminating" not in seen:
                seen = watch.stdout.readline()
                assert seen, "watch ended"
            assert seen.split()[:3] == ["MODIFIED", "team-b", "dev-0"]
        finally:
            watch.kill()

    # Writes to pods and nodes are refused as Kubernetes refuses a method a resource lacks.
    refused = k.run("delete", "pod", "dev-0", "-n", "team-b", "--wait=false", check=False)
    assert refused.returncode == 1 and "MethodNotAllowed" in refused.stderr
    with k.srv.client() as c:
        r = c.post("/api/v1/namespaces/team-b/pods", json={"metadata": {"name": "x"}})
        assert (r.status_code, r.json()["reason"]) == (405, "MethodNotAllowed")

    # Tenancy: a tenant lists its own namespace's pods only and may not read nodes.
    team_a = tenant(k, "team-a")
    wait_for(lambda: pod_row(k, "team-a", "prod-0"), "prod-0")
    assert {r[0] for r in rows(team_a.get("pods", "-A"))[1:]} == {"team-a"}
    denied = team_a.run("get", "nodes", check=False)
    assert denied.returncode == 1 and "Forbidden" in denied.stderr
    denied = team_a.run("logs", "dev-0", "-n", "team-b", check=False)
    assert denied.returncode == 1 and "Forbidden" in denied.stderr


def test_logs_follow_ends_with_the_pod(kube_pods: Kube) -> None:
    k = kube_pods
    apply_file(k, SETUP)
    create_job(k, job("short", "team-a", "echo one; sleep 2; echo two", cpu="1"))
    wait_for(lambda: pod_row(k, "team-a", "short-0"), "pod short-0")
    out = k.run("logs", "-f", "short-0", "-n", "team-a").stdout
    assert out.split() == ["one", "two"]


def test_python_client_reads_pods_and_nodes(kube_pods: Kube) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    k = kube_pods
    apply_file(k, SETUP)
    create_job(k, job("py", "team-a", "sleep 20"))
    wait_for(lambda: pod_row(k, "team-a", "py-0"), "pod py-0")
    client = kubernetes.config.new_client_from_config(str(k.kubeconfig))
    try:
        core = kubernetes.client.CoreV1Api(client)
        pods = core.list_namespaced_pod("team-a", label_selector="job-name=py")
        assert [p.metadata.name for p in pods.items] == ["py-0"]
        assert pods.items[0].metadata.owner_references[0].kind == "Job"
        nodes = core.list_node().items
        assert nodes and nodes[0].status.conditions[0].type == "Ready"
        stream = kubernetes.watch.Watch().stream(
            core.list_namespaced_pod,
            "team-a",
            resource_version=pods.metadata.resource_version,
            timeout_seconds=30,
        )
        core_client = kubernetes.client.BatchV1Api(client)
        core_client.delete_namespaced_job("py", "team-a")
        for event in stream:
            if event["type"] == "DELETED":
                assert event["object"].metadata.name == "py-0"
                break
    finally:
        client.close()


# (verb, resource, namespace, extra args) -> the kubectl command that does it, for the tenant
# team-a: can-i must say yes exactly where the request goes through.
CAN_I = [
    ("list", "workloads", "team-a", True),
    ("list", "workloads", "team-b", False),
    ("get", "clusterqueues", "", True),
    ("create", "clusterqueues", "", False),
    ("get", "nodes", "", False),
    ("list", "pods", "team-a", True),
    ("list", "pods", "team-b", False),
    ("create", "pods", "team-a", False),
    ("list", "events", "team-a", True),
    ("list", "events", "team-b", False),
    ("create", "localqueues", "team-a", True),
    ("delete", "localqueues", "team-b", False),
]


def test_auth_can_i_matches_what_the_server_lets_through(kube: Kube) -> None:
    apply_file(kube, SETUP)
    team_a = tenant(kube, "team-a")
    for verb, resource, namespace, expected in CAN_I:
        args = ["auth", "can-i", verb, resource] + (["-n", namespace] if namespace else [])
        answer = team_a.run(*args, check=False)
        assert answer.stdout.startswith("yes" if expected else "no"), (args, answer.stdout)
        assert answer.returncode == (0 if expected else 1)
        if verb in ("list", "get"):  # do it, and see the same answer
            done = team_a.run("get", resource, *(["-n", namespace] if namespace else []),
                              check=False)  # fmt: skip
            assert (done.returncode == 0) == expected, (args, done.stderr)
    status = team_a.run("auth", "can-i", "update", "workloads", "--subresource=status", check=False)
    assert status.stdout.startswith("no")
    assert kube.run(
        "auth", "can-i", "update", "workloads", "--subresource=status"
    ).stdout.startswith("yes")
    for verb, resource in (("create", "clusterqueues"), ("get", "nodes"), ("delete", "jobs")):
        assert kube.run("auth", "can-i", verb, resource, "-A").stdout.startswith("yes")
    listed = team_a.run("auth", "can-i", "--list").stdout
    assert "workloads.kueue.x-k8s.io" in listed and "nodes" not in listed.split()
    admin_rules = kube.run("auth", "can-i", "--list").stdout
    assert rows(admin_rules)[1] == ["*.*", "[]", "[]", "[*]"]
    who = rows(team_a.run("auth", "whoami").stdout)
    assert who[1] == ["Username", "team-a"]


def test_watching_events(kube: Kube) -> None:
    apply_file(kube, SETUP)
    apply_file(kube, REPO / "examples/004-jobs/team-b-job.yaml")
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "HOME": str(kube.home)}
    errors = kube.home / "watch.err"
    with (
        errors.open("w") as err,
        subprocess.Popen(
            [KUBECTL, "get", "events", "-A", "-w", "--request-timeout=60s"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as proc,
    ):
        assert proc.stdout is not None
        try:
            head = proc.stdout.readline()
            assert head.split()[:3] == ["NAMESPACE", "LAST", "SEEN"], errors.read_text()
            apply_file(kube, REPO / "examples/004-jobs/team-a-job.yaml")
            seen = ""
            while "team-a-job" not in seen or "Admitted" not in seen:
                seen = proc.stdout.readline()
                assert seen, f"watch ended: {errors.read_text()}"
            assert seen.split()[0] == "team-a"
        finally:
            proc.kill()
    with kube.srv.client() as c:
        listed = c.get("/api/v1/namespaces/team-a/events").json()
        rv = listed["metadata"]["resourceVersion"]
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1"}
        assert c.get("/api/v1/namespaces/team-a/events", params=params).text == ""
        earlier = int(rv) - 1
        params["resourceVersion"] = str(earlier)
        lines = c.get("/apis/events.k8s.io/v1/namespaces/team-a/events", params=params).text
        replay = [json.loads(x) for x in lines.splitlines()]
        assert [e["object"]["metadata"]["resourceVersion"] for e in replay] == [rv]
        assert replay[0]["object"]["apiVersion"] == "events.k8s.io/v1"


def test_continue_pages_hold_the_first_pages_version(kube: Kube) -> None:
    url = "/api/v1/namespaces"
    with kube.srv.client() as c:
        for name in ("p-a", "p-c", "p-e", "p-g"):
            doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            assert c.post(url, json=doc).status_code == 201
        first = c.get(url, params={"limit": 3, "labelSelector": ""}).json()
        everything = [
            d["metadata"]["name"] for d in c.get(url).json()["items"]
        ]  # the list as of the first page
        # Changes after the first page: one object created among later ones, one deleted.
        doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p-d"}}
        assert c.post(url, json=doc).status_code == 201
        assert c.delete(f"{url}/p-g").status_code == 200
        names = [d["metadata"]["name"] for d in first["items"]]
        token = first["metadata"]["continue"]
        while token:
            page = c.get(url, params={"limit": 3, "continue": token}).json()
            assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
            names += [d["metadata"]["name"] for d in page["items"]]
            token = page["metadata"].get("continue")
        assert names == everything
        # A token whose list the server no longer keeps: 410 Expired, as a compacted revision.
        state = json.loads(base64.urlsafe_b64decode(first["metadata"]["continue"].encode()))
        forged = {**state, "list": "0000000000000000"}
        token = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode()
        r = c.get(url, params={"limit": 3, "continue": token})
        assert (r.status_code, r.json()["reason"]) == (410, "Expired")
        assert "too old to display a consistent list result" in r.json()["message"]
    assert rows(kube.get("ns", "--chunk-size=2", "-o", "name"))[-1] == ["namespace/p-e"]


def test_kubectl_sees_the_job_pods_yaml_unchanged(kube_pods: Kube) -> None:
    """``kubectl get pods -o yaml`` is a List of Pods a client can read back."""
    k = kube_pods
    apply_file(k, SETUP)
    create_job(k, job("yamlpod", "team-a", "sleep 20"))
    wait_for(lambda: pod_row(k, "team-a", "yamlpod-0"), "pod yamlpod-0")
    listed = yaml.safe_load(k.get("pods", "-n", "team-a", "-o", "yaml"))
    assert [i["kind"] for i in listed["items"]] == ["Pod"]
    assert listed["items"][0]["spec"]["containers"][0]["name"] == "main"
