"""Reading the few protobuf request bodies kubectl sends: its access and identity reviews.

kubectl sends built-in kinds' bodies as ``application/vnd.kubernetes.protobuf`` (``kubectl auth
can-i`` and ``whoami`` create SelfSubjectAccessReview, SelfSubjectRulesReview and
SelfSubjectReview that way) and takes JSON answers. Such a body is the magic ``k8s\\0`` and a
``runtime.Unknown`` envelope (type meta, then the raw message). This module reads the protobuf
wire format (varints and length-delimited fields, nothing else is needed) and turns those three
messages into the JSON documents their routes read, using the field numbers of
``k8s.io/api/authorization/v1`` and ``authentication/v1``. Anything else is a 415, as
kube-apiserver answers a media type a resource does not take. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from gpuaas.api.body import BodyError

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# Field numbers: message -> {number: (json name, nested message or None)}.
_SCHEMA: dict[str, dict[int, tuple[str, str | None]]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", None)},
    "TypeMeta": {1: ("apiVersion", None), 2: ("kind", None)},
    "SelfSubjectAccessReview": {2: ("spec", "SelfSubjectAccessReviewSpec")},
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: ("namespace", None),
        2: ("verb", None),
        3: ("group", None),
        4: ("version", None),
        5: ("resource", None),
        6: ("subresource", None),
        7: ("name", None),
    },
    "NonResourceAttributes": {1: ("path", None), 2: ("verb", None)},
    "SelfSubjectRulesReview": {2: ("spec", "SelfSubjectRulesReviewSpec")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", None)},
    "SelfSubjectReview": {},
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) for each field: an int (varint) or bytes (length-delimited)."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _message(data: bytes, name: str) -> dict[str, Any]:
    schema = _SCHEMA[name]
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema or not isinstance(value, bytes):
            continue
        field, nested = schema[number]
        out[field] = _message(value, nested) if nested else value
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON document of a protobuf-encoded review (SelfSubject*Review)."""
    try:
        if not body.startswith(_MAGIC):
            raise ValueError("no k8s protobuf magic")
        envelope = _message(body[len(_MAGIC) :], "Unknown")
        meta = envelope.get("typeMeta") or {}
        kind = bytes(meta.get("kind", b"")).decode()
        api_version = bytes(meta.get("apiVersion", b"")).decode()
        if kind not in _SCHEMA or not kind.startswith("SelfSubject"):
            raise BodyError(415, f"the server does not take {kind or 'this kind'} as protobuf")
        doc = _strings(_message(bytes(envelope.get("raw", b"")), kind))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(400, f"the request body is not valid protobuf: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, "metadata": {}, **doc}


def _strings(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: _strings(v) if isinstance(v, dict) else bytes(v).decode() for k, v in doc.items()}
