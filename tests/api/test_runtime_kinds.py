"""The pure parts behind kubectl's pods, nodes, pages and access reviews: pod documents and
kube-apiserver's Pod/Node printers (named cases), the runtime book's diffs and resourceVersions,
continue pages at the first page's version (hypothesis), protobuf reviews, and can-i's rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.api import access, kube_protobuf, tables
from gpuaas.api.auth import Principal
from gpuaas.api.body import BodyError
from gpuaas.api.kube_printers import pod_status
from gpuaas.api.list_pages import Pages
from gpuaas.api.nodes import node_doc, quantity
from gpuaas.api.pod_docs import pending_pods, pods_of_run
from gpuaas.api.runtime_book import Book
from gpuaas.api.status import KubeError
from gpuaas.runtimes import PodSpec, PodStatus, WorkloadRun
from gpuaas.vocab.kinds import NODE, POD

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "team-a", "uid": "job-uid"},
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "train"}},
            "spec": {
                "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "9"]}],
                "terminationGracePeriodSeconds": 5,
            },
        }
    },
}


def _pod(phase: str, **kw: Any) -> dict[str, Any]:
    status = PodStatus("train-0", 42, (0,), kw.pop("restarts", 0), phase, **kw)
    run = WorkloadRun("team-a/train", 0, phase == "Terminating", (status,))
    return pods_of_run(run, JOB, "node-a", {})["team-a/train-0"]


# (case, the runtime's pod, READY, STATUS, RESTARTS)
PODS = [
    ("running", _pod("Running", started=1e9), "1/1", "Running", "0"),
    ("restarted", _pod("Running", started=1e9, restarts=2), "1/1", "Running", "2"),
    ("preempted", _pod("Terminating", started=1e9, kill_at=1e9 + 5), "1/1", "Terminating", "0"),
    ("succeeded", _pod("Succeeded", exit_code=0), "0/1", "Completed", "0"),
    ("failed", _pod("Failed", exit_code=3), "0/1", "Error", "0"),
    ("killed", _pod("Failed"), "0/1", "Error", "0"),
]


@pytest.mark.parametrize(("case", "doc", "ready", "status", "restarts"), PODS)
def test_pod_rows_as_kube_apiserver_prints_them(
    case: str, doc: dict[str, Any], ready: str, status: str, restarts: str
) -> None:
    table = tables.table(POD, "v1", [doc], now=1e9 + 65)
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["train-0", ready, status, restarts], case
    assert cells[6] == "node-a" and cells[5] == cells[7] == cells[8] == "<none>"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Ready", "Status", "Restarts", "Age",
    ]  # fmt: skip


def test_a_pod_is_its_jobs() -> None:
    doc = _pod("Terminating", started=1e9, kill_at=1e9 + 5)
    meta = doc["metadata"]
    assert meta["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid",
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    assert meta["labels"]["app"] == "train" and meta["labels"]["job-name"] == "train"
    assert meta["deletionTimestamp"] == "2001-09-09T01:46:45Z"
    assert meta["deletionGracePeriodSeconds"] == 5
    assert doc["status"]["phase"] == "Running" and doc["spec"]["nodeName"] == "node-a"
    assert doc["spec"]["containers"] == [
        {"name": "main", "image": "busybox", "command": ["sleep", "9"]}
    ]


def test_a_pod_waiting_for_gpus_is_pending_and_unscheduled() -> None:
    spec = PodSpec("train-0", ("sleep", "9"), gpus=2)
    doc = pending_pods("team-a/train", [spec], JOB, admitted=1e9)["team-a/train-0"]
    assert doc["status"]["phase"] == "Pending" and "nodeName" not in doc["spec"]
    assert doc["metadata"]["creationTimestamp"] == "2001-09-09T01:46:40Z"
    reason, ready, _ = pod_status(doc)
    assert (reason, ready) == ("Pending", 0)


def test_node_rows_and_quantities() -> None:
    item = {
        "name": "gpu-1",
        "nodeID": "abc",
        "alive": False,
        "address": "10.0.0.7",
        "labels": {"node-role.kubernetes.io/worker": ""},
        "capacity": {"cpu": 16, "memory": 64 * 2**30, "nvidia.com/gpu": 4},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    }
    doc = node_doc(item, first_seen=1e9, local=False)
    assert doc["status"]["capacity"] == {"cpu": "16", "memory": "67108864Ki", "nvidia.com/gpu": "4"}
    assert doc["spec"]["taints"][0]["effect"] == "NoSchedule"
    cells = tables.table(NODE, "v1", [doc], now=1e9 + 10)["rows"][0]["cells"]
    assert cells[:3] == ["gpu-1", "NotReady", "worker"] and cells[5] == "10.0.0.7"
    assert (quantity(1500, millis=True), quantity(4000, millis=True)) == ("1500m", "4")


def test_the_book_gives_each_change_its_own_version() -> None:
    now = [1000.0]
    state: dict[str, dict[str, Any]] = {"a": {"metadata": {"name": "a"}, "v": 1}}
    book = Book(lambda: {k: dict(v) for k, v in state.items()}, clock=lambda: now[0])
    start = book.refresh(force=True)
    assert start == 1_000_000 + 1  # versions start at the server's start, in milliseconds
    docs, rv = book.items()
    assert [d["metadata"]["resourceVersion"] for d in docs] == [str(rv)]
    state["a"]["v"] = 2
    state["b"] = {"metadata": {"name": "b"}}
    book.refresh()  # read less than `interval` ago: nothing read
    assert book.since(rv) == []
    now[0] += 1
    book.refresh()
    del state["a"]
    book.refresh(force=True)
    changes = book.since(rv)
    assert [(c.type, c.key) for c in changes or []] == [
        ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a"),
    ]  # fmt: skip
    assert [c.rv for c in changes or []] == [rv + 1, rv + 2, rv + 3]
    book.refresh(force=True)  # nothing changed: no new version
    assert book.rv == rv + 3


def test_the_book_forgets_what_it_no_longer_keeps() -> None:
    state = {"n": 0}
    book = Book(lambda: {"a": {"metadata": {"name": "a"}, "n": state["n"]}}, history=3)
    first = book.refresh(force=True)
    for n in range(1, 6):
        state["n"] = n
        book.refresh(force=True)
    assert book.since(first) is None
    assert [c.doc["n"] for c in book.since(book.rv - 2) or []] == [4, 5]


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(st.text("abcdef", min_size=1, max_size=3), unique=True, max_size=30),
    limit=st.integers(1, 7),
    changed=st.lists(st.text("abcdefg", min_size=1, max_size=3), max_size=10),
)
def test_pages_read_at_the_first_pages_version(
    names: list[str], limit: int, changed: list[str]
) -> None:
    """Every page of a list shows the list as it was at the first page, whatever changes."""
    current = {n: {"metadata": {"namespace": "ns", "name": n}} for n in sorted(names)}
    pages = Pages()

    def read() -> tuple[list[dict[str, Any]], int]:
        return [current[n] for n in sorted(current)], len(current)

    expected = [d["metadata"]["name"] for d in read()[0]]
    seen: list[str] = []
    items, rv, token, _ = pages.page(read, limit, None)
    seen += [d["metadata"]["name"] for d in items]
    for n in changed:  # creates and deletes between pages
        if current.pop(n, None) is None:
            current[n] = {"metadata": {"namespace": "ns", "name": n}}
    while token:
        items, page_rv, token, _ = pages.page(read, limit, token)
        assert page_rv == rv
        seen += [d["metadata"]["name"] for d in items]
    assert seen == expected


def test_an_expired_continue_is_410() -> None:
    now = [0.0]
    pages = Pages(ttl=300, clock=lambda: now[0])
    docs = [{"metadata": {"name": f"n{i}"}} for i in range(5)]
    _, _, token, remaining = pages.page(lambda: (docs, 7), 2, None)
    assert token and remaining == 3
    now[0] = 301
    with pytest.raises(KubeError) as err:
        pages.page(lambda: (docs, 8), 2, token)
    assert (err.value.code, err.value.reason) == (410, "Expired")
    with pytest.raises(BodyError):
        pages.page(lambda: (docs, 8), 2, "not-a-token")


def _field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def test_protobuf_reviews_read_as_json() -> None:
    attrs = _field(1, b"team-a") + _field(2, b"list") + _field(3, b"kueue.x-k8s.io")
    attrs += _field(5, b"workloads")
    raw = _field(2, _field(1, attrs))
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SelfSubjectAccessReview")
    body = b"k8s\x00" + _field(1, type_meta) + _field(2, raw)
    doc = kube_protobuf.decode(body)
    assert doc["kind"] == "SelfSubjectAccessReview"
    assert doc["spec"]["resourceAttributes"] == {
        "namespace": "team-a", "verb": "list", "group": "kueue.x-k8s.io", "resource": "workloads",
    }  # fmt: skip
    with pytest.raises(BodyError) as err:
        kube_protobuf.decode(b"k8s\x00" + _field(1, _field(2, b"Secret")))
    assert err.value.status == 415
    with pytest.raises(BodyError):
        kube_protobuf.decode(b"k8s\x00\x0a\xff")


TENANT = Principal("team-a", False, frozenset({"team-a"}))
ADMIN = Principal("admin", True, frozenset())

# (case, who, verb, group, resource, subresource, namespace, allowed)
REVIEWS = [
    ("own namespace", TENANT, "create", "kueue.x-k8s.io", "localqueues", "", "team-a", True),
    ("other namespace", TENANT, "get", "kueue.x-k8s.io", "workloads", "", "team-b", False),
    ("across namespaces: filtered", TENANT, "list", "kueue.x-k8s.io", "workloads", "", "", True),
    ("cluster-scoped read", TENANT, "get", "kueue.x-k8s.io", "clusterqueues", "", "", True),
    ("cluster-scoped write", TENANT, "delete", "kueue.x-k8s.io", "clusterqueues", "", "", False),
    ("status write", TENANT, "patch", "kueue.x-k8s.io", "workloads", "status", "team-a", False),
    ("status read", TENANT, "get", "kueue.x-k8s.io", "workloads", "status", "team-a", True),
    ("nodes", TENANT, "list", "", "nodes", "", "", False),
    ("own pods", TENANT, "watch", "", "pods", "", "team-a", True),
    ("pod logs", TENANT, "get", "", "pods", "log", "team-a", True),
    ("pods are read only", ADMIN, "delete", "", "pods", "", "team-a", False),
    ("events", TENANT, "list", "events.k8s.io", "events", "", "team-a", True),
    ("unknown kind", TENANT, "get", "", "persistentvolumeclaims", "", "team-a", False),
    ("own secrets", TENANT, "get", "", "secrets", "", "team-a", True),
    ("other tenant's secrets", TENANT, "list", "", "secrets", "", "team-b", False),
    ("admin", ADMIN, "create", "kueue.x-k8s.io", "clusterqueues", "", "", True),
    ("admin nodes", ADMIN, "get", "", "nodes", "", "", True),
    ("reviews", TENANT, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", True),
]


@pytest.mark.parametrize(
    ("case", "who", "verb", "group", "resource", "sub", "namespace", "allowed"), REVIEWS
)
def test_can_i(
    case: str,
    who: Principal,
    verb: str,
    group: str,
    resource: str,
    sub: str,
    namespace: str,
    allowed: bool,
) -> None:
    assert access.decide(who, verb, group, resource, sub, namespace, "")[0] is allowed, case


def test_rules_list_what_decide_allows() -> None:
    rules, non_resource = access.rules(TENANT, "team-a")
    by_resource = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in rules}
    assert by_resource[("kueue.x-k8s.io", "workloads")] == [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ]  # fmt: skip
    assert by_resource[("kueue.x-k8s.io", "workloads/status")] == ["get"]
    assert ("", "nodes") not in by_resource
    assert non_resource[0]["verbs"] == ["get"] and "/version" in non_resource[0]["nonResourceURLs"]
    assert access.rules(ADMIN, "team-a")[0] == [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    ]
