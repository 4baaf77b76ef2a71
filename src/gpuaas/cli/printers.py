"""How the CLI lays out what it prints: kubectl's aligned columns and ``describe``'s sections.

Which columns a kind has is the server's business (its ``meta.k8s.io/v1 Table``: Kueue's printer
columns, kube-apiserver's, KubeRay's; ``api.tables``): ``cli.reading`` gets the Table and hands
the header and cells here. Pure formatting: no network, no state.
"""

from __future__ import annotations

import json
import time
from typing import Any

from gpuaas.vocab import corev1
from gpuaas.vocab.render import parse_rfc3339

JsonDoc = dict[str, Any]


def duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if s < 36000 else f"{s // 3600}h"
    return f"{s // 86400}d"


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
