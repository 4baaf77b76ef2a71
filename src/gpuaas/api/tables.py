"""Server-side printing: ``meta.k8s.io/v1 Table`` for ``kubectl get``, as kube-apiserver prints.

Kueue's kinds print the columns their CRDs declare (``additionalPrinterColumns`` through
``vocab.crds``; the Name column first, ``date`` cells as ages), exactly as the apiextensions
server's table convertor does. Namespace, Job, Event, Pod and Node print what kube-apiserver's own printers
give (``pkg/printers/internalversion``). Rows carry the object's metadata
(``includeObject=Metadata``, the default), the whole object (``Object``, which kubectl asks for
with ``--sort-by``) or nothing (``None``). Pure functions over documents: no engine, no I/O.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpuaas.api.kube_printers import node_printer, pod_printer
from gpuaas.vocab.corev1 import data_count
from gpuaas.vocab.crds import PrinterColumn, resource
from gpuaas.vocab.kinds import Kind
from gpuaas.vocab.ray_status import dashboard_address

JsonDoc = dict[str, Any]

TABLE_MEDIA = "application/json;as=Table;v=v1;g=meta.k8s.io"

_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "priority": 0,
}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


# -- JSONPath, the subset CRD printer columns use ---------------------------------------------

_TOKEN = re.compile(
    r"\.([A-Za-z0-9_\-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*'([^']*)'\)\]"
)


Step = tuple[str | None, str | None, str | None, str | None]


@functools.lru_cache(maxsize=1024)
def _steps(path: str) -> tuple[Step, ...] | None:
    """``path`` cut into its steps once (a printer column's path is read for every row)."""
    steps: list[Step] = []
    pos = 0
    path = path.strip().removeprefix("{").removesuffix("}")
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return None
        pos = m.end()
        field, index, fkey, fval = m.groups()
        steps.append((field, index, fkey, fval))
    return tuple(steps)


@functools.lru_cache(maxsize=1024)
def _plain_fields(path: str) -> tuple[str, ...] | None:
    steps = _steps(path)
    if steps is None or any(step[0] is None for step in steps):
        return None
    return tuple(str(step[0]) for step in steps)


def jsonpath(doc: Any, path: str) -> list[Any]:
    """Values at ``path`` (``.a.b``, ``.a[0]``, ``.a[*].b``, ``.a[?(@.type=='X')].b``)."""
    steps = _steps(path)
    if steps is None:
        return []
    plain = _plain_fields(path)
    if plain is not None:  # .a.b.c, most columns: dict lookups only
        value = doc
        for name in plain:
            if not isinstance(value, dict) or name not in value:
                return []
            value = value[name]
        return [value]
    values = [doc]
    for field, index, fkey, fval in steps:
        nxt: list[Any] = []
        for v in values:
            if field is not None and isinstance(v, dict) and field in v:
                nxt.append(v[field])
            elif index is not None and isinstance(v, list):
                nxt += v if index == "*" else v[int(index) : int(index) + 1]
            elif fkey is not None and isinstance(v, list):
                nxt += [e for e in v if isinstance(e, dict) and _dig(e, fkey) == fval]
        values = nxt
    return values


def _dig(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


# -- ages ---------------------------------------------------------------------------------------


def _parse_ts(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        days = h // 24
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{h // 24 // 365}y"


def age(ts: Any, now: float) -> str:
    t = _parse_ts(ts)
    return "<unknown>" if t is None else human_duration(now - t)


# -- columns and cells per kind ----------------------------------------------------------------

Printer = tuple[list[JsonDoc], Callable[[JsonDoc, float], list[Any]]]


def _col(name: str, type_: str = "string", priority: int = 0, description: str = "") -> JsonDoc:
    return {
        "name": name,
        "type": type_,
        "format": "",
        "description": description,
        "priority": priority,
    }


def _crd_printer(kind: Kind, version: str) -> Printer:
    res = resource(kind)
    cols = res.columns(version)
    # A document stored in another version keeps its own field names (v1beta1 spec.cohort,
    # v1beta2 spec.cohortName): a column falls back to its namesake in the other versions.
    others = [c for v in kind.versions if v != version for c in res.columns(v)]
    defs = [_NAME] + [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in cols
    ]

    def cells(doc: JsonDoc, now: float) -> list[Any]:
        row: list[Any] = [doc["metadata"]["name"]]
        for c in cols:
            row.append(_cell(doc, c, others, now))
        return row

    return defs, cells


def _cell(doc: JsonDoc, c: PrinterColumn, others: Sequence[PrinterColumn], now: float) -> Any:
    found = jsonpath(doc, c.json_path)
    if not found:
        for o in others:
            if o.name == c.name and o.json_path != c.json_path:
                found = jsonpath(doc, o.json_path)
                if found:
                    break
    if not found:
        return None
    value = found[0]
    if c.type == "date":
        return age(value, now)
    if c.type == "integer" and isinstance(value, (int, float)):
        return int(value)
    if c.type == "string" and not isinstance(value, str):
        return ",".join(str(v) for v in found) if len(found) > 1 else str(value)
    return value


def _namespace_printer() -> Printer:
    defs = [_NAME, _col("Status"), _col("Age")]

    def cells(doc: JsonDoc, now: float) -> list[Any]:
        phase = (doc.get("status") or {}).get("phase") or "Active"
        return [doc["metadata"]["name"], phase, age(doc["metadata"].get("creationTimestamp"), now)]

    return defs, cells


def _data_printer(kind: str) -> Printer:
    """kube-apiserver's Secret (NAME TYPE DATA AGE) and ConfigMap (NAME DATA AGE) printers: a
    count of keys, never a value."""
    secret = kind == "Secret"
    defs = [_NAME]
    if secret:
        defs.append(_col("Type"))
    defs += [_col("Data", "integer"), _col("Age")]

    def cells(doc: JsonDoc, now: float) -> list[Any]:
        row: list[Any] = [doc["metadata"]["name"]]
        if secret:
            row.append(str(doc.get("type") or "Opaque"))
        return [*row, data_count(doc), age(doc["metadata"].get("creationTimestamp"), now)]

    return defs, cells


def _has_condition(doc: JsonDoc, type_: str) -> bool:
    conds = (doc.get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conds)


def _any_condition(doc: JsonDoc, type_: str) -> bool:
    conds = (doc.get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ for c in conds)


def _job_printer() -> Printer:
    defs = [
        _NAME,
        _col("Status", description="Status of the job."),
        _col("Completions", description="The completion status of the job."),
        _col("Duration", description="Time required to complete the job."),
        _col("Age"),
        _col("Containers", priority=1),
        _col("Images", priority=1),
        _col("Selector", priority=1),
    ]

    def cells(doc: JsonDoc, now: float) -> list[Any]:
        spec, status = doc.get("spec") or {}, doc.get("status") or {}
        succeeded = int(status.get("succeeded") or 0)
        if spec.get("completions") is not None:
            completions = f"{succeeded}/{spec['completions']}"
        elif int(spec.get("parallelism") or 0) > 1:
            completions = f"{succeeded}/1 of {spec['parallelism']}"
        else:
            completions = f"{succeeded}/1"
        state = "Running"
        for cond, shown in (("Complete", "Complete"), ("Failed", "Failed")):
            if _has_condition(doc, cond):
                state = shown
                break
        else:
            if doc["metadata"].get("deletionTimestamp"):
                state = "Terminating"
            elif _has_condition(doc, "Suspended") or (
                # Under Kueue spec.suspend stays as created: the condition, when there is one,
                # says whether the job controller runs it.
                spec.get("suspend") is True and not _any_condition(doc, "Suspended")
            ):
                state = "Suspended"
        start = _parse_ts(status.get("startTime"))
        end = _parse_ts(status.get("completionTime")) or now
        duration = human_duration(end - start) if start is not None else ""
        pod = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        selector = ((spec.get("selector") or {}).get("matchLabels")) or {}
        return [
            doc["metadata"]["name"],
            state,
            completions,
            duration,
            age(doc["metadata"].get("creationTimestamp"), now),
            ",".join(str(c.get("name", "")) for c in pod),
            ",".join(str(c.get("image", "")) for c in pod),
            ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>",
        ]

    return defs, cells


def _event_printer() -> Printer:
    defs = [
        _col("Last Seen"),
        _col("Type"),
        _col("Reason"),
        _col("Object"),
        _col("Subobject", priority=1),
        _col("Source", priority=1),
        _col("Message"),
        _col("First Seen", priority=1),
        _col("Count", "integer", priority=1),
        {**_NAME, "priority": 1},
    ]

    def cells(doc: JsonDoc, now: float) -> list[Any]:
        obj = doc.get("involvedObject") or doc.get("regarding") or {}
        last = doc.get("lastTimestamp") or doc.get("eventTime")
        return [
            age(last, now),
            doc.get("type", ""),
            doc.get("reason", ""),
            f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
            obj.get("fieldPath", ""),
            (doc.get("source") or {}).get("component", "") or doc.get("reportingController", ""),
            doc.get("message") or doc.get("note", ""),
            age(doc.get("firstTimestamp") or last, now),
            int(doc.get("count") or 1),
            doc["metadata"]["name"],
        ]

    return defs, cells


def _ray_cluster_printer(kind: Kind, version: str) -> Printer:
    """KubeRay's columns, then where the Ray dashboard answers (a gpuaas column: the cluster
    runs on this server's runtime, so its dashboard's address is worth a glance)."""
    defs, cells = _crd_printer(kind, version)
    dashboard = _col("Dashboard", description="The Ray dashboard's address, once the head is up.")

    def with_dashboard(doc: JsonDoc, now: float) -> list[Any]:
        return [*cells(doc, now), dashboard_address(doc.get("status") or {})]

    return [*defs, dashboard], with_dashboard


@functools.lru_cache(maxsize=256)
def printer(kind: Kind | None, version: str) -> Printer:
    """Column definitions and a row function for ``kind`` (None: Event)."""
    if kind is None:
        return _event_printer()
    if kind.kind == "Namespace":
        return _namespace_printer()
    if kind.kind == "Job":
        return _job_printer()
    if kind.kind in ("Secret", "ConfigMap"):
        return _data_printer(kind.kind)
    if kind.kind == "RayCluster":
        return _ray_cluster_printer(kind, version)
    if kind.kind == "Pod":
        return pod_printer(age)
    if kind.kind == "Node":
        return node_printer(age)
    return _crd_printer(kind, version)


def _row_object(doc: JsonDoc, include: str, api_version: str) -> JsonDoc | None:
    if include == "None":
        return None
    if include == "Object":
        return doc
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": doc.get("metadata", {}),
    }


def table(
    kind: Kind | None,
    version: str,
    docs: Sequence[JsonDoc],
    *,
    include: str = "Metadata",
    metadata: JsonDoc | None = None,
    now: float | None = None,
) -> JsonDoc:
    """A ``Table`` of ``docs`` (each already in the asked apiVersion)."""
    defs, cells = printer(kind, version)
    at = time.time() if now is None else now
    rows = []
    for d in docs:
        row: JsonDoc = {"cells": cells(d, at)}
        obj = _row_object(d, include, str(d.get("apiVersion", "")))
        if obj is not None:
            row["object"] = obj
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata or {},
        "columnDefinitions": defs,
        "rows": rows,
    }
