"""A worker as the hub watches it (``engine.multikueue.workers``), against a real ``gpuaas
server``: the list then watch keeps its cache of labelled copies and Jobs current, names each
changed workload, assumes answered writes, and a dead worker turns Inactive at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mkcluster import KUEUE, apply, client, close_clients, queues, wait_for

from gpuaas.api.testing import ServerProcess
from gpuaas.engine.multikueue.controller import eligible
from gpuaas.engine.multikueue.remote import WORKLOADS, RemoteClient, Target
from gpuaas.engine.multikueue.workers import Worker
from gpuaas.vocab.kinds import BY_KIND

ORIGIN = "kueue.x-k8s.io/multikueue-origin"
COPIES = f"{KUEUE}/namespaces/default/workloads"


def _copy(name: str, origin: str = "hub-a") -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "labels": {ORIGIN: origin}},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[ServerProcess, Worker, list[str | None]]]:
    srv = ServerProcess(tmp_path / "w").start()
    told: list[str | None] = []
    lock = threading.Lock()

    def notify(key: str | None) -> None:
        with lock:
            told.append(key)

    w = Worker("w", time.time, notify, "hub-a")
    try:
        apply(client(srv), queues("4", check=False))
        w.connect(b"unused", RemoteClient(Target(srv.url, srv.admin_token, None)))
        yield srv, w, told
    finally:
        w.disconnect(None, "", "")
        close_clients()
        srv.kill()


def _until(what: str, probe: Callable[[], object]) -> None:
    wait_for(what, probe, timeout=20)


def test_the_cache_follows_the_worker(
    watched: tuple[ServerProcess, Worker, list[str | None]],
) -> None:
    srv, w, told = watched
    c = client(srv)
    _until("the worker Active after its first lists", lambda: w.snapshot().active)
    assert c.post(COPIES, json=_copy("mine")).status_code == 201
    assert c.post(COPIES, json=_copy("other-hub", origin="hub-b")).status_code == 201
    _until("the copy in the cache", lambda: "default/mine" in w.snapshot().copies)
    _until("the copy admitted there", lambda: any(
        cond.get("type") == "QuotaReserved" and cond.get("status") == "True"
        for cond in (w.snapshot().copies["default/mine"].get("status") or {}).get("conditions", [])
    ))  # fmt: skip
    assert "default/other-hub" not in w.snapshot().copies  # another hub's origin
    assert "default/mine" in told  # each event names its workload
    # A change that leaves the status as it was (here a label) is cached, but wakes nothing:
    # the controller plans from copies' statuses only.
    _until("the copy's admission in the cache", lambda: any(
        cond.get("type") == "Admitted" and cond.get("status") == "True"
        for cond in (w.snapshot().copies["default/mine"].get("status") or {}).get("conditions", [])
    ))  # fmt: skip
    woken = told.count("default/mine")
    patch = {"metadata": {"labels": {"extra": "1"}}}
    merge = {"Content-Type": "application/merge-patch+json"}
    assert c.patch(f"{COPIES}/mine", json=patch, headers=merge).status_code == 200
    _until("the label in the cache", lambda: "extra" in (
        w.snapshot().copies["default/mine"]["metadata"].get("labels") or {}))  # fmt: skip
    assert told.count("default/mine") == woken
    assert c.delete(f"{COPIES}/mine").status_code == 200
    _until("the deleted copy gone", lambda: "default/mine" not in w.snapshot().copies)


def test_answered_writes_are_assumed_and_a_dead_worker_is_inactive(
    watched: tuple[ServerProcess, Worker, list[str | None]],
) -> None:
    srv, w, _ = watched
    _until("the worker Active", lambda: w.snapshot().active)
    w.assume(False, "default/pending", WORKLOADS, "workloads", _copy("pending"))
    assert "default/pending" in w.snapshot().copies  # before any watch event
    w.assume(True, "default/pending", WORKLOADS, "workloads", None)
    assert "default/pending" not in w.snapshot().copies
    srv.kill()
    _until("the worker Inactive", lambda: not w.snapshot().active)
    view = w.snapshot()
    assert view.reason == "ClientConnectionFailed" and view.lost_since is not None


class _NoKubeRay(BaseHTTPRequestHandler):
    """A Kubernetes API with Kueue and batch Jobs but no KubeRay (or, ``no_kueue``, not even
    Kueue): lists answer empty, a watch a bookmark then silence, and 404 for what is not
    served, as kube-apiserver answers for a resource with no CRD."""

    protocol_version = "HTTP/1.1"
    no_kueue = False

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        served = path.endswith("/jobs") or (path.endswith("/workloads") and not self.no_kueue)
        if not served:
            self._answer(404, b'{"kind":"Status","status":"Failure","reason":"NotFound"}')
        elif "watch=true" not in self.path:
            self._answer(200, b'{"items":[],"metadata":{"resourceVersion":"1"}}')
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            line = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}}}\n'
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
            time.sleep(2)  # then the stream ends: watched again
            self.wfile.write(b"0\r\n\r\n")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.mark.parametrize("no_kueue", [False, True])
def test_a_job_kind_the_worker_does_not_serve_leaves_it_active(no_kueue: bool) -> None:
    """A worker without KubeRay answers 404 for RayClusters and RayJobs: it stays Active for
    the kinds it serves (Kueue would keep it inactive while any adapter's watch fails). One
    without Kueue's Workloads is never Active: copies cannot go there."""
    handler = type("Handler", (_NoKubeRay,), {"no_kueue": no_kueue})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    w = Worker("w", time.time, lambda _key: None, "hub-a")
    try:
        target = Target(f"http://127.0.0.1:{server.server_address[1]}", "t", None)
        w.connect(b"unused", RemoteClient(target))
        if no_kueue:
            _until("the worker seen failing", lambda: "404" in w.snapshot().message)
            time.sleep(1)
            assert not w.snapshot().active
        else:
            _until("the worker Active without KubeRay", lambda: w.snapshot().active)
            view = w.snapshot()
            assert (view.reason, view.message) == (
                "Active",
                "Connected; rayclusters, rayjobs not served there: none is sent to it",
            )
            assert view.absent == {"rayclusters", "rayjobs"}
            # A RayCluster's workload leaves it out of its clusters; a Job's keeps it.
            absent = {"w": view.absent}
            assert eligible(["w", "other"], BY_KIND["RayCluster"], absent) == ["other"]
            assert eligible(["w", "other"], BY_KIND["Job"], absent) == ["w", "other"]
            assert eligible(["w"], None, absent) == ["w"]  # a bare Workload: its copy is all
    finally:
        w.disconnect(None, "", "")
        server.shutdown()
        server.server_close()
