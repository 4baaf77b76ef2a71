"""MultiKueue across real servers on loopback: a hub and three workers, each a ``gpuaas server``
process, joined with ``gpuaas cluster join``; the hub reaches the workers only through their
Kubernetes API with the kubeconfig the join wrote."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mkcluster import (
    KUEUE,
    apply,
    cli,
    client,
    close_clients,
    condition,
    copies,
    job,
    jobs,
    join,
    queues,
    wait_for,
    workload,
)

from gpuaas.api.testing import ServerProcess

pytestmark = pytest.mark.slow
LOST = "2"  # workerLostTimeout, seconds


@dataclass
class Clusters:
    hub: ServerProcess
    workers: dict[str, ServerProcess]
    tmp: Path


def _start(tmp: Path, *, hub_extra: tuple[str, ...] = (), cpu: dict[str, str]) -> Clusters:
    hub = ServerProcess(
        tmp / "hub", extra=("--multikueue-worker-lost-timeout", LOST, *hub_extra)
    ).start()
    workers: dict[str, ServerProcess] = {}
    try:
        apply(client(hub), queues("100", check=True))
        for name, quota in cpu.items():
            workers[name] = ServerProcess(tmp / name).start()
            apply(client(workers[name]), queues(quota, check=False))
            code, out = join(hub, workers[name], name, tmp, f"zone={name}")
            assert code == 0, out
    except BaseException:
        hub.kill()
        for w in workers.values():
            w.kill()
        raise
    return Clusters(hub, workers, tmp)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    c = _start(tmp_path_factory.mktemp("mk"), cpu={"w1": "4", "w2": "4", "w3": "4"})
    try:
        yield c
    finally:
        _stop(c)


def _stop(c: Clusters) -> None:
    close_clients()
    c.hub.kill()
    for w in c.workers.values():
        w.kill()


def _admitted_on(c: Clusters, name: str) -> str:
    hub = client(c.hub)

    def chosen() -> str | None:
        wl = workload(hub, name)
        ready = condition(wl, "Admitted").get("status") == "True"
        return wl["status"].get("clusterName") if ready else None

    return str(wait_for(f"{name} admitted through a worker", chosen))


def test_all_at_once_dispatch_runs_on_one_worker(clusters: Clusters) -> None:
    c = clusters
    hub = client(c.hub)

    def all_active() -> bool:
        items = hub.get(f"{KUEUE}/multikueueclusters").json()["items"]
        return len(items) == 3 and all(
            condition(i, "Active").get("status") == "True" for i in items
        )

    wait_for("three workers Active", all_active)
    # The check's Active is written after the workers' own, in the same pass: wait for it too.
    wait_for(
        "the check Active",
        lambda: (
            condition(hub.get(f"{KUEUE}/admissionchecks/mk").json(), "Active").get("reason")
            == "Active"
        ),
    )
    code, out = cli(c.hub, c.tmp, "cluster", "list")
    assert code == 0 and all(f"w{i}" in out for i in (1, 2, 3)), out
    assert out.count("Active") >= 3 and "zone=w1" in out
    r = hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("all-at-once"))
    assert r.json()["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    chosen = _admitted_on(c, "all-at-once")
    wl = workload(hub, "all-at-once")
    check = wl["status"]["admissionChecks"][0]
    assert check["state"] == "Ready" and f'admitted on "{chosen}"' in check["message"]
    assert "nominatedClusterNames" not in wl["status"]
    # The chosen worker has the copy (origin label) and the Job (prebuilt label and
    # annotation); the others have neither, once the hub removed them.
    worker = client(c.workers[chosen])
    copy = copies(worker)["all-at-once"]
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    assert condition(copy, "Admitted")["status"] == "True"
    remote_job = worker.get("/apis/batch/v1/namespaces/default/jobs/all-at-once").json()
    labels = remote_job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/prebuilt-workload-name"] == "all-at-once"
    annotations = remote_job["metadata"]["annotations"]  # as Kueue 0.18+ names it
    assert annotations["kueue.x-k8s.io/prebuilt-workload-name"] == "all-at-once"
    assert "managedBy" not in remote_job["spec"]
    for name, w in c.workers.items():
        if name != chosen:
            wait_for(f"no copy on {name}", lambda w=w: "all-at-once" not in copies(client(w)))
    # Events and explain on the hub say where it runs.
    events = hub.get("/api/v1/namespaces/default/events").json()["items"]
    said = [e["message"] for e in events if e["reason"] == "MultiKueue"]
    assert any("Nominated worker clusters: w1, w2, w3" in m for m in said), said
    assert any(f'admitted on "{chosen}"' in m and "not chosen" in m for m in said), said
    # Deleting on the hub deletes on the worker.
    assert hub.delete("/apis/batch/v1/namespaces/default/jobs/all-at-once").status_code == 200
    wait_for("the worker's copy and job gone", lambda: "all-at-once" not in jobs(worker)
             and "all-at-once" not in copies(worker))  # fmt: skip


def test_full_worker_is_passed_over(clusters: Clusters) -> None:
    c = clusters
    hub = client(c.hub)
    # w1's quota is taken by a job of its own.
    w1 = client(c.workers["w1"])
    assert w1.post("/apis/batch/v1/namespaces/default/jobs", json=job("local", "4")).is_success
    wait_for("w1 full", lambda: condition(workload(w1, "local"), "Admitted").get("status"))
    hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("lands-elsewhere", "2"))
    assert _admitted_on(c, "lands-elsewhere") in ("w2", "w3")
    assert "lands-elsewhere" not in jobs(w1)
    w1.delete("/apis/batch/v1/namespaces/default/jobs/local")
    hub.delete("/apis/batch/v1/namespaces/default/jobs/lands-elsewhere")


def test_no_worker_can_admit_stays_pending_with_reason(clusters: Clusters) -> None:
    c = clusters
    hub = client(c.hub)
    hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("too-big", "8"))

    def pending() -> str | None:
        st = workload(hub, "too-big").get("status") or {}
        checks = st.get("admissionChecks") or [{}]
        msg = str(checks[0].get("message", ""))
        return msg if "w1:" in msg and "w3:" in msg else None

    message = wait_for("a Pending check naming every worker", pending)
    wl = workload(hub, "too-big")
    assert wl["status"]["nominatedClusterNames"] == ["w1", "w2", "w3"]
    assert wl["status"]["admissionChecks"][0]["state"] == "Pending"
    assert condition(wl, "QuotaReserved")["status"] == "True"
    assert condition(wl, "Admitted").get("status") != "True"
    assert "not admitted by any nominated worker cluster" in message
    assert "clusterName" not in wl["status"]
    explained = hub.get("/apis/gpuaas.dev/v1alpha1/namespaces/default/workloads/too-big/explain")
    assert "not admitted by any nominated worker cluster" in explained.text
    assert explained.json()["nominatedClusterNames"] == ["w1", "w2", "w3"]
    code, out = cli(c.hub, c.tmp, "explain", "workload", "too-big", "-n", "default")
    assert code == 0 and "Nominated:      w1, w2, w3 (MultiKueue)" in out, out
    hub.delete("/apis/batch/v1/namespaces/default/jobs/too-big")
    for w in c.workers.values():
        wait_for("copies removed", lambda w=w: "too-big" not in copies(client(w)))


@pytest.mark.parametrize(
    ("case", "kubeconfig", "reason"),
    [
        ("missing-secret", None, "BadKubeConfig"),
        ("insecure", "insecure", "InsecureKubeConfig"),
        ("wrong-token", "wrong-token", "ClientConnectionFailed"),
        ("not-yaml", "::", "BadKubeConfig"),
    ],
)
def test_wrong_kubeconfig_is_inactive_with_reason(
    clusters: Clusters, case: str, kubeconfig: str | None, reason: str
) -> None:
    c = clusters
    hub = client(c.hub)
    url = c.workers["w1"].url
    texts = {
        "insecure": f"clusters: [{{name: x, cluster: {{server: {url}, "
        "insecure-skip-tls-verify: true}}]\ncontexts: [{name: x, context: {cluster: x, "
        "user: x}}]\ncurrent-context: x\nusers: [{name: x, user: {token: t}}]\n",
        "wrong-token": f"clusters: [{{name: x, cluster: {{server: {url}}}}}]\ncontexts: "
        "[{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n"
        "users: [{name: x, user: {token: not-a-token}}]\n",
        "::": ":: not: [yaml",
    }
    if kubeconfig is not None:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"bad-{case}", "namespace": "kueue-system"},
            "stringData": {"kubeconfig": texts[kubeconfig]},
        }
        assert hub.post("/api/v1/namespaces/kueue-system/secrets", json=secret).is_success
    cluster = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "MultiKueueCluster",
        "metadata": {"name": f"bad-{case}"},
        "spec": {"kubeConfig": {"locationType": "Secret", "location": f"bad-{case}"}},
    }
    assert hub.post(f"{KUEUE}/multikueueclusters", json=cluster).is_success

    def inactive() -> dict[str, str] | None:
        doc = hub.get(f"{KUEUE}/multikueueclusters/bad-{case}").json()
        cond = condition(doc, "Active")
        return cond if cond.get("status") == "False" else None

    cond = wait_for(f"bad-{case} Inactive", inactive)
    assert cond["reason"] == reason, cond
    code, out = cli(c.hub, c.tmp, "cluster", "list")
    assert code == 0, out
    assert f"bad-{case}" in out and reason in out
    hub.delete(f"{KUEUE}/multikueueclusters/bad-{case}")


def test_worker_killed_mid_run_is_replaced_and_cleaned(tmp_path: Path) -> None:
    c = _start(tmp_path, cpu={"w1": "4", "w2": "4"})
    try:
        hub = client(c.hub)
        hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("survivor"))
        first = _admitted_on(c, "survivor")
        other = "w2" if first == "w1" else "w1"
        dead = c.workers[first]
        dead.kill()  # SIGKILL, mid-run

        def inactive() -> bool:
            doc = hub.get(f"{KUEUE}/multikueueclusters/{first}").json()
            cond = condition(doc, "Active")
            return cond.get("status") == "False" and cond["reason"] == "ClientConnectionFailed"

        wait_for(f"{first} Inactive", inactive)

        def moved() -> bool:
            wl = workload(hub, "survivor")
            ok = condition(wl, "Admitted").get("status") == "True"
            return ok and wl["status"].get("clusterName") == other

        wait_for(f"survivor redispatched to {other} after workerLostTimeout", moved, 90)
        events = hub.get("/api/v1/namespaces/default/events").json()["items"]
        assert any("Admitting remote lost" in e["message"] for e in events)
        # The killed worker comes back on the same address: its stale copy and Job go.
        back = ServerProcess(dead.data_dir, port=dead.port).start()
        c.workers[first] = back
        wait_for(
            f"stale copy on {first} removed",
            lambda: "survivor" not in copies(client(back)) and "survivor" not in jobs(client(back)),
            90,
        )
        assert "survivor" in jobs(client(c.workers[other]))
        assert workload(hub, "survivor")["status"]["clusterName"] == other
    finally:
        _stop(c)


def test_incremental_nominates_in_config_order(tmp_path: Path) -> None:
    c = _start(
        tmp_path,
        hub_extra=("--multikueue-dispatcher", "kueue.x-k8s.io/multikueue-dispatcher-incremental"),
        cpu={"w1": "1", "w2": "1", "w3": "1", "w4": "1"},
    )
    try:
        hub = client(c.hub)
        config = hub.get(f"{KUEUE}/multikueueconfigs/default").json()
        config["spec"]["clusters"] = ["w4", "w2", "w3", "w1"]
        assert hub.put(f"{KUEUE}/multikueueconfigs/default", json=config).is_success
        hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("incremental", "2"))

        def nominated() -> list[str] | None:
            st = workload(hub, "incremental").get("status") or {}
            return st.get("nominatedClusterNames")

        # The first round: three workers, in the MultiKueueConfig's order; w1 waits for the
        # next round (5 minutes).
        assert wait_for("a nomination", nominated) == ["w4", "w2", "w3"]
        for name in ("w4", "w2", "w3"):
            wait_for(f"a copy on {name}", lambda n=name: "incremental" in copies(
                client(c.workers[n])))  # fmt: skip
        assert "incremental" not in copies(client(c.workers["w1"]))
    finally:
        _stop(c)


def test_secret_base64_is_checked(clusters: Clusters) -> None:
    hub = client(clusters.hub)
    bad = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "bad", "namespace": "default"},
        "data": {"kubeconfig": "not base64!"},
    }
    r = hub.post("/api/v1/namespaces/default/secrets", json=bad)
    assert r.status_code == 422 and "data[kubeconfig]" in r.json()["message"]
    good = {**bad, "data": {"a": base64.b64encode(b"x").decode()}}
    assert hub.post("/api/v1/namespaces/default/secrets", json=good).status_code == 201


def test_hub_killed_keeps_its_choice(tmp_path: Path) -> None:
    """A kill -9 of the hub loses no acknowledged write: the workload stays where it runs, and
    the hub started again dispatches nothing twice."""
    c = _start(tmp_path, cpu={"w1": "4", "w2": "4"})
    try:
        hub = client(c.hub)
        hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("steady"))
        chosen = _admitted_on(c, "steady")
        c.hub.kill()
        close_clients()
        c.hub = ServerProcess(c.hub.data_dir, port=c.hub.port, extra=c.hub.extra).start()
        hub = client(c.hub)
        wl = workload(hub, "steady")
        assert wl["status"]["clusterName"] == chosen
        assert condition(wl, "Admitted")["status"] == "True"
        hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("after-restart"))
        _admitted_on(c, "after-restart")
        placed = [n for n, w in c.workers.items() if "steady" in jobs(client(w))]
        assert placed == [chosen]
        assert workload(hub, "steady")["status"]["clusterName"] == chosen
    finally:
        _stop(c)


def test_external_dispatcher_uses_the_written_nomination(tmp_path: Path) -> None:
    c = _start(
        tmp_path, hub_extra=("--multikueue-dispatcher", "example.com/placement"),
        cpu={"w1": "4", "w2": "4"},
    )  # fmt: skip
    try:
        hub = client(c.hub)
        hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("external"))
        wait_for("quota reserved on the hub", lambda: condition(
            workload(hub, "external"), "QuotaReserved").get("status") == "True")  # fmt: skip
        assert "external" not in copies(client(c.workers["w1"]))  # nobody nominated yet
        body = {"status": {"nominatedClusterNames": ["w2"]}}
        r = hub.put(f"{KUEUE}/namespaces/default/workloads/external/status", json=body)
        assert r.status_code == 200, r.text
        assert _admitted_on(c, "external") == "w2"
        assert "external" not in copies(client(c.workers["w1"]))
    finally:
        _stop(c)


def test_worker_dropped_from_the_config_keeps_no_copy(clusters: Clusters) -> None:
    """A worker leaving the MultiKueueConfig (a Placement's new decision) makes Kueue retry the
    workload elsewhere; gpuaas also deletes the dropped worker's copy and Job, so the workload
    never runs on two workers (Kueue leaves that copy running)."""
    c = clusters
    hub = client(c.hub)
    path = f"{KUEUE}/multikueueconfigs/default"
    before = hub.get(path).json()["spec"]["clusters"]
    assert hub.post("/apis/batch/v1/namespaces/default/jobs", json=job("moved")).is_success
    first = _admitted_on(c, "moved")
    others = [n for n in before if n != first]
    merge = {"Content-Type": "application/merge-patch+json"}
    try:
        r = hub.patch(path, content=json.dumps({"spec": {"clusters": others}}), headers=merge)
        assert r.is_success, r.text
        old = client(c.workers[first])
        wait_for(f"no copy or job left on {first}",
                 lambda: "moved" not in copies(old) and "moved" not in jobs(old))  # fmt: skip
        second = _admitted_on(c, "moved")
        assert second in others
        assert "moved" in jobs(client(c.workers[second]))
    finally:
        hub.patch(path, content=json.dumps({"spec": {"clusters": before}}), headers=merge)
        hub.delete("/apis/batch/v1/namespaces/default/jobs/moved")
