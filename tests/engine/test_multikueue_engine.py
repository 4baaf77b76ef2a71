"""The engine's side of MultiKueue without any worker: the job webhook's managedBy default on the
manager, prebuilt workloads on a worker, the MultiKueue check kept inactive when it has no usable
worker, nomination state surviving a restart, and Secrets stored as Kubernetes stores them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.state import Phase
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.engine.multikueue import reads, writes
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND, SECRET, WORKLOAD

MK = "kueue.x-k8s.io/multikueue"


def _create(e: Engine, kind: str, doc: dict[str, Any], ns: str | None = None) -> dict[str, Any]:
    return e.create(BY_KIND[kind], ns, doc)


def _setup(e: Engine, *, check: bool) -> None:
    _create(e, "Namespace", {"metadata": {"name": "ns"}})
    _create(e, "ResourceFlavor", {"metadata": {"name": "rf"}})
    groups = [{"coveredResources": ["cpu"],
               "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]  # fmt: skip
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": groups}
    if check:
        params = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}
        _create(e, "AdmissionCheck", {"metadata": {"name": "mk"},
                                      "spec": {"controllerName": MK, "parameters": params}})  # fmt: skip
        spec["admissionChecks"] = ["mk"]
    _create(e, "ClusterQueue", {"metadata": {"name": "cq"}, "spec": spec})
    _create(e, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, "ns")


def _job(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    containers = [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq", **(labels or {})}},
        "spec": {"template": {"spec": {"containers": containers}}},
    }


def test_a_job_of_a_multikueue_queue_is_managed_by_multikueue(engine: Engine) -> None:
    _setup(engine, check=True)
    job = _create(engine, "Job", _job("j"), "ns")
    assert job["spec"]["managedBy"] == MK
    # No MultiKueueConfig, no worker: the check is not Active, so the CQ admits nothing.
    w = engine.workload("ns/j")
    assert w is not None and w.phase == Phase.PENDING
    assert "references inactive AdmissionCheck(s): mk" in engine.explain("ns", "j")["reason"]


def test_the_managed_by_default_follows_the_queues_checks_as_they_change(engine: Engine) -> None:
    """The answer for a LocalQueue is remembered between Jobs; a change to its ClusterQueue or
    AdmissionCheck must show in the next Job's default."""
    _setup(engine, check=True)
    managed = lambda name: "managedBy" in _create(engine, "Job", _job(name), "ns")["spec"]  # noqa: E731
    assert managed("j1") and managed("j2")
    cq = engine.get(BY_KIND["ClusterQueue"], None, "cq")
    cq["spec"].pop("admissionChecks")
    engine.replace(BY_KIND["ClusterQueue"], None, "cq", cq)
    assert not managed("j3")
    cq = engine.get(BY_KIND["ClusterQueue"], None, "cq")
    cq["spec"]["admissionChecks"] = ["mk"]
    engine.replace(BY_KIND["ClusterQueue"], None, "cq", cq)
    assert managed("j4")
    cq = engine.get(BY_KIND["ClusterQueue"], None, "cq")
    cq["spec"].pop("admissionChecks")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
    engine.replace(BY_KIND["ClusterQueue"], None, "cq", cq)
    assert managed("j5")


def test_a_job_elsewhere_is_left_alone(engine: Engine) -> None:
    _setup(engine, check=False)
    job = _create(engine, "Job", _job("j"), "ns")
    assert "managedBy" not in job["spec"]


def _manager_copy(name: str) -> dict[str, Any]:
    """A manager's copy of a workload, as it reaches a worker before its Job."""
    containers = [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/multikueue-origin": "m"}},
            "spec": {"queueName": "lq",
                     "podSets": [{"name": "main", "count": 1,
                                  "template": {"spec": {"containers": containers}}}]}}  # fmt: skip


def test_a_prebuilt_workload_is_taken_by_its_job(engine: Engine) -> None:
    _setup(engine, check=False)
    # The manager's copy arrives first and reserves quota; then its Job, naming it.
    _create(engine, "Workload", _manager_copy("j"), "ns")
    before = engine.workload("ns/j")
    assert before is not None and before.phase == Phase.ADMITTED
    prebuilt = {"kueue.x-k8s.io/prebuilt-workload-name": "j"}
    _create(engine, "Job", _job("j", prebuilt), "ns")
    after = engine.workload("ns/j")
    assert after is not None and after.admitted_at == before.admitted_at  # the same workload
    manifest = engine.source_manifest("ns/j")
    assert manifest is not None and manifest["kind"] == "Job"  # pods come from the Job now
    with pytest.raises(Invalid, match="must name the job itself"):
        _create(engine, "Job", _job("k", {"kueue.x-k8s.io/prebuilt-workload-name": "j"}), "ns")
    with pytest.raises(Invalid, match="prebuilt Workload ns/x not found"):
        _create(engine, "Job", _job("x", {"kueue.x-k8s.io/prebuilt-workload-name": "x"}), "ns")
    # Deleting the Job deletes the workload it took, as Kubernetes' owner GC does.
    engine.delete(BY_KIND["Job"], "ns", "j")
    assert engine.workload("ns/j") is None


def test_a_prebuilt_copy_deactivated_or_deleted_is_not_made_anew(engine: Engine) -> None:
    """spec.active on the copy its job took acts on that copy; deleting it stops the job and
    makes no new Workload (Kueue: ErrPrebuiltWorkloadNotFound)."""
    _setup(engine, check=False)
    _create(engine, "Workload", _manager_copy("j"), "ns")
    _create(engine, "Job", _job("j", {"kueue.x-k8s.io/prebuilt-workload-name": "j"}), "ns")
    engine.patch(BY_KIND["Workload"], "ns", "j", {"spec": {"active": False}})
    w = engine.workload("ns/j")
    assert w is not None and w.phase != Phase.ADMITTED and not w.workload.active
    engine.delete(BY_KIND["Workload"], "ns", "j")
    assert engine.workload("ns/j") is None
    assert engine.get(BY_KIND["Job"], "ns", "j")["metadata"]["name"] == "j"


def test_nomination_and_cluster_name_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gpuaas.db'}"
    store = open_store(url)
    e = Engine(store)
    e.serve_checks(MK)  # stand in for the controller: the check is Active
    _setup(e, check=True)
    _create(e, "Job", _job("j"), "ns")
    assert writes.update_workload(e, "ns/j", "mk", None, ("a", "b"), None, ["nominated"])
    doc = e.get(WORKLOAD, "ns", "j")
    assert doc["status"]["nominatedClusterNames"] == ["a", "b"]
    ready = ("Ready", 'The workload was admitted on "b"')
    assert writes.update_workload(e, "ns/j", "mk", ready, (), "b", [])
    assert not writes.update_workload(e, "ns/j", "mk", None, (), "a", [])  # immutable
    e.close()
    store.close()
    store = open_store(url)
    e = Engine(store)
    e.serve_checks(MK)
    try:
        doc = e.get(WORKLOAD, "ns", "j")
        assert doc["status"]["clusterName"] == "b"
        assert "nominatedClusterNames" not in doc["status"]
        w = e.workload("ns/j")
        assert w is not None and w.conditions["Admitted"].status == "True"
    finally:
        e.close()
        store.close()


def test_secret_is_stored_as_kubernetes_stores_it(engine: Engine) -> None:
    _create(engine, "Namespace", {"metadata": {"name": "ns"}})
    doc = {"metadata": {"name": "s"}, "stringData": {"kubeconfig": "apiVersion: v1"}}
    out = engine.create(SECRET, "ns", doc)
    assert out["data"] == {"kubeconfig": base64.b64encode(b"apiVersion: v1").decode()}
    assert "stringData" not in out and out["type"] == "Opaque"
    with pytest.raises(Invalid, match=r"Secret ns/t: data\[k\]: illegal base64 data"):
        engine.create(SECRET, "ns", {"metadata": {"name": "t"}, "data": {"k": "%%%"}})


def test_an_external_dispatcher_writes_the_nomination(engine: Engine) -> None:
    engine.serve_checks(MK)
    _setup(engine, check=True)
    _create(engine, "Job", _job("j"), "ns")
    out = engine.update_check_states("ns", "j", {"status": {"nominatedClusterNames": ["w2"]}})
    assert out["status"]["nominatedClusterNames"] == ["w2"]
    with pytest.raises(Invalid, match="must be a list of MultiKueueCluster names"):
        engine.update_check_states("ns", "j", {"status": {"nominatedClusterNames": [""]}})


def test_a_pass_writes_its_updates_and_mirrored_statuses_in_one_commit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.serve_checks(MK)
    _setup(engine, check=True)
    _create(engine, "Job", _job("j"), "ns")
    _create(engine, "Job", _job("k"), "ns")
    commits: list[int] = []
    submit = engine.committer.submit
    monkeypatch.setattr(
        engine.committer,
        "submit",
        lambda w, after=None, **kw: commits.append(len(w)) or submit(w, after, **kw),
    )
    job = BY_KIND["Job"]
    mirrored = {"active": 1, "startTime": "2026-01-01T00:00:00Z"}
    applied = writes.update_workloads(
        engine,
        [writes.WorkloadUpdate("ns/j", "mk", nominated=("a", "b")), writes.WorkloadUpdate(
            "ns/gone", "mk", nominated=("a",))],
        [writes.StatusWrite(job, "ns", "k", mirrored), writes.StatusWrite(job, "ns", "gone", {})],
    )  # fmt: skip
    assert applied == ["ns/j"]  # the update of a workload that is not there is skipped
    assert len(commits) == 1
    assert engine.get(WORKLOAD, "ns", "j")["status"]["nominatedClusterNames"] == ["a", "b"]
    assert engine.get(job, "ns", "k")["status"] == mirrored
    rv = engine.get(job, "ns", "k")["metadata"]["resourceVersion"]
    assert writes.write_status(engine, job, "ns", "k", dict(mirrored))  # already so: no write
    assert len(commits) == 1 and engine.get(job, "ns", "k")["metadata"]["resourceVersion"] == rv


def test_a_pass_reads_many_documents_at_once(engine: Engine) -> None:
    _setup(engine, check=True)
    _create(engine, "Job", _job("j"), "ns")
    docs = reads.read_docs(engine, [(WORKLOAD, "ns/j"), (WORKLOAD, "ns/none")])
    assert list(docs) == ["ns/j"]  # one that is not there is left out
    assert docs["ns/j"] == engine.get(WORKLOAD, "ns", "j")
    docs["ns/j"]["spec"]["queueName"] = "edited"  # a copy of its own
    assert engine.get(WORKLOAD, "ns", "j")["spec"]["queueName"] == "lq"
    jobs = reads.read_docs(engine, [(BY_KIND["Job"], "ns/j")])
    assert jobs["ns/j"]["spec"]["managedBy"] == MK


def test_the_prebuilt_name_is_read_from_the_annotation_first(engine: Engine) -> None:
    """Kueue 0.19's MultiKueue names the copy in an annotation (WorkloadIdentifierAnnotations,
    on by default since 0.18), read before the label: a Job from such a manager takes its copy."""
    _setup(engine, check=False)
    _create(engine, "Workload", _manager_copy("j"), "ns")
    job = _job("j")
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "j"}
    job["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "other"  # not read
    _create(engine, "Job", job, "ns")
    manifest = engine.source_manifest("ns/j")
    assert manifest is not None and manifest["kind"] == "Job"
    with pytest.raises(Invalid, match=r"metadata.annotations\[kueue.x-k8s.io/prebuilt-workload"):
        bad = _job("k")
        bad["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "x"}
        _create(engine, "Job", bad, "ns")


def test_a_prebuilt_copy_out_of_sync_with_its_job_is_finished(tmp_path: Path) -> None:
    """Kueue's ensurePrebuiltWorkloadInSync: the Job asks for 3 pods, its copy for 1: the copy
    finishes, reason OutOfSync, and gives its quota back, which a restart keeps; a matching Job
    leaves its copy be."""
    url = f"sqlite:///{tmp_path / 'gpuaas.db'}"
    store = open_store(url)
    engine = Engine(store)
    _setup(engine, check=False)
    _create(engine, "Workload", _manager_copy("j"), "ns")
    _create(engine, "Workload", _manager_copy("k"), "ns")
    wider = _job("j", {"kueue.x-k8s.io/prebuilt-workload-name": "j"})
    wider["spec"]["parallelism"] = 3
    _create(engine, "Job", wider, "ns")
    _create(engine, "Job", _job("k", {"kueue.x-k8s.io/prebuilt-workload-name": "k"}), "ns")
    j, k = engine.workload("ns/j"), engine.workload("ns/k")
    assert j is not None and j.phase == Phase.FINISHED
    assert k is not None and k.phase == Phase.ADMITTED
    finished = next(
        c for c in engine.get(BY_KIND["Workload"], "ns", "j")["status"]["conditions"]
        if c["type"] == "Finished"
    )  # fmt: skip
    assert (finished["reason"], finished["message"]) == (
        "OutOfSync",
        "The prebuilt workload is out of sync with its user job",
    )
    engine.close()
    store.close()
    store = open_store(url)
    again = Engine(store)
    try:
        status = again.get(BY_KIND["Workload"], "ns", "j")["status"]
        assert next(c for c in status["conditions"] if c["type"] == "Finished") == finished
    finally:
        again.close()
        store.close()
