"""The worker's Job status, as Kubernetes' job controller sets it from the pods, exists on the
worker and is mirrored to the hub's Job until it finishes, as MultiKueue does: a hub and one
worker that runs real processes (``--runtime local``), each a ``gpuaas server`` on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from mkcluster import client, condition, hub_and_worker, job, wait_for

from gpuaas.api.testing import ServerProcess

pytestmark = pytest.mark.slow
JOBS = "/apis/batch/v1/namespaces/default/jobs"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with hub_and_worker(tmp_path_factory.mktemp("mkjob")) as servers:
        yield servers


def _status(c: httpx.Client, name: str) -> dict[str, object]:
    r = c.get(f"{JOBS}/{name}")
    return dict(r.json().get("status") or {}) if r.status_code == 200 else {}


def _running(c: httpx.Client, name: str) -> dict[str, object] | None:
    st = _status(c, name)
    return st if st.get("active") == 1 and st.get("ready") == 1 else None


def _complete(c: httpx.Client, name: str) -> dict[str, object] | None:
    st = _status(c, name)
    return st if condition({"status": st}, "Complete").get("status") == "True" else None


def test_a_running_then_complete_job_status_is_mirrored(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    hub, worker = pair
    h, w = client(hub), client(worker)
    r = h.post(JOBS, json=job("mirrored", "1", ("sh", "-c", "sleep 4")))
    assert r.status_code == 201, r.text
    # On the worker the Job runs: one active, ready pod, resumed, a startTime.
    on_worker = wait_for("the worker's Job running", lambda: _running(w, "mirrored"))
    assert on_worker["startTime"]
    suspended = condition({"status": on_worker}, "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "JobResumed")
    assert "completionTime" not in on_worker
    # The hub's Job shows the worker's status while it runs.
    on_hub = wait_for("the hub's Job mirroring the running Job", lambda: _running(h, "mirrored"))
    assert on_hub["startTime"] == on_worker["startTime"]
    # It ends: the hub's Job keeps the worker's last status, Complete with its completionTime
    # and one succeeded pod (the worker's copy and Job are then removed, as Kueue removes them).
    done = wait_for("the hub's Job Complete", lambda: _complete(h, "mirrored"), timeout=60)
    assert done["succeeded"] == 1 and done["active"] == 0, done
    assert done["completionTime"] and done["startTime"] == on_worker["startTime"], done
    assert condition({"status": done}, "Complete")["reason"] == "CompletionsReached"
    assert condition({"status": done}, "SuccessCriteriaMet")["status"] == "True"
    assert not condition({"status": done}, "Failed")


def test_a_plain_job_completes_on_its_own_server(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    _, worker = pair
    w = client(worker)
    r = w.post(JOBS, json=job("plain", "1", ("sh", "-c", "sleep 1")))
    assert r.status_code == 201, r.text
    done = wait_for("the worker's own Job Complete", lambda: _complete(w, "plain"), timeout=60)
    assert done["succeeded"] == 1 and done["active"] == 0 and done["ready"] == 0, done
    assert done["completionTime"] >= done["startTime"], done
    assert w.delete(f"{JOBS}/plain").status_code == 200


def test_a_failed_job_status_is_mirrored(pair: tuple[ServerProcess, ServerProcess]) -> None:
    hub, _ = pair
    h = client(hub)
    doc = job("fails", "1", ("sh", "-c", "exit 3"))
    doc["spec"]["backoffLimit"] = 0
    r = h.post(JOBS, json=doc)
    assert r.status_code == 201, r.text

    def failed() -> dict[str, object] | None:
        st = _status(h, "fails")
        return st if condition({"status": st}, "Failed").get("status") == "True" else None

    st = wait_for("the hub's Job Failed as on its worker", failed, timeout=60)
    assert st["failed"] == 1 and not st.get("succeeded"), st
    assert "completionTime" not in st
    assert condition({"status": st}, "Failed")["reason"] == "BackoffLimitExceeded"


def test_a_job_waiting_for_quota_on_a_plain_server_is_suspended(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    _, worker = pair
    w = client(worker)
    r = w.post(JOBS, json=job("too-big", "64"))  # more than the worker's 4 CPUs
    assert r.status_code == 201, r.text
    st = _status(w, "too-big")
    cond = condition({"status": st}, "Suspended")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "JobSuspended",
        "Job suspended",
    )
    assert st["active"] == 0 and "startTime" not in st
    assert w.delete(f"{JOBS}/too-big").status_code == 200
