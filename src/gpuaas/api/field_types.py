"""What server-side apply needs to know about a kind's fields: which object keys are a struct's
fields and which are a map's keys, and how each list merges (atomic, a set, or a map keyed by
some of its items' fields), as structured-merge-diff reads them from a schema.

Kueue's kinds take this from their CRDs' ``openAPIV3Schema`` (``x-kubernetes-list-type``,
``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type``; a CRD list with no list type is
atomic). The built-in kinds (and Ray's, whose CRDs are not vendored) take it from the strategic
merge table (``strategic_merge.PATCH_META``: a merge key makes a keyed list, a merged primitive
list a set) plus the map-typed fields named here; every other object is a struct and every
other list atomic, as in their Go types. ``metadata`` is ObjectMeta for every kind. Pure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from gpuaas.api import strategic_merge
from gpuaas.vocab.crds import resource
from gpuaas.vocab.kinds import Kind

JsonDoc = dict[str, Any]

_STRING_MAP: JsonDoc = {"type": "object", "additionalProperties": {"type": "string"}}
OBJECT_META: JsonDoc = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "generateName": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "finalizers": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-list-type": "set",
        },
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object"},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
        },
        "deletionGracePeriodSeconds": {"type": "integer"},
    },
}

# Fields of the built-in kinds whose Go type is a map (map[string]...), not a struct.
_BUILTIN_MAPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Job": (
        ("spec", "selector", "matchLabels"),
        ("spec", "template", "spec", "nodeSelector"),
        ("spec", "template", "spec", "overhead"),
        *(
            ("spec", "template", "spec", c, "resources", r)
            for c in ("containers", "initContainers")
            for r in ("limits", "requests")
        ),
    ),
    "Secret": (("data",), ("stringData",)),
    "ConfigMap": (("data",), ("binaryData",)),
}


@dataclass
class _Node:
    """A schema node of a built-in kind: its fields, how it lists, whether it is a map."""

    children: dict[str, _Node] = field(default_factory=dict)
    list_keys: tuple[str, ...] | None = None  # keyed list
    is_set: bool = False
    is_map: bool = False

    def at(self, path: tuple[str, ...]) -> _Node:
        node = self
        for part in path:
            node = node.children.setdefault(part, _Node())
        return node

    def schema(self) -> JsonDoc:
        out: JsonDoc = {"x-gpuaas-builtin": True}
        if self.list_keys is not None or self.is_set:
            out["x-kubernetes-list-type"] = "set" if self.is_set else "map"
            if self.list_keys is not None:
                out["x-kubernetes-list-map-keys"] = list(self.list_keys)
            out["items"] = {"x-gpuaas-builtin": True, "x-gpuaas-children": self._kids()}
            return out
        if self.is_map:
            out["additionalProperties"] = {"x-gpuaas-builtin": True}
        out["x-gpuaas-children"] = self._kids()
        return out

    def _kids(self) -> JsonDoc:
        return {k: v.schema() for k, v in self.children.items()}


def _builtin_schema(kind: str) -> JsonDoc:
    root = _Node()
    for path, meta in strategic_merge.PATCH_META.get(kind, {}).items():
        if path[0] == "metadata":
            continue  # ObjectMeta's own schema below
        node = root.at(path)
        if meta.key is None:
            node.is_set = True
        else:
            node.list_keys = (meta.key,)
    for path in _BUILTIN_MAPS.get(kind, ()):
        root.at(path).is_map = True
    return root.schema()


@functools.cache
def schema_of(kind: Kind, version: str) -> JsonDoc:
    """The root schema server-side apply walks for ``kind`` at ``version``: built once per kind
    and version (every write's ``patching.Writer`` asks for it) and only ever read."""
    res = resource(kind)
    if kind.group == "kueue.x-k8s.io":
        base = dict(res.schema(version))
    else:
        base = _builtin_schema(kind.kind)
    props = dict(base.get("properties") or {})
    kids = dict(base.get("x-gpuaas-children") or {})
    if "properties" in base:
        props["metadata"] = OBJECT_META
        return {**base, "properties": props}
    kids["metadata"] = OBJECT_META
    return {**base, "x-gpuaas-children": kids}


def declared(node: JsonDoc, key: str) -> bool:
    """Whether ``key`` is a struct field of ``node`` (else a map key)."""
    props = node.get("properties")
    if props is not None:
        return key in props
    # A built-in struct: every key is a field; an open CRD object: every key a map key.
    return not ("additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields"))


def child(node: JsonDoc, key: str) -> JsonDoc:
    for name in ("properties", "x-gpuaas-children"):
        sub = (node.get(name) or {}).get(key)
        if isinstance(sub, dict):
            return sub
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if node.get("x-gpuaas-builtin"):
        return {"x-gpuaas-builtin": True}
    return {"x-kubernetes-preserve-unknown-fields": True} if not node.get("properties") else {}


def items(node: JsonDoc) -> JsonDoc:
    sub = node.get("items")
    if isinstance(sub, dict):
        return sub
    return {"x-gpuaas-builtin": True} if node.get("x-gpuaas-builtin") else {}


def list_type(node: JsonDoc) -> tuple[str, tuple[str, ...]]:
    """``("map", keys)``, ``("set", ())`` or ``("atomic", ())``."""
    kind = node.get("x-kubernetes-list-type")
    if kind == "map":
        return "map", tuple(node.get("x-kubernetes-list-map-keys") or ())
    if kind == "set":
        return "set", ()
    return "atomic", ()


def atomic_map(node: JsonDoc) -> bool:
    return node.get("x-kubernetes-map-type") == "atomic"
