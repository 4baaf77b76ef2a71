"""``v1 Secret`` and ``v1 ConfigMap`` as kube-apiserver accepts them, before they are stored.

A Secret's ``data`` values are base64 (standard alphabet, padded) and a ``stringData`` key is
merged into ``data`` encoded, overriding it, and never stored itself (write-only, as in
Kubernetes). Keys must be valid ConfigMap keys (``[-._a-zA-Z0-9]+``, at most 253 characters). A
ConfigMap's ``data`` holds strings and its ``binaryData`` base64, with no key in both. ``describe``
gives what may be shown of one: key names and sizes, never values. Pure functions: they raise
``ValueError`` naming the object, field and key; the engine turns that into a 422.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from typing import Any

JsonDoc = dict[str, Any]

_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
SECRET_TYPE_DEFAULT = "Opaque"


def _owner(doc: JsonDoc) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')} {meta.get('namespace')}/{meta.get('name')}"


def _check_key(owner: str, field: str, key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 253 or not _KEY.match(key):
        raise ValueError(
            f"{owner}: {field}[{key!r}]: a valid config key must consist of alphanumeric "
            "characters, '-', '_' or '.' (at most 253)"
        )
    if key in (".", ".."):
        raise ValueError(f"{owner}: {field}[{key!r}]: must not be '.' or '..'")
    return key


def _mapping(owner: str, doc: JsonDoc, field: str) -> dict[str, Any]:
    raw = doc.get(field)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{owner}: {field}: must be an object of key: value")
    return raw


def decode(owner: str, field: str, key: str, value: Any) -> bytes:
    """A base64 value, strictly (kube-apiserver refuses anything else with 400)."""
    if not isinstance(value, str):
        raise ValueError(f"{owner}: {field}[{key}]: must be a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"{owner}: {field}[{key}]: illegal base64 data") from None


def normalize_secret(doc: JsonDoc) -> JsonDoc:
    """The Secret as stored: ``stringData`` folded into ``data``, ``type`` defaulted."""
    owner = _owner(doc)
    out = copy.deepcopy(doc)
    data = _mapping(owner, out, "data")
    for key, value in data.items():
        decode(owner, "data", _check_key(owner, "data", key), value)
    strings = _mapping(owner, out, "stringData")
    for key, value in strings.items():
        _check_key(owner, "stringData", key)
        if not isinstance(value, str):
            raise ValueError(f"{owner}: stringData[{key}]: must be a string")
        data[key] = base64.b64encode(value.encode()).decode("ascii")
    out.pop("stringData", None)
    if data:
        out["data"] = data
    else:
        out.pop("data", None)
    kind = out.setdefault("type", SECRET_TYPE_DEFAULT)
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{owner}: type: must be a non-empty string")
    if out.get("immutable") not in (None, True, False):
        raise ValueError(f"{owner}: immutable: must be a boolean")
    return out


def normalize_config_map(doc: JsonDoc) -> JsonDoc:
    owner = _owner(doc)
    out = copy.deepcopy(doc)
    data = _mapping(owner, out, "data")
    for key, value in data.items():
        _check_key(owner, "data", key)
        if not isinstance(value, str):
            raise ValueError(f"{owner}: data[{key}]: must be a string")
    binary = _mapping(owner, out, "binaryData")
    for key, value in binary.items():
        decode(owner, "binaryData", _check_key(owner, "binaryData", key), value)
        if key in data:
            raise ValueError(f"{owner}: binaryData[{key}]: duplicate of key {key} in data")
    if out.get("immutable") not in (None, True, False):
        raise ValueError(f"{owner}: immutable: must be a boolean")
    return out


def data_count(doc: JsonDoc) -> int:
    """kube-apiserver's DATA column: keys in ``data`` (and ``binaryData`` for a ConfigMap)."""
    return len(doc.get("data") or {}) + len(doc.get("binaryData") or {})


def redacted(doc: JsonDoc) -> JsonDoc:
    """A Secret as ``describe`` shows it: each value replaced by its size in bytes."""
    out = {k: v for k, v in doc.items() if k not in ("data", "stringData")}
    sizes = {}
    for key, value in (doc.get("data") or {}).items():
        try:
            sizes[key] = f"{len(base64.b64decode(str(value)))} bytes"
        except (binascii.Error, ValueError):
            sizes[key] = "? bytes"
    if sizes:
        out["data"] = sizes
    return out


__all__ = [
    "SECRET_TYPE_DEFAULT",
    "data_count",
    "decode",
    "normalize_config_map",
    "normalize_secret",
    "redacted",
]
