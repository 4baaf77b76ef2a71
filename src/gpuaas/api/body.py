"""Request bodies: read with a size cap, parse JSON or YAML, and never let a parse error be a 500.

Bodies over the limit are refused with 413 before they are read in full. YAML is parsed with the
safe loader and refused if it uses aliases (a small body must not expand into a huge object).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from fastapi import Request

DEFAULT_MAX_BODY = 4 * 1024 * 1024

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
        return _json(text)
    if ctype.endswith("yaml"):
        return _yaml(text)
    try:
        return _json(text)
    except BodyError:
        return _yaml(text)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BodyError(400, f"the request body is not valid JSON: {exc}") from exc


def _yaml(text: str) -> Any:
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                raise BodyError(400, "YAML aliases are not accepted in request bodies")
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except (yaml.YAMLError, RecursionError) as exc:
        raise BodyError(400, f"the request body is not valid YAML: {exc}") from exc
    if len(docs) != 1:
        raise BodyError(400, f"the request body must hold exactly one object, not {len(docs)}")
    try:
        json.dumps(docs[0])  # dates and other non-JSON scalars are refused here, not stored
    except (TypeError, ValueError) as exc:
        raise BodyError(400, f"the request body has a value JSON cannot hold: {exc}") from exc
    return docs[0]
