"""``v1 Node``, read only: the nodes pods run on, as ``kubectl get nodes -o wide`` shows them.

The same list as ``GET /apis/gpuaas.dev/v1alpha1/nodes`` and ``gpuaas node list``: the runtime
bridge's nodes (every Ray node for the Ray runtime), or this server's node. Each carries its
labels, taints, capacity and allocatable (cpu, memory, ``nvidia.com/gpu``), its addresses, and
a Ready condition (``Unknown`` once Ray reports the node dead, as a node whose kubelet stopped
posting status). Nodes are cluster-scoped and admin-only, as the nodes of a shared cluster are:
a tenant token is answered 403. There is no kubelet, so ``creationTimestamp`` is when this
server first listed the node, and ``nodeInfo`` says what runs the pods there.
"""

from __future__ import annotations

import platform
import socket
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from gpuaas.api import tables
from gpuaas.api.auth import authenticate, require_admin
from gpuaas.api.discovery import version_info
from gpuaas.api.pods import book_response, method_not_allowed
from gpuaas.api.runtime_book import Book
from gpuaas.api.status import not_found
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.inventory import NodeInventory
from gpuaas.vocab.kinds import NODE
from gpuaas.vocab.render import rfc3339

JsonDoc = dict[str, Any]
CORE = "/api/v1"


def quantity(value: Any, *, memory: bool = False, millis: bool = False) -> str:
    """A Kubernetes quantity: memory in Ki as kubelets report it, CPU in cores or millicores."""
    number = int(value or 0)
    if millis:
        return str(number // 1000) if number % 1000 == 0 else f"{number}m"
    if memory:
        return f"{number // 1024}Ki" if number % 1024 == 0 else str(number)
    return str(number)


def _os_image() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    return ""


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def node_doc(item: JsonDoc, *, first_seen: float, local: bool) -> JsonDoc:
    """One ``v1 Node`` from an entry of ``RuntimeBridge.nodes()``."""
    cap = item.get("capacity") or {}
    ray = "nodeID" in item
    resources = {
        "cpu": quantity(cap.get("cpu"), millis=not ray),
        "memory": quantity(cap.get("memory"), memory=True),
        "nvidia.com/gpu": quantity(cap.get("nvidia.com/gpu")),
    }
    alive = bool(item.get("alive", True))
    name = str(item.get("name", ""))
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    labels.update({str(k): str(v) for k, v in (item.get("labels") or {}).items()})
    addresses = [{"type": "Hostname", "address": name}]
    if item.get("address"):
        addresses.insert(0, {"type": "InternalIP", "address": str(item["address"])})
    ready = {
        "type": "Ready",
        "status": "True" if alive else "Unknown",
        "reason": "KubeletReady" if alive else "NodeStatusUnknown",
        "message": "gpuaas runs pods on this node"
        if alive
        else "The Ray cluster reports this node dead.",
    }
    gpu_version = version_info()["gitVersion"]
    # Every field of NodeSystemInfo is required by clients (the Python client refuses a Node
    # without them): what is not known of a node is an empty string.
    info = {
        "kubeletVersion": gpu_version,
        "kubeProxyVersion": "",
        "containerRuntimeVersion": "ray://" if ray else "gpuaas-local://",
        "operatingSystem": "linux",
        "architecture": platform.machine() if local else "",
        "osImage": _os_image() if local else "",
        "kernelVersion": platform.release() if local else "",
        "machineID": _read("/etc/machine-id") if local else "",
        "bootID": _read("/proc/sys/kernel/random/boot_id") if local else "",
        "systemUUID": "",
    }
    spec: JsonDoc = {}
    if item.get("taints"):
        spec["taints"] = [dict(t) for t in item["taints"] if isinstance(t, dict)]
    if item.get("nodeID"):
        spec["providerID"] = f"ray://{item['nodeID']}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(item.get("nodeID") or f"gpuaas-node-{name}"),
            "labels": labels,
            "creationTimestamp": rfc3339(first_seen),
            "annotations": {"gpuaas.dev/gpu-model": str(item.get("gpuModel") or "")}
            if item.get("gpuModel")
            else {},
        },
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": [ready],
            "addresses": addresses,
            "nodeInfo": info,
        },
    }


class NodeReader:
    """Reads the bridge's nodes (or this server's node) as Node documents, remembering when
    each was first seen (its age)."""

    def __init__(self, bridge: RuntimeBridge | None, node: NodeInventory | None) -> None:
        self._bridge, self._node = bridge, node
        self._first_seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._here = node.name if node is not None else socket.gethostname()

    def __call__(self) -> dict[str, JsonDoc]:
        if self._bridge is not None:
            items = self._bridge.nodes()
        elif self._node is not None:
            items = [{**self._node.to_dict(), "alive": True}]
        else:
            items = []
        out = {}
        with self._lock:
            for item in items:
                name = str(item.get("name", ""))
                seen = self._first_seen.setdefault(name, time.time())
                local = "nodeID" not in item and name == self._here
                out[name] = node_doc(item, first_seen=seen, local=local)
        return out


def install(app: FastAPI) -> None:
    app.state.node_book = Book(NodeReader(app.state.runtime, app.state.node), interval=1.0)
    router = APIRouter()

    async def admin(request: Request, verb: str) -> None:
        p = await authenticate(request, request.app.state.tokens)
        require_admin(p, f"{verb} nodes")

    @router.get(f"{CORE}/nodes", tags=["Node"], operation_id="list_nodes_v1")
    async def _list(request: Request) -> Response:
        watching = request.query_params.get("watch", "").lower() in ("true", "1")
        await admin(request, "watch" if watching else "list")
        book: Book = request.app.state.node_book
        return await run_in_threadpool(book_response, request, book, NODE, lambda _: True)

    @router.get(f"{CORE}/nodes/{{name}}", tags=["Node"], operation_id="get_node_v1")
    async def _get(request: Request, name: str) -> Response:
        await admin(request, "get")
        book: Book = request.app.state.node_book
        doc = await run_in_threadpool(book.get, name)
        if doc is None:
            raise not_found(NODE, name)
        if tables.wants_table(request.headers.get("accept", "")):
            include = request.query_params.get("includeObject", "Metadata")
            return JSONResponse(
                tables.table(NODE, "v1", [doc], include=include), media_type=tables.TABLE_MEDIA
            )
        return JSONResponse(doc)

    async def refuse(request: Request) -> Response:
        await authenticate(request, request.app.state.tokens)
        raise method_not_allowed(NODE)

    for path in (f"{CORE}/nodes", f"{CORE}/nodes/{{name}}"):
        router.add_api_route(
            path, refuse, methods=["POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
        )
    app.include_router(router)
