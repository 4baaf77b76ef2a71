"""Request bodies: read with a size cap, parse JSON or YAML, and never let a parse error be a 500.

Bodies over the limit are refused with 413 before they are read in full. YAML is parsed with the
safe loader and refused if it uses aliases (a small body must not expand into a huge object).
Whatever parses is then checked as one JSON document before anything sees it (``check_document``):
finite numbers only (no ``NaN``, ``Infinity``, ``1e400`` or YAML ``.nan``), string keys only,
integers within int64, at most ``MAX_DEPTH`` levels of nesting and ``MAX_OBJECT_BYTES`` encoded, so
a stored object always reads back as JSON and never fails a group-commit batch it shares with
other tenants' writes. Every refusal is a 400 naming the field.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import msgspec
import yaml
from fastapi import Request

from gpuaas.api.subtree_cache import SubtreeCache

DEFAULT_MAX_BODY = 4 * 1024 * 1024
# Kubernetes stores objects of about 1.5 MiB at most (etcd's default request limit).
MAX_OBJECT_BYTES = 1536 * 1024
# No Kubernetes or Kueue object nests anywhere near this deep; deeper bodies are refused before
# any recursive code (YAML construction, encoding, merge patches) sees them.
MAX_DEPTH = 64
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError as exc:
            raise BodyError(400, f"Content-Length {declared!r} is not a number") from exc
        if size > limit:
            raise BodyError(413, f"request body of {size} bytes is over the {limit}-byte limit")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise BodyError(413, f"request body is over the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(raw: bytes, content_type: str | None) -> Any:
    """JSON for ``*json`` types, YAML for ``*yaml`` types; without a type, JSON then YAML."""
    if not raw.strip():
        raise BodyError(400, "the request body is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(400, f"the request body is not UTF-8: {exc}") from exc
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if ctype.endswith("json"):
        return _json(raw, text)
    if ctype.endswith("yaml"):
        return _yaml(text)
    try:
        return _json(raw, text)
    except _NotJson:
        return _yaml(text)


class _NotJson(BodyError):
    """Not JSON syntax at all (an untyped body is then read as YAML); a bad value is not this."""


def _no_constant(name: str) -> Any:
    raise BodyError(400, f"the request body is not valid JSON: {name} is not a number JSON allows")


def _json(raw: bytes, text: str) -> Any:
    """msgspec's decoder (a fraction of ``json``'s cost) for what it takes; anything it refuses
    (malformed JSON, but also ``NaN``, numbers beyond a double, lone surrogates, which ``json``
    reads and the checks below refuse by field) goes through ``json``, so answers and messages
    are ``json``'s. Where both read a body they build the same document."""
    try:
        doc = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        pass
    else:
        check_document(doc, from_msgspec=True)
        return doc
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise _NotJson(400, f"the request body is not valid JSON: {exc}") from exc
    check_document(doc)
    return doc


def _yaml(text: str) -> Any:
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                raise BodyError(400, "YAML aliases are not accepted in request bodies")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise BodyError(400, f"the request body nests deeper than {MAX_DEPTH} levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except (yaml.YAMLError, RecursionError, TypeError, ValueError) as exc:
        # TypeError: a mapping or list used as a key (unhashable); ValueError: bad scalars.
        raise BodyError(400, f"the request body is not valid YAML: {exc}") from exc
    if len(docs) != 1:
        raise BodyError(400, f"the request body must hold exactly one object, not {len(docs)}")
    check_document(docs[0])
    return docs[0]


def _field(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "<root>"


def _check_text(text: str, path: tuple[str | int, ...]) -> None:
    """A lone surrogate (``"\\ud800"``) parses but can never be written out as UTF-8."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise BodyError(400, f"{_field(path)}: a string is not valid Unicode") from None


def check_document(doc: Any, *, from_msgspec: bool = False) -> None:
    """Refuse anything that is not plain, finite, bounded JSON (400 naming the field).

    Walks the document with an explicit stack, so depth cannot exhaust Python's. A document
    msgspec decoded (``from_msgspec``: its numbers are finite and its strings valid, so its JSON
    tells its values apart) skips the top-level fields whose value passed before
    (``subtree_cache``: a batch system's creates share one ``spec``; ``metadata``, which holds
    each object's name, is always walked); the walk visits the fields in the same order, so the
    same field is named."""
    if from_msgspec and type(doc) is dict:
        for key in doc:
            _check_text(key, ())
        for key, value in reversed(doc.items()):  # the order the stack below visits them in
            if key != "metadata" and (type(value) is dict or type(value) is list):
                _CHECKED.get(_CHECKED, key, value, functools.partial(_walk, value, (key,)))
            else:
                _walk(value, (key,))
    else:
        _walk(doc, ())
    size = len(msgspec.json.encode(doc))  # its UTF-8 bytes, as kube-apiserver counts them
    if size > MAX_OBJECT_BYTES:
        raise BodyError(
            413, f"the object is {size} bytes encoded, over the {MAX_OBJECT_BYTES}-byte limit"
        )


def _walk(doc: Any, at: tuple[str | int, ...]) -> bool:
    """``check_document``'s checks of ``doc``, found at path ``at``; True when it passes."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, at)]
    while stack:
        value, path = stack.pop()
        kind = type(value)
        if kind is str:
            _check_text(value, path)
            continue
        if kind is bool or value is None:
            continue
        if kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise BodyError(
                    400, f"{_field(path)}: {value} is out of range for a 64-bit integer"
                )
            continue
        if kind is float:
            if value != value or value in (float("inf"), float("-inf")):
                raise BodyError(400, f"{_field(path)}: {value} is not a finite number")
            continue
        if len(path) >= MAX_DEPTH:
            raise BodyError(
                400, f"{_field(path)}: the request body nests deeper than {MAX_DEPTH} levels"
            )
        if kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise BodyError(
                        400,
                        f"{_field(path)}: key {key!r} is a {type(key).__name__}; "
                        "object keys must be strings",
                    )
                _check_text(key, path)
                stack.append((item, (*path, key)))
        elif kind is list:
            stack.extend((item, (*path, i)) for i, item in enumerate(value))
        else:
            raise BodyError(
                400, f"{_field(path)}: a {type(value).__name__} value is not valid in JSON"
            )
    return True


_CHECKED: SubtreeCache[bool] = SubtreeCache()


def int_param(name: str, raw: str | None) -> int | None:
    """A non-negative integer query parameter (resourceVersion, limit, timeoutSeconds).

    ASCII digits only and within int64, as Kubernetes parses them: ``99999999999999999999999``
    is a 400, not an overflow in the store.
    """
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > _INT64_MAX:
        raise BodyError(400, f"{name} {raw!r} is not a non-negative 64-bit integer")
    return int(raw)
