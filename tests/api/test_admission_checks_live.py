"""Admission checks on a live server, driven as an external check controller drives Kueue's.

The controller writes the AdmissionCheck's Active condition and the Workload's
``status.admissionChecks`` through the status subresource (admin token). The server shows
QuotaReserved first, Admitted once the check is Ready, evicts on Retry (reason AdmissionCheck) and
readmits after ``requeueAfterSeconds``, and deactivates on Rejected, as Kueue's workload
controller does (``reconcileCheckBasedEviction``, ``resetChecksOnEviction``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from gpuaas.api.testing import ServerProcess

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
WL = f"{KUEUE}/namespaces/team-a/workloads"


def _objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        (f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}),
        (f"{KUEUE}/admissionchecks", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "prov"}, "spec": {"controllerName": "example.com/prov"}}),
        (f"{KUEUE}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "admissionChecks": ["prov"],
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}),
        (f"{KUEUE}/namespaces/team-a/localqueues", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}),
    ]  # fmt: skip


def _workload(name: str, prio: int) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "3"}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "queueName": "lq",
            "priority": prio,
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }


def _cond(doc: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in doc.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return None


def _checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc.get("status", {}).get("admissionChecks", [])}


def _until(
    c: httpx.Client, name: str, ok: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = c.get(f"{WL}/{name}").json()
        if ok(doc):
            return doc
        time.sleep(0.1)
    raise AssertionError(f"{name}: never {what}; last status {doc.get('status')}")


def _set(c: httpx.Client, name: str, state: str, **extra: Any) -> httpx.Response:
    entry = {"name": "prov", "state": state, **extra}
    return c.patch(f"{WL}/{name}/status", json={"status": {"admissionChecks": [entry]}})


def _reserved(doc: dict[str, Any]) -> bool:
    return (_cond(doc, "QuotaReserved") or {}).get("status") == "True"


def test_an_external_controller_drives_checks(server: ServerProcess) -> None:
    with server.client() as c:
        _drive(server, c)


def _drive(server: ServerProcess, c: httpx.Client) -> None:
    for path, doc in _objects():
        assert c.post(path, json=doc).status_code == 201
    assert c.post(WL, json=_workload("w", 100)).status_code == 201
    # 1. The check is not Active yet: the ClusterQueue is inactive and nothing reserves quota.
    time.sleep(0.5)
    assert not _reserved(c.get(f"{WL}/w").json())
    [active_cond] = c.get(f"{KUEUE}/clusterqueues/cq").json()["status"]["conditions"]
    assert (active_cond["status"], active_cond["reason"]) == ("False", "AdmissionCheckInactive")
    assert active_cond["message"] == (
        "Can't admit new workloads: references inactive AdmissionCheck(s): prov."
    )
    active = {
        "status": {
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "ok"}]
        }
    }
    r = c.put(f"{KUEUE}/admissionchecks/prov/status", json=active)
    assert r.status_code == 200, r.text
    # 2. QuotaReserved first; Admitted only once the check is Ready.
    doc = _until(c, "w", _reserved, "reserved quota")
    assert _cond(doc, "Admitted") is None
    assert _checks(doc)["prov"]["state"] == "Pending"
    why = c.get("/apis/gpuaas.dev/v1alpha1/namespaces/team-a/workloads/w/explain").json()
    assert "waiting for admission check(s) prov" in why["reason"]
    assert why["admissionChecks"] == [{"name": "prov", "state": "Pending", "message": ""}]
    rows = c.get("/apis/gpuaas.dev/v1alpha1/dashboard/summary").json()["workloads"]
    row = next(r for r in rows if r["key"] == "team-a/w")
    assert row["awaitingChecks"] and row["admissionChecks"][0]["state"] == "Pending"
    token = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-a"]})
    with server.client(token.json()["token"]) as tenant:
        assert _set(tenant, "w", "Ready").status_code == 403
    bad = c.patch(
        f"{WL}/w/status", json={"status": {"admissionChecks": [{"name": "nope", "state": "Ready"}]}}
    )
    assert bad.status_code in (400, 422) and "admission check nope does not apply" in bad.text
    bad = _set(c, "w", "Done")
    assert bad.status_code in (400, 422) and "status.admissionChecks[0].state" in bad.text
    assert _set(c, "w", "Ready", message="capacity found").status_code == 200
    doc = _until(c, "w", lambda d: (_cond(d, "Admitted") or {}).get("status") == "True", "admitted")
    # 3. Retry evicts and releases quota (w2 takes it); w comes back after its back-off.
    assert c.post(WL, json=_workload("w2", 0)).status_code == 201
    assert _set(c, "w", "Retry", message="later", requeueAfterSeconds=2).status_code == 200
    doc = _until(c, "w", lambda d: not _reserved(d), "released its quota")
    assert (_cond(doc, "Evicted") or {}).get("reason") == "AdmissionCheck"
    assert _checks(doc)["prov"]["state"] == "Pending" and _checks(doc)["prov"]["retryCount"] == 1
    _until(c, "w2", _reserved, "took the released quota")
    assert c.delete(f"{WL}/w2").status_code == 200
    doc = _until(c, "w", _reserved, "reserved again after its back-off")
    # 4. Rejected deactivates it.
    assert _set(c, "w", "Rejected", message="never").status_code == 200
    doc = _until(c, "w", lambda d: not _reserved(d), "was deactivated")
    assert (_cond(doc, "Evicted") or {}).get("reason") == "DeactivatedDueToAdmissionCheck"
