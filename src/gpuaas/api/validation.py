"""``fieldValidation`` as kube-apiserver honours it: unknown fields against the kind's schema.

``Strict`` refuses a document with a field its schema does not know (400, ``strict decoding
error: unknown field "spec.foo"``), ``Warn`` (the default) accepts it and answers a ``Warning:
299`` header per field, which kubectl prints, ``Ignore`` says nothing. Schemas come from
``vocab.crds`` (Kueue's CRDs); ``x-kubernetes-preserve-unknown-fields`` and
``additionalProperties`` keep a subtree open, and ``metadata`` is checked against ObjectMeta's
fields. Pure: a document and a schema in, field paths out.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuaas.api.body import BodyError
from gpuaas.api.kube_openapi import object_meta_schema
from gpuaas.api.subtree_cache import SubtreeCache
from gpuaas.vocab.crds import resource
from gpuaas.vocab.kinds import Kind

JsonDoc = dict[str, Any]
MODES = ("Strict", "Warn", "Ignore")


def unknown_fields(
    value: Any,
    schema: JsonDoc,
    path: str = "",
    *,
    cache: SubtreeCache[tuple[str, ...]] | None = None,
) -> list[str]:
    """Paths (``spec.foo``, ``spec.items[0].bar``) of fields ``schema`` does not declare.

    With ``cache`` (a document's root only), each declared top-level field's paths are kept by
    its value (``subtree_cache``): a batch system's creates share one ``spec``."""
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            where = f"{path}.{key}" if path else key
            if props is not None and key in props:
                if cache is None or key == "metadata":  # each object's own: never kept
                    out += unknown_fields(sub, props[key], where)
                else:
                    walk = functools.partial(_unknown_tuple, sub, props[key], where)
                    out += cache.get(schema, where, sub, walk)
            elif isinstance(extra, dict):
                out += unknown_fields(sub, extra, where)
            elif props is not None and extra is not True:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


def _unknown_tuple(value: Any, schema: JsonDoc, path: str) -> tuple[str, ...]:
    return tuple(unknown_fields(value, schema, path))


_UNKNOWN: SubtreeCache[tuple[str, ...]] = SubtreeCache()


def check(kind: Kind, version: str, doc: Any, mode: str | None) -> list[str]:
    """Warnings for ``doc`` under ``mode``; raises a 400 for Strict, as kube-apiserver."""
    mode = mode or "Warn"
    if mode not in MODES:
        raise BodyError(400, f'fieldValidation "{mode}": must be one of Strict, Warn or Ignore')
    if mode == "Ignore" or not isinstance(doc, dict):
        return []
    unknown = unknown_fields(doc, _checked_schema(kind, version), cache=_UNKNOWN)
    if not unknown:
        return []
    if mode == "Strict":
        fields = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise BodyError(400, f"strict decoding error: {fields}")
    return [f'unknown field "{u}"' for u in unknown]


@functools.cache
def _checked_schema(kind: Kind, version: str) -> JsonDoc:
    """The kind's schema with ObjectMeta's fields under ``metadata``, built once per kind and
    version (every create and replace checks against it; ``unknown_fields`` only reads it)."""
    schema = dict(resource(kind).schema(version))
    props = dict(schema.get("properties") or {})
    props["metadata"] = object_meta_schema()
    return {**schema, "properties": props}


def warning_headers(warnings: list[str]) -> list[tuple[str, str]]:
    """RFC 7234 Warning headers (code 299); a header is latin-1, so anything beyond printable
    ASCII in a message (a field name from the body) is escaped, never sent raw."""
    out = []
    for w in warnings:
        text = "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode() for c in w)
        out.append(("Warning", '299 - "' + text.replace('"', '\\"') + '"'))
    return out
