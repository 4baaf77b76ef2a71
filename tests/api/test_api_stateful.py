"""A stateful property test of the HTTP API: random creates, updates, deletes, hostile writes and
restarts, with the invariants checked after every step (issue 17).

The model is what the API acknowledged. After each step: every acknowledged write is there (and
nothing deleted or refused is), its last acknowledged label is what is stored, no ClusterQueue is
over its quota, and no workload is admitted twice. A restart builds the server again on the same
data directory (as after a stop), so everything above must hold across it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from served import serve

from gpuaas.server import Server, ServerOptions, build

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
NAMESPACES = ("team-a", "team-b")
NOMINAL_MILLI = 4000
NAMES = [f"w{i}" for i in range(6)]


def _setup_docs() -> list[tuple[str, dict[str, Any]]]:
    docs: list[tuple[str, dict[str, Any]]] = [
        (f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta1",
         "kind": "ResourceFlavor", "metadata": {"name": "rf"}}),
        (f"{KUEUE}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
         "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
         "preemption": {"withinClusterQueue": "LowerPriority"},
         "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "rf",
         "resources": [{"name": "cpu", "nominalQuota": NOMINAL_MILLI // 1000}]}]}]}}),
    ]  # fmt: skip
    for ns in NAMESPACES:
        docs.insert(0, ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns}}))  # fmt: skip
        docs.append((f"{KUEUE}/namespaces/{ns}/localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq"}}))  # fmt: skip
    return docs


def _workload(ns: str, name: str, cpu: int, priority: int, label: str) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {"v": label}},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "priorityClassName": "p",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


HOSTILE = [
    b'{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "h"}, "x": NaN}',
    b"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: h}\nspec: {1: x}\n",
    b'{"metadata": {"name": "h"}, "spec": ' + b"[" * 700 + b"]" * 700 + b"}",
]


class ApiMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="gpuaas-stateful-"))
        self.model: dict[str, dict[str, Any]] = {}  # "ns/name" -> acknowledged workload
        self.server: Server | None = None
        self.web: uvicorn.Server | None = None
        self.http: httpx.Client | None = None
        self._start()
        for path, doc in _setup_docs():
            assert self.c.post(path, json=doc).status_code == 201

    @property
    def c(self) -> httpx.Client:
        assert self.http is not None
        return self.http

    def _start(self) -> None:
        self.server = build(ServerOptions(self.dir / "data", runtime="none"), say=lambda _: None)
        self.http, self.web = serve(self.server)

    def _stop(self) -> None:
        if self.http is not None:
            self.http.close()
        if self.web is not None:
            self.web.should_exit = True
        if self.server is not None:
            self.server.close()
        self.http = self.web = self.server = None

    def teardown(self) -> None:
        self._stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        ns=st.sampled_from(NAMESPACES),
        name=st.sampled_from(NAMES),
        cpu=st.integers(1, 3),
        priority=st.integers(0, 3),
        label=st.text("abc", min_size=1, max_size=3),
    )
    def create(self, ns: str, name: str, cpu: int, priority: int, label: str) -> None:
        r = self.c.post(
            f"{KUEUE}/namespaces/{ns}/workloads", json=_workload(ns, name, cpu, priority, label)
        )
        key = f"{ns}/{name}"
        assert r.status_code == (409 if key in self.model else 201), r.text
        if r.status_code == 201:
            self.model[key] = {"label": label}

    @rule(data=st.data(), label=st.text("xyz", min_size=1, max_size=3))
    def relabel(self, data: st.DataObject, label: str) -> None:
        if not self.model:
            return
        key = data.draw(st.sampled_from(sorted(self.model)))
        ns, name = key.split("/")
        r = self.c.patch(
            f"{KUEUE}/namespaces/{ns}/workloads/{name}",
            json={"metadata": {"labels": {"v": label}}},
            headers={"content-type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        self.model[key]["label"] = label

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if not self.model:
            return
        key = data.draw(st.sampled_from(sorted(self.model)))
        ns, name = key.split("/")
        r = self.c.delete(f"{KUEUE}/namespaces/{ns}/workloads/{name}")
        assert r.status_code == 200, r.text
        del self.model[key]

    @rule(body=st.sampled_from(HOSTILE), yaml_type=st.booleans())
    def hostile(self, body: bytes, yaml_type: bool) -> None:
        ctype = "application/yaml" if yaml_type else "application/json"
        r = self.c.post(
            f"{KUEUE}/namespaces/team-a/workloads", content=body, headers={"content-type": ctype}
        )
        assert 400 <= r.status_code < 500, r.text

    @rule()
    def restart(self) -> None:
        self._stop()
        self._start()

    @invariant()
    def acknowledged_writes_are_there(self) -> None:
        items = self.c.get(f"{KUEUE}/workloads").json()["items"]
        stored = {f"{w['metadata']['namespace']}/{w['metadata']['name']}": w for w in items}
        assert len(stored) == len(items), "a workload listed twice"
        assert set(stored) == set(self.model)
        for key, want in self.model.items():
            assert stored[key]["metadata"]["labels"]["v"] == want["label"], key

    @invariant()
    def quota_is_never_exceeded_nor_anything_admitted_twice(self) -> None:
        items = self.c.get(f"{KUEUE}/workloads").json()["items"]
        admitted = [
            w for w in items
            if any(c["type"] == "Admitted" and c["status"] == "True"
                   for c in w.get("status", {}).get("conditions", []))
        ]  # fmt: skip
        used = sum(int(w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
                       ["requests"]["cpu"]) * 1000 for w in admitted)  # fmt: skip
        assert used <= NOMINAL_MILLI
        summary = self.c.get("/apis/gpuaas.dev/v1alpha1/clusterqueuestatus").json()["items"]
        (cq,) = summary
        (res,) = cq["resources"]
        assert res["usage"] == used <= res["nominal"]


ApiMachine.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
TestApiStateful = ApiMachine.TestCase
