"""kube-apiserver's own Table printers for Pod and Node (``pkg/printers/internalversion``).

Same columns, types and priorities (``-o wide`` adds the priority-1 ones), same cells: a pod's
READY is ready/total containers, its STATUS the phase unless a container's waiting or terminated
reason says more (``Completed``, ``Error``, ``ExitCode:N``), and ``Terminating`` once it carries
a ``deletionTimestamp``; a node's STATUS is its Ready condition (``Ready``, ``NotReady``,
``Unknown``), its ROLES the ``node-role.kubernetes.io/*`` labels. Pure functions over documents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JsonDoc = dict[str, Any]
Printer = tuple[list[JsonDoc], Callable[[JsonDoc, float], list[Any]]]
Age = Callable[[Any, float], str]

_NAME_DOC = (
    "Name must be unique within a namespace. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata"
)


def _col(name: str, description: str, priority: int = 0, fmt: str = "") -> JsonDoc:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": priority,
    }


POD_COLUMNS = [
    _col("Name", _NAME_DOC, fmt="name"),
    _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _col("Age", _AGE_DOC),
    _col("IP", "podIP address allocated to the pod. Routable at least within the cluster.", 1),
    _col("Node", "NodeName indicates in which node this pod is scheduled.", 1),
    _col("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods.", 1),
    _col("Readiness Gates", "If specified, all readiness gates will be evaluated.", 1),
]

NODE_COLUMNS = [
    _col("Name", _NAME_DOC, fmt="name"),
    _col("Status", "The status of the node"),
    _col("Roles", "The roles of the node"),
    _col("Age", _AGE_DOC),
    _col("Version", "Kubelet Version reported by the node."),
    _col("Internal-IP", "List of addresses reachable to the node.", 1),
    _col("External-IP", "List of addresses reachable to the node.", 1),
    _col("OS-Image", "OS Image reported by the node from /etc/os-release.", 1),
    _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r'.", 1),
    _col("Container-Runtime", "ContainerRuntime Version reported by the node.", 1),
]


def _ready_condition(doc: JsonDoc) -> bool:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return True
    return False


def pod_status(doc: JsonDoc) -> tuple[str, int, int]:
    """(STATUS, ready containers, restarts) as kube-apiserver's printPod works them out."""
    status = doc.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    ready = restarts = 0
    running = False
    for c in reversed(status.get("containerStatuses") or []):
        restarts += int(c.get("restartCount") or 0)
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode')}"
        elif c.get("ready") and state.get("running") is not None:
            running = True
            ready += 1
    if reason == "Completed" and running:
        reason = "Running" if _ready_condition(doc) else "NotReady"
    if doc.get("metadata", {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready, restarts


def pod_printer(age: Age) -> Printer:
    def cells(doc: JsonDoc, now: float) -> list[Any]:
        reason, ready, restarts = pod_status(doc)
        spec, status = doc.get("spec") or {}, doc.get("status") or {}
        gates = spec.get("readinessGates") or []
        return [
            doc["metadata"]["name"],
            f"{ready}/{len(spec.get('containers') or [])}",
            reason,
            str(restarts),
            age(doc["metadata"].get("creationTimestamp"), now),
            status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>",
            f"{len(gates)}/{len(gates)}" if gates else "<none>",
        ]

    return POD_COLUMNS, cells


def _node_status(doc: JsonDoc) -> str:
    shown = "Unknown"
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            shown = "Ready" if c.get("status") == "True" else "NotReady"
    if (doc.get("spec") or {}).get("unschedulable"):
        shown += ",SchedulingDisabled"
    return shown


def _roles(labels: dict[str, str]) -> str:
    roles = sorted(
        {
            k.removeprefix("node-role.kubernetes.io/")
            for k in labels
            if k.startswith("node-role.kubernetes.io/")
        }
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    return ",".join(r for r in roles if r) or "<none>"


def _address(doc: JsonDoc, type_: str) -> str:
    for a in (doc.get("status") or {}).get("addresses") or []:
        if a.get("type") == type_:
            return str(a.get("address", ""))
    return "<none>"


def node_printer(age: Age) -> Printer:
    def cells(doc: JsonDoc, now: float) -> list[Any]:
        info = (doc.get("status") or {}).get("nodeInfo") or {}
        labels = (doc.get("metadata") or {}).get("labels") or {}
        return [
            doc["metadata"]["name"],
            _node_status(doc),
            _roles(labels),
            age(doc["metadata"].get("creationTimestamp"), now),
            info.get("kubeletVersion", ""),
            _address(doc, "InternalIP"),
            _address(doc, "ExternalIP"),
            info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>",
        ]

    return NODE_COLUMNS, cells
