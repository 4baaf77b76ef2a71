"""List narrowing as kube-apiserver does it: label selectors and field selectors.

``labelSelector`` takes Kubernetes' syntax (``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a``, ``!a``). ``fieldSelector`` takes ``=``, ``==`` and ``!=`` on the fields
Kubernetes supports for the kind: ``metadata.name`` and ``metadata.namespace`` for custom
resources, a few more for Namespace, Job and Event; any other field is a 400, with
kube-apiserver's message (``limit``/``continue`` pages: ``api.list_pages``). Pure functions over
documents and query strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuaas.api.body import BodyError

JsonDoc = dict[str, Any]
Predicate = Callable[[JsonDoc], bool]


def _path(dotted: str, default: Any = "") -> Callable[[JsonDoc], Any]:
    parts = dotted.split(".")

    def get(doc: JsonDoc) -> Any:
        value: Any = doc
        for p in parts:
            value = value.get(p) if isinstance(value, dict) else None
        return default if value is None else value

    return get


_OBJECT = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

# Fields each kind can be selected on, beyond metadata.name/metadata.namespace.
_EXTRA_FIELDS: dict[str, dict[str, Callable[[JsonDoc], Any]]] = {
    "Namespace": {"status.phase": _path("status.phase", "Active")},
    "Job": {"status.successful": _path("status.succeeded", 0)},
    "Pod": {
        "spec.nodeName": _path("spec.nodeName"),
        "spec.restartPolicy": _path("spec.restartPolicy"),
        "spec.schedulerName": _path("spec.schedulerName", "default-scheduler"),
        "spec.serviceAccountName": _path("spec.serviceAccountName", "default"),
        "spec.hostNetwork": _path("spec.hostNetwork", "false"),
        "status.phase": _path("status.phase"),
        "status.podIP": _path("status.podIP"),
        "status.nominatedNodeName": _path("status.nominatedNodeName"),
    },
    "Node": {"spec.unschedulable": _path("spec.unschedulable", "false")},
    "Event": {
        **{f"involvedObject.{f}": _path(f"involvedObject.{f}") for f in _OBJECT},
        **{f"regarding.{f}": _path(f"involvedObject.{f}") for f in _OBJECT},
        "reason": _path("reason"),
        "type": _path("type"),
        "source": _path("source.component"),
        "reportingComponent": _path("reportingComponent"),
    },
}


@dataclass(frozen=True, slots=True)
class _Test:
    """One requirement: ``get(doc)`` compared with ``values`` (``op``: in, notin, exists, !)."""

    get: Callable[[JsonDoc], Any]
    op: str
    values: frozenset[str] = frozenset()

    def __call__(self, doc: JsonDoc) -> bool:
        v = self.get(doc)
        if self.op == "exists":
            return v is not None
        if self.op == "!":
            return v is None
        inside = v is not None and str(v) in self.values
        return inside if self.op == "in" else not inside


def _label(key: str) -> Callable[[JsonDoc], Any]:
    def get(doc: JsonDoc) -> Any:
        return ((doc.get("metadata") or {}).get("labels") or {}).get(key)

    return get


def _split(raw: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in raw:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


_SET = re.compile(r"^(\S+)\s+(in|notin)\s+\((.*)\)$")
_CMP = re.compile(r"^([^=!\s]+)\s*(==|=|!=)\s*(.*)$")


def label_selector(raw: str) -> Predicate:
    """A predicate over documents for Kubernetes' label selector syntax."""
    tests: list[_Test] = []
    for part in _split(raw):
        m = _SET.match(part)
        if m:
            values = frozenset(v.strip() for v in m[3].split(",") if v.strip())
            tests.append(_Test(_label(m[1]), m[2], values))
        elif m := _CMP.match(part):
            op = "notin" if m[2] == "!=" else "in"
            tests.append(_Test(_label(m[1]), op, frozenset({m[3].strip()})))
        elif re.fullmatch(r"![A-Za-z0-9_./\-]+", part):
            tests.append(_Test(_label(part[1:]), "!"))
        elif re.fullmatch(r"[A-Za-z0-9_./\-]+", part):
            tests.append(_Test(_label(part), "exists"))
        else:
            raise BodyError(400, f"unable to parse requirement: {part!r}: invalid label selector")
    return lambda doc: all(t(doc) for t in tests)


def field_selector(raw: str, kind: str) -> Predicate:
    """A predicate for ``fieldSelector`` on ``kind``; an unsupported field is a 400."""
    getters: dict[str, Callable[[JsonDoc], Any]] = {
        "metadata.name": _path("metadata.name"),
        "metadata.namespace": _path("metadata.namespace"),
        **_EXTRA_FIELDS.get(kind, {}),
    }
    tests: list[_Test] = []
    for part in _split(raw):
        m = _CMP.match(part)
        if m is None:
            raise BodyError(400, f"invalid selector: {part!r}; can't understand {part!r}")
        getter = getters.get(m[1])
        if getter is None:
            known = '", "'.join(sorted(getters))
            raise BodyError(400, f'"{m[1]}" is not a known field selector: only "{known}"')
        op = "notin" if m[2] == "!=" else "in"
        tests.append(_Test(getter, op, frozenset({m[3].strip()})))
    return lambda doc: all(t(doc) for t in tests)


def wanted(name: str, raw: str) -> str | None:
    """The value ``raw`` selects ``name`` as equal to, if any (to narrow a query early)."""
    for part in _split(raw):
        m = _CMP.match(part)
        if m is not None and m[1] == name and m[2] != "!=":
            return m[3].strip()
    return None
