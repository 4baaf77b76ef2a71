"""The runtime's pods as ``v1 Pod`` documents, as a kubelet would report them.

A pod is named and labelled from the pod template it was made from (its Job's, RayCluster's or
Workload's), owned by that object (``ownerReferences``, ``controller: true``), placed on its node
(``spec.nodeName``), with the phase, the container's state and restart count the runtime gives.
The runtime runs a pod's first container only, so that is the one container a pod shows. A pod
being stopped (preempted, its workload deleted) carries ``deletionTimestamp``, the moment its
grace period ends, which kubectl prints as Terminating. Pods of an admitted workload that have
not started (their GPUs are busy) are Pending and unscheduled. Pure functions over the
runtime's status values and stored manifests: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from gpuaas.runtimes import PodSpec, PodStatus, WorkloadRun
from gpuaas.vocab.render import rfc3339

JsonDoc = dict[str, Any]
_UID_SPACE = uuid.UUID("6f1c8a2e-2f55-4b8e-9d0e-6b7c3f0a9e11")


def _as_dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def template_of(manifest: Mapping[str, Any], pod_set: str) -> Mapping[str, Any]:
    """The pod template (``metadata`` and ``spec``) that pods of ``pod_set`` are made from."""
    kind, spec = manifest.get("kind"), _as_dict(manifest.get("spec"))
    if kind == "Job":
        return _as_dict(spec.get("template"))
    if kind == "RayJob":
        spec = _as_dict(spec.get("rayClusterSpec"))
        kind = "RayCluster"
    if kind == "RayCluster":
        if pod_set == "head":
            return _as_dict(_as_dict(spec.get("headGroupSpec")).get("template"))
        for group in spec.get("workerGroupSpecs") or []:
            if _as_dict(group).get("groupName") == pod_set:
                return _as_dict(_as_dict(group).get("template"))
        return {}
    for ps in spec.get("podSets") or []:
        if _as_dict(ps).get("name") == pod_set:
            return _as_dict(_as_dict(ps).get("template"))
    return {}


def _owner_labels(manifest: Mapping[str, Any], pod_set: str) -> dict[str, str]:
    """The labels Kubernetes' controllers put on the pods they make (Job, KubeRay)."""
    meta = _as_dict(manifest.get("metadata"))
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    kind = manifest.get("kind")
    if kind == "Job":
        return {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    if kind in ("RayCluster", "RayJob"):
        head = pod_set == "head"
        return {
            "ray.io/cluster": name,
            "ray.io/group": "headgroup" if head else pod_set,
            "ray.io/node-type": "head" if head else "worker",
        }
    return {}


def _owner(manifest: Mapping[str, Any]) -> JsonDoc:
    meta = _as_dict(manifest.get("metadata"))
    return {
        "apiVersion": str(manifest.get("apiVersion", "")),
        "kind": str(manifest.get("kind", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _container(template_spec: Mapping[str, Any], spec: PodSpec | None) -> JsonDoc:
    containers = template_spec.get("containers") or [{}]
    first = dict(_as_dict(containers[0]))
    out: JsonDoc = {"name": str(first.get("name") or "main")}
    for field in ("image", "command", "args", "workingDir", "env", "resources"):
        if first.get(field) is not None:
            out[field] = first[field]
    if spec is not None and "command" not in out and spec.command:
        out["command"] = list(spec.command)
    return out


def _condition(type_: str, ok: bool, at: str | None, reason: str = "") -> JsonDoc:
    doc: JsonDoc = {"type": type_, "status": "True" if ok else "False"}
    if at:
        doc["lastTransitionTime"] = at
    if reason:
        doc["reason"] = reason
    return doc


def pod_doc(
    namespace: str,
    workload: str,
    manifest: Mapping[str, Any],
    pod: PodStatus | None,
    *,
    name: str,
    pod_set: str,
    node: str,
    restart_count: int = 0,
    spec: PodSpec | None = None,
    host_ip: str = "",
) -> JsonDoc:
    """One ``v1 Pod``: ``pod`` None for a pod not started yet (Pending)."""
    template = template_of(manifest, pod_set)
    tmeta, tspec = _as_dict(template.get("metadata")), _as_dict(template.get("spec"))
    started = rfc3339(pod.started) if pod is not None and pod.started else None
    container = _container(tspec, spec)
    labels = {str(k): str(v) for k, v in _as_dict(tmeta.get("labels")).items()}
    labels.update(_owner_labels(manifest, pod_set))
    grace = tspec.get("terminationGracePeriodSeconds", 30)
    meta: JsonDoc = {
        "name": name,
        "namespace": namespace,
        "uid": str(uuid.uuid5(_UID_SPACE, f"{namespace}/{workload}/{name}/{restart_count}")),
        "labels": labels,
        "ownerReferences": [_owner(manifest)],
    }
    annotations = _as_dict(tmeta.get("annotations"))
    if annotations:
        meta["annotations"] = dict(annotations)
    if started:
        meta["creationTimestamp"] = started
    pod_spec: JsonDoc = {
        "containers": [container],
        "restartPolicy": str(tspec.get("restartPolicy") or "Never"),
        "terminationGracePeriodSeconds": grace,
    }
    for field in ("nodeSelector", "tolerations", "priorityClassName"):
        if tspec.get(field) is not None:
            pod_spec[field] = tspec[field]
    status: JsonDoc = {"qosClass": "BestEffort"}
    if pod is None:
        status["phase"] = "Pending"
        status["conditions"] = [_condition("PodScheduled", False, None, "Unschedulable")]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec,
                "status": status}  # fmt: skip
    pod_spec["nodeName"] = node
    phase = "Running" if pod.phase == "Terminating" else pod.phase
    if pod.phase == "Terminating" and pod.kill_at is not None:
        meta["deletionTimestamp"] = rfc3339(pod.kill_at)
        meta["deletionGracePeriodSeconds"] = grace
    running = phase == "Running"
    state: JsonDoc
    if phase in ("Succeeded", "Failed"):
        code = pod.exit_code if pod.exit_code is not None else 137
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        if started:
            state["terminated"]["startedAt"] = started
    elif phase == "Pending":
        state = {"waiting": {"reason": "ContainerCreating"}}
    else:
        state = {"running": {"startedAt": started} if started else {}}
    status.update(
        {
            "phase": phase,
            "conditions": [
                _condition("PodScheduled", True, started),
                _condition("Initialized", True, started),
                _condition("ContainersReady", running, started),
                _condition("Ready", running, started),
            ],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": str(container.get("image", "")),
                    "imageID": "",
                    "ready": running,
                    "started": running,
                    "restartCount": pod.restarts,
                    "state": state,
                }
            ],
        }
    )
    if started:
        status["startTime"] = started
    if host_ip:
        status["hostIP"] = status["podIP"] = host_ip
        status["podIPs"] = [{"ip": host_ip}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec, "status": status}


def pods_of_run(
    run: WorkloadRun,
    manifest: Mapping[str, Any],
    node: str,
    host_ips: Mapping[str, str],
) -> dict[str, JsonDoc]:
    """``namespace/pod`` -> Pod for every pod of one running workload."""
    namespace, _, workload = run.key.partition("/")
    out = {}
    for p in run.pods:
        where = p.node or node
        out[f"{namespace}/{p.name}"] = pod_doc(
            namespace,
            workload,
            manifest,
            p,
            name=p.name,
            pod_set=p.pod_set or "main",
            node=where,
            restart_count=run.restart_count,
            host_ip=host_ips.get(where, ""),
        )
    return out


def pending_pods(
    key: str, specs: list[PodSpec], manifest: Mapping[str, Any], admitted: float | None = None
) -> dict[str, JsonDoc]:
    """``namespace/pod`` -> Pending Pod for each pod of an admitted workload not started yet
    (created when it was admitted, as Kueue's unsuspended Job creates its pods)."""
    namespace, _, workload = key.partition("/")
    out = {}
    for s in specs:
        doc = pod_doc(
            namespace, workload, manifest, None, name=s.name, pod_set=s.pod_set, node="", spec=s
        )
        if admitted is not None:
            doc["metadata"]["creationTimestamp"] = rfc3339(admitted)
        out[f"{namespace}/{s.name}"] = doc
    return out
