"""A real JupyterLab behind the gpuaas server: the owner's token opens it (HTTP, a cookie set on
the first visit, a kernel run over the proxied websocket); another tenant's token is refused.

Needs the ``workbench`` extra (JupyterLab, websockets): skipped without it, mandatory under
GPUAAS_REQUIRE_SERVICES=1."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

pytestmark = pytest.mark.slow
GPU = "nvidia.com/gpu"
SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ds"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [
         {"coveredResources": ["cpu", GPU], "flavors": [{"name": "l4", "resources": [
             {"name": "cpu", "nominalQuota": 8}, {"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "q", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
    {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
     "metadata": {"name": "lab", "namespace": "ds", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
     "spec": {"template": {"spec": {"containers": [
         {"name": "lab", "image": "jupyter", "resources": {"requests": {"cpu": "1", GPU: 1}}}]}}}},
]  # fmt: skip


def _path(doc: dict[str, Any]) -> str:
    k = BY_KIND[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return f"{k.base_path()}/namespaces/{ns}/{k.plural}" if ns else f"{k.base_path()}/{k.plural}"


def _extra_missing() -> str | None:
    for mod in ("jupyterlab", "websockets"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install 'gpuaas[workbench]')"
    return None


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, str]]:
    srv = ServerProcess(
        tmp_path_factory.mktemp("jupyter"),
        extra=("--runtime", "local", "--fake-gpus", "1:NVIDIA-L4"),
    ).start()
    try:
        with srv.client() as c:
            for doc in SETUP:
                assert c.post(_path(doc), json=doc).status_code == 201
            tokens = [
                c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": [ns]}).json()[
                    "token"
                ]
                for ns in ("ds", "other")
            ]
        yield srv, tokens[0], tokens[1]
    finally:
        srv.stop()


def _ready(srv: ServerProcess, token: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        r = httpx.get(
            f"{srv.url}/workbenches/ds/lab/api/status",
            headers={"Authorization": f"Bearer {token}"},
        )
        if r.status_code == 200:
            return
        last = f"{r.status_code} {r.text[:200]}"
        time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer through the proxy: {last}\n{srv.log()}")


@pytest.fixture(scope="module")
def ready(running: tuple[ServerProcess, str, str]) -> tuple[ServerProcess, str, str]:
    _ready(running[0], running[1])
    return running


@pytest.fixture(autouse=True)
def _needs_extra(require_service: Any) -> None:
    missing = _extra_missing()
    require_service("the workbench extra", missing is None, missing or "")


def test_status_publishes_the_url(ready: tuple[ServerProcess, str, str]) -> None:
    srv, token, _ = ready
    with srv.client(token) as c:
        st = c.get(_path(SETUP[-1]) + "/lab").json()["status"]
    assert st["readyReplicas"] == 1 and "running" in st["containerState"]
    assert st["url"] == "/workbenches/ds/lab/"


def test_owner_opens_it_with_one_link_and_runs_a_kernel(
    ready: tuple[ServerProcess, str, str],
) -> None:
    srv, token, _ = ready
    with httpx.Client(base_url=srv.url, follow_redirects=True, timeout=60) as browser:
        r = browser.get(f"/workbenches/ds/lab/lab?token={token}")
        assert r.status_code == 200, r.text[:300]
        assert token not in str(r.url)  # redirected without the token in the address
        assert "JupyterLab" in r.text
        assert browser.cookies.get("gpuaas_workbench") == token
        r = browser.post(
            "/workbenches/ds/lab/api/kernels",
            json={"name": "python3"},
            headers={"X-XSRFToken": browser.cookies.get("_xsrf") or ""},
        )
        assert r.status_code == 201, r.text
        kernel = r.json()["id"]
        cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    out = asyncio.run(_execute(srv, kernel, cookie, "print(6 * 7)"))
    assert out == "42\n"


async def _execute(srv: ServerProcess, kernel: str, cookie: str, code: str) -> str:
    import websockets

    url = srv.url.replace("http", "ws") + f"/workbenches/ds/lab/api/kernels/{kernel}/channels"
    msg_id = uuid.uuid4().hex
    request = {
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "t",
                   "session": uuid.uuid4().hex, "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False},
    }  # fmt: skip
    # The kernel's stdout may come in several stream messages ("42", then "\n": ipykernel
    # flushes on a timer): everything the request printed, up to its kernel going idle.
    text = ""
    async with websockets.connect(url, additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps(request))
        async with asyncio.timeout(60):
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text += str(msg["content"]["text"])
                elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return text


def test_another_tenant_is_refused(ready: tuple[ServerProcess, str, str]) -> None:
    srv, _, other = ready
    r = httpx.get(
        f"{srv.url}/workbenches/ds/lab/api/status", headers={"Authorization": f"Bearer {other}"}
    )
    assert r.status_code == 403 and r.json()["kind"] == "Status"
    r = httpx.get(f"{srv.url}/workbenches/ds/lab/lab?token={other}")
    assert r.status_code == 403
    r = httpx.get(f"{srv.url}/workbenches/ds/lab/api/status")
    assert r.status_code == 401


def test_another_tenants_websocket_is_refused(ready: tuple[ServerProcess, str, str]) -> None:
    import websockets

    srv, _, other = ready

    async def attempt() -> None:
        url = srv.url.replace("http", "ws") + "/workbenches/ds/lab/api/events/subscribe"
        async with websockets.connect(
            url, additional_headers={"Cookie": f"gpuaas_workbench={other}"}
        ) as ws:
            await ws.recv()

    # Refused before the handshake completes: the server answers the upgrade with 403.
    with pytest.raises(websockets.InvalidStatus) as err:
        asyncio.run(attempt())
    assert err.value.response.status_code == 403
