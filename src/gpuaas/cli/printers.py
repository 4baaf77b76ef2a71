"""How ``gpuaas get`` and ``describe`` print objects: Kueue's printer columns and kubectl's layout.

Workloads show NAME QUEUE RESERVED IN ADMITTED AGE (FINISHED with ``-o wide``), ClusterQueues
NAME COHORT PENDING WORKLOADS ADMITTED WORKLOADS, as Kueue's CRDs declare; RayClusters KubeRay's
columns and the Ray dashboard's address. ``-A`` puts NAMESPACE first. Pure formatting: no
network, no state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from gpuaas.vocab import corev1
from gpuaas.vocab.kinds import Kind
from gpuaas.vocab.ray_status import dashboard_address
from gpuaas.vocab.render import parse_rfc3339

JsonDoc = dict[str, Any]
Column = tuple[str, Callable[[JsonDoc], str]]


def age(doc: JsonDoc, now: float | None = None) -> str:
    ts = parse_rfc3339(str(doc.get("metadata", {}).get("creationTimestamp", "")))
    if ts is None:
        return "<unknown>"
    return duration((now or time.time()) - ts)


def duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if s < 36000 else f"{s // 3600}h"
    return f"{s // 86400}d"


def condition(doc: JsonDoc, type_: str) -> str:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status", ""))
    return ""


def _get(doc: JsonDoc, *path: str) -> str:
    cur: Any = doc
    for p in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    return "" if cur is None else str(cur)


def _name(d: JsonDoc) -> str:
    return _get(d, "metadata", "name")


def columns(kind: Kind, wide: bool) -> list[Column]:
    k = kind.kind
    if k == "Workload":
        cols: list[Column] = [
            ("NAME", _name),
            ("QUEUE", lambda d: _get(d, "spec", "queueName")),
            ("RESERVED IN", lambda d: _get(d, "status", "admission", "clusterQueue")),
            ("ADMITTED", lambda d: condition(d, "Admitted")),
        ]
        if wide:
            cols.append(("FINISHED", lambda d: condition(d, "Finished")))
        return [*cols, ("AGE", age)]
    if k == "ClusterQueue":
        cols = [("NAME", _name), ("COHORT", lambda d: _get(d, "spec", "cohort"))]
        if wide:
            cols.append(("STRATEGY", lambda d: _get(d, "spec", "queueingStrategy")))
        return [
            *cols,
            ("PENDING WORKLOADS", lambda d: _get(d, "status", "pendingWorkloads")),
            ("ADMITTED WORKLOADS", lambda d: _get(d, "status", "admittedWorkloads")),
        ]
    if k == "LocalQueue":
        return [
            ("NAME", _name),
            ("CLUSTERQUEUE", lambda d: _get(d, "spec", "clusterQueue")),
            ("PENDING WORKLOADS", lambda d: _get(d, "status", "pendingWorkloads")),
            ("ADMITTED WORKLOADS", lambda d: _get(d, "status", "admittedWorkloads")),
        ]
    if k == "WorkloadPriorityClass":
        return [("NAME", _name), ("VALUE", lambda d: _get(d, "value")), ("AGE", age)]
    if k == "Cohort":
        return [("NAME", _name), ("PARENT", lambda d: _get(d, "spec", "parentName")), ("AGE", age)]
    if k == "Namespace":
        return [("NAME", _name), ("STATUS", lambda d: "Active"), ("AGE", age)]
    if k == "RayCluster":  # KubeRay's printer columns, then where the dashboard is
        cols = [
            ("NAME", _name),
            ("DESIRED WORKERS", lambda d: _get(d, "status", "desiredWorkerReplicas")),
            ("AVAILABLE WORKERS", lambda d: _get(d, "status", "availableWorkerReplicas")),
            ("CPUS", lambda d: _get(d, "status", "desiredCPU")),
            ("MEMORY", lambda d: _get(d, "status", "desiredMemory")),
            ("GPUS", lambda d: _get(d, "status", "desiredGPU")),
            ("STATUS", lambda d: _get(d, "status", "state")),
            ("AGE", age),
        ]
        if wide:
            cols.append(("HEAD POD IP", lambda d: _get(d, "status", "head", "podIP")))
        return [*cols, ("DASHBOARD", lambda d: dashboard_address(d.get("status") or {}))]
    if kind.job:
        label = "kueue.x-k8s.io/queue-name"
        return [
            ("NAME", _name),
            ("QUEUE", lambda d: (d.get("metadata", {}).get("labels") or {}).get(label, "")),
            ("AGE", age),
        ]
    return [("NAME", _name), ("AGE", age)]


def rows(kind: Kind, docs: list[JsonDoc], *, all_ns: bool, wide: bool) -> list[list[str]]:
    cols = columns(kind, wide)
    out = []
    for d in docs:
        row = [fn(d) for _, fn in cols]
        if all_ns:
            row.insert(0, _get(d, "metadata", "namespace"))
        out.append(row)
    return out


def header(kind: Kind, *, all_ns: bool, wide: bool) -> list[str]:
    names = [n for n, _ in columns(kind, wide)]
    return ["NAMESPACE", *names] if all_ns else names


def table(head: list[str], body: list[list[str]], widths: list[int] | None = None) -> str:
    widths = widths or [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
        for r in [head, *body]
    ]
    return "\n".join(lines)


def describe(doc: JsonDoc, events: list[JsonDoc], now: float | None = None) -> str:
    meta = doc.get("metadata", {})
    lines = [
        f"Name:         {meta.get('name', '')}",
        *([f"Namespace:    {meta['namespace']}"] if meta.get("namespace") else []),
        f"Labels:       {_kv(meta.get('labels'))}",
        f"API Version:  {doc.get('apiVersion', '')}",
        f"Kind:         {doc.get('kind', '')}",
        f"Created:      {meta.get('creationTimestamp', '')}",
    ]
    for ref in meta.get("ownerReferences") or []:
        lines.append(f"Owned by:     {ref.get('kind')} {ref.get('name')}")
    if doc.get("kind") == "Secret":  # sizes only, as kubectl describe: never a value
        lines.append(f"Type:         {doc.get('type', 'Opaque')}")
        lines.append("Data:")
        lines += [f"  {k}: {v}" for k, v in (corev1.redacted(doc).get("data") or {}).items()]
    elif doc.get("kind") == "ConfigMap":
        lines.append("Data:")
        lines += [f"  {k}: {_short(v)}" for k, v in (doc.get("data") or {}).items()]
    spec = doc.get("spec")
    if isinstance(spec, dict):
        lines.append("Spec:")
        lines += [f"  {k}: {_short(v)}" for k, v in spec.items()]
    status = doc.get("status") or {}
    adm = status.get("admission")
    conds = status.get("conditions") or []
    if adm or conds or status:
        lines.append("Status:")
    if adm:
        lines.append(f"  Admission:\n    Cluster Queue:  {adm.get('clusterQueue')}")
        for ps in adm.get("podSetAssignments", []):
            lines.append(f"    Pod Set {ps.get('name')}: count {ps.get('count')}")
            lines.append(f"      Flavors:        {_kv(ps.get('flavors'))}")
            lines.append(f"      Resource Usage: {_kv(ps.get('resourceUsage'))}")
    if conds:
        lines.append("  Conditions:")
        head = ["Type", "Status", "Reason", "Last Transition", "Message"]
        body = [
            [
                c.get("type", ""),
                c.get("status", ""),
                c.get("reason", ""),
                c.get("lastTransitionTime", ""),
                c.get("message", ""),
            ]
            for c in conds
        ]
        lines += ["    " + ln for ln in table(head, body).splitlines()]
    for k, v in status.items():
        if k not in ("admission", "conditions"):
            lines.append(f"  {k}: {_short(v)}")
    lines.append("Events:" if events else "Events:       <none>")
    if events:
        head = ["Type", "Reason", "Age", "From", "Message"]
        body = []
        for e in events:
            ts = parse_rfc3339(str(e.get("lastTimestamp", "")))
            when = duration((now or time.time()) - ts) if ts is not None else ""
            body.append(
                [e.get("type", ""), e.get("reason", ""), when, "gpuaas", e.get("message", "")]
            )
        lines += ["  " + ln for ln in table(head, body).splitlines()]
    return "\n".join(lines)


def _kv(m: Any) -> str:
    if not m:
        return "<none>"
    return ", ".join(f"{k}={v}" for k, v in m.items()) if isinstance(m, dict) else str(m)


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    return text if len(text) <= 160 else text[:157] + "..."
