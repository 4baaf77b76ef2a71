"""Where a RayCluster's pods meet on the Ray runtime (``runtimes.ray_rendezvous``), without Ray:
the rendezvous actor's bookkeeping (each pod's records by workload, a RayJob's end and job status
kept after the submitter goes) and a pod directory's relay (its own records sent, the others'
written in and removed when they leave). The relay through real launchers on real nodes is
tested with Ray (``test_ray_runtime.py``, the RayCluster and RayJob tests)."""

from __future__ import annotations

from pathlib import Path

from gpuaas.runtimes.ray_pod import read_states, state_file
from gpuaas.runtimes.ray_rendezvous import PodDir, Rendezvous, read_dir, write_record

HEAD = {"run": "r1", "role": "head", "nodeIP": "10.0.0.7", "ports": {"gcs": 6379}, "ready": True}
WORKER = {"run": "r1", "role": "worker", "nodeIP": "10.0.0.8", "ready": False}
JOB = {"run": "r1", "role": "submitter", "jobId": "raysubmit_1", "jobStatus": "SUCCEEDED"}


def test_the_rendezvous_keeps_each_pods_records_by_workload() -> None:
    r = Rendezvous()
    assert r.put("ns/rc", "head-attempt", {"head": HEAD}) == {"head": HEAD}
    assert r.put("ns/rc", "worker-attempt", {"worker-w": WORKER}) == {
        "head": HEAD,
        "worker-w": WORKER,
    }
    assert r.read("ns/other") == {}
    # a pod's whole set replaces its earlier one (a record it removed is gone)
    r.put("ns/rc", "worker-attempt", {})
    assert r.read("ns/rc") == {"head": HEAD}
    r.drop("ns/rc", "head-attempt")
    assert r.read("ns/rc") == {}


def test_a_rayjobs_end_and_job_status_outlive_the_submitter() -> None:
    r = Rendezvous()
    r.put("ns/rj", "head-attempt", {"head": HEAD})
    r.put("ns/rj", "submitter-attempt", {"submitter": JOB, "finished": {"run": "r1"}})
    r.drop("ns/rj", "submitter-attempt")
    assert r.read("ns/rj") == {"head": HEAD, "submitter": JOB, "finished": {"run": "r1"}}
    r.clear("ns/rj")
    assert r.read("ns/rj") == {}


def test_a_pod_directory_sends_its_own_records_and_takes_the_others(tmp_path: Path) -> None:
    worker = PodDir("ns/rc", tmp_path / "worker")
    write_record(state_file(worker.path, "worker", "w"), WORKER)
    own = worker.own()
    assert own == {"worker-w": WORKER}
    # what the rendezvous answers: the head's record is written in, the pod's own left alone
    worker.take({"head": HEAD, "worker-w": WORKER}, own)
    assert read_states(worker.path) == {"head": HEAD, "worker-w": WORKER}
    assert worker.own() == {"worker-w": WORKER}  # a relayed record is never sent back as its own
    # the head's pod went: its record leaves the directory too
    worker.take({"worker-w": WORKER}, worker.own())
    assert read_dir(worker.path) == {"worker-w": WORKER}
