"""Kubernetes ``v1 Status`` for every error: reason, code, message and details, as kubectl reads.

kubectl prints ``Error from server (<reason>): <message>`` and picks its exit code from them, so
messages about a named object follow kube-apiserver's form (``clusterqueues.kueue.x-k8s.io "x"
not found``), with ``details`` naming the object. ``KubeError`` is raised by routes that know the
object; ``status_response`` shapes any error. No state, no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.responses import JSONResponse

from gpuaas.vocab.kinds import Kind

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class KubeError(Exception):
    """An error answered as a Status with ``details`` (the object it is about)."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def resource_name(kind: Kind) -> str:
    """``clusterqueues.kueue.x-k8s.io``, or ``namespaces`` for the core group."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def details(kind: Kind, name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"group": kind.group, "kind": kind.plural}
    if name:
        out["name"] = name
    return out


def not_found(kind: Kind, name: str) -> KubeError:
    return KubeError(
        404, "NotFound", f'{resource_name(kind)} "{name}" not found', details(kind, name)
    )


def already_exists(kind: Kind, name: str) -> KubeError:
    return KubeError(
        409, "AlreadyExists", f'{resource_name(kind)} "{name}" already exists', details(kind, name)
    )


def conflict(kind: Kind, name: str) -> KubeError:
    """A write on a stale resourceVersion, in kube-apiserver's words (kubectl retries on it)."""
    return KubeError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource_name(kind)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        details(kind, name),
    )


def invalid(kind: Kind, name: str, message: str) -> KubeError:
    """A refused object in kube-apiserver's form (``Kind.group "name" is invalid: field: why``)
    with the field as a cause, so kubectl prints ``The Kind "name" is invalid: ...``."""
    # The engine names the object first (``Kind ns/name: ``); the Status names it already.
    named = re.match(rf"{re.escape(kind.kind)} (?:[^ /]+/)?{re.escape(name)}: ", message)
    if named:
        message = message[named.end() :]
    field, sep, why = message.partition(": ")
    cause: dict[str, Any] = {"reason": "FieldValueInvalid", "message": message}
    if sep and " " not in field:
        cause = {"reason": "FieldValueInvalid", "message": f"Invalid value: {why}", "field": field}
    qualified = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
    info = {"group": kind.group, "kind": kind.kind, "name": name, "causes": [cause]}
    return KubeError(422, "Invalid", f'{qualified} "{name}" is invalid: {message}', info)


def status_doc(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        doc["details"] = details
    return doc


def status_response(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
) -> JSONResponse:
    return JSONResponse(status_doc(code, message, reason, details), status_code=code)
