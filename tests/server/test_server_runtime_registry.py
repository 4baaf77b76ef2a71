"""A runtime registered by name runs under the real server wiring: the fake runtime's proof.

The fake runtime (``gpuaas.testing.fake_runtime``) is registered with one line, the server is
put together by ``gpuaas.server.build`` exactly as ``gpuaas server --runtime fake`` would, and
the test talks to its HTTP app, served by uvicorn on a thread: an admitted Job starts on the fake, a
higher-priority Job preempts it (the fake is told to stop), and the preemptor is admitted only
once the fake reports the victim's pods gone, because quota waits for the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gpuaas.api.testing import serve_in_thread
from gpuaas.runtimes import RuntimeOptions, registry
from gpuaas.server import Server, ServerError, ServerOptions, build
from gpuaas.testing.fake_runtime import FakeRuntime
from gpuaas.vocab.kinds import BY_KIND, Kind

GPU = "nvidia.com/gpu"


@pytest.fixture
def fakes() -> Iterator[list[FakeRuntime]]:
    built: list[FakeRuntime] = []

    def create(options: RuntimeOptions) -> FakeRuntime:
        built.append(FakeRuntime.create(options))
        return built[-1]

    registry.register("fake", create, "a test runtime: nothing runs")  # the one line
    try:
        yield built
    finally:
        registry.unregister("fake")


@pytest.fixture
def server(tmp_path: Path, fakes: list[FakeRuntime]) -> Iterator[Server]:
    srv = build(ServerOptions(tmp_path / "data", runtime="fake", fake_gpus="4"), say=lambda _: None)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    web = serve_in_thread(
        lambda port: uvicorn.Config(server.app, host="127.0.0.1", port=port, log_level="warning")
    )
    token = server.admin_token_path.read_text().strip()
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{web.port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    try:
        yield client
    finally:
        client.close()
        web.stop()


def _path(kind: Kind, namespace: str | None = None) -> str:
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{kind.base_path()}{where}/{kind.plural}"


def _create(
    http: httpx.Client, kind: str, doc: dict[str, Any], namespace: str | None = None
) -> None:
    k = BY_KIND[kind]
    resp = http.post(_path(k, namespace), json={"apiVersion": k.api_version, "kind": kind, **doc})
    assert resp.status_code == 201, resp.text


def _setup(http: httpx.Client) -> None:
    _create(http, "Namespace", {"metadata": {"name": "ns"}})
    _create(http, "ResourceFlavor", {"metadata": {"name": "rf"}})
    for name, value in (("low", 10), ("high", 1000)):
        _create(http, "WorkloadPriorityClass", {"metadata": {"name": name}, "value": value})
    quota = [{"name": GPU, "nominalQuota": 4}]
    group = {"coveredResources": [GPU], "flavors": [{"name": "rf", "resources": quota}]}
    spec = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [group],
    }
    _create(http, "ClusterQueue", {"metadata": {"name": "cq"}, "spec": spec})
    _create(http, "LocalQueue", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, "ns")


def _job(http: httpx.Client, name: str, priority: str, gpus: int) -> None:
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "resources": {"requests": {GPU: gpus}},
    }
    labels = {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": priority}
    doc = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    _create(http, "Job", doc, "ns")


def _conditions(http: httpx.Client, name: str) -> dict[str, str]:
    resp = http.get(f"{_path(BY_KIND['Workload'], 'ns')}/{name}")
    assert resp.status_code == 200, resp.text
    return {c["type"]: c["status"] for c in resp.json()["status"]["conditions"]}


def test_a_registered_runtime_starts_stops_and_releases_quota(
    server: Server, http: httpx.Client, fakes: list[FakeRuntime]
) -> None:
    (fake,) = fakes
    assert server.bridge is not None and server.bridge.runtime is fake
    _setup(http)

    # 1. admitted -> the fake sees a start, pinned to GPUs
    # A create is acknowledged before it is scheduled; a read settles what arrived first.
    _job(http, "dev", "low", 4)
    assert _conditions(http, "dev")["Admitted"] == "True"
    assert fake.starts == ["ns/dev"]
    assert sorted(fake.gpu_owners()) == [0, 1, 2, 3]

    # 2. preempted -> the fake is asked to stop; the preemptor waits for the quota
    _job(http, "prod", "high", 2)
    assert _conditions(http, "dev")["Evicted"] == "True"
    assert fake.stops == ["ns/dev"]
    assert fake.running()["ns/dev"].stopping
    server.engine.tick()
    assert _conditions(http, "prod").get("Admitted") != "True"
    assert fake.starts == ["ns/dev"]

    # 3. the fake reports the pods gone -> quota released, the preemptor admitted and started
    fake.report_stopped("ns/dev")
    server.engine.poll_observers()
    server.engine.tick()
    assert _conditions(http, "prod")["Admitted"] == "True"
    assert fake.starts == ["ns/dev", "ns/prod"]
    assert _conditions(http, "dev").get("Admitted") != "True"

    # 4. an exit on the fake finishes the workload; the requeued victim runs again once
    #    Kueue's 1 s requeue batch has passed (the server's poll settles when it is due)
    fake.report_exit("ns/prod", succeeded=True)
    server.engine.poll_observers()
    server.engine.tick()
    assert _conditions(http, "prod")["Finished"] == "True"
    deadline = time.monotonic() + 10
    while len(fake.starts) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
        server.engine.poll_observers()
    assert fake.starts == ["ns/dev", "ns/prod", "ns/dev"]
    assert list(fake.running()) == ["ns/dev"] and fake.running()["ns/dev"].restart_count == 1


def test_an_unknown_runtime_name_is_refused_before_anything_opens(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="no runtime named 'nope'"):
        build(ServerOptions(tmp_path, runtime="nope"), say=lambda _: None)
    assert not (tmp_path / "gpuaas.db").exists()


def test_admission_only_server_has_no_runtime(tmp_path: Path) -> None:
    srv = build(ServerOptions(tmp_path, runtime="none"), say=lambda _: None)
    try:
        assert srv.bridge is None
    finally:
        srv.close()
