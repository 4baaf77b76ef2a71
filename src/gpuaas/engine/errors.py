"""Errors the engine raises for a request, each with the HTTP status the API answers with.

The API maps them one to one; every message names the object (kind namespace/name) and the reason.
"""

from __future__ import annotations


class EngineError(Exception):
    status = 500
    reason = "InternalError"


class NotFound(EngineError):
    status = 404
    reason = "NotFound"


class AlreadyExists(EngineError):
    status = 409
    reason = "AlreadyExists"


class Conflict(EngineError):
    status = 409
    reason = "Conflict"


class Invalid(EngineError):
    status = 422
    reason = "Invalid"


class Unavailable(EngineError):
    status = 503
    reason = "ServiceUnavailable"


class BadRequest(EngineError):
    """A mutating admission webhook could not handle the object (its ``Errored(400)``)."""

    status = 400
    reason = "BadRequest"


class Denied(EngineError):
    """A validating admission webhook denied the object (its ``Denied``)."""

    status = 403
    reason = "Forbidden"
