"""PATCH as kube-apiserver answers it: the body's media type picks the patch.

- ``application/merge-patch+json``: JSON merge patch (RFC 7386);
- ``application/json-patch+json``: JSON patch (RFC 6902, the ``jsonpatch`` library), ``test``
  operations included; a malformed patch is a 400, one that does not apply a 422;
- ``application/strategic-merge-patch+json``: strategic merge (``strategic_merge``) for the
  built-in kinds; a custom resource (Kueue's, Ray's) answers 415 UnsupportedMediaType, as
  kube-apiserver does for CRDs;
- ``application/apply-patch+yaml``: server-side apply (``managed_fields.apply``), which needs
  ``fieldManager`` and honours ``force``.

Every other write records field ownership as an Update (``managed_fields.record_update``) under
the request's ``fieldManager`` (by default the User-Agent's product, as kube-apiserver names it).
Each patch is turned into a function of the stored object that the engine runs under its lock
(``Engine.write``), so the read and the write are one step. No I/O here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import jsonpatch
import jsonpointer
import yaml

from gpuaas.api import field_types, managed_fields, strategic_merge
from gpuaas.api.body import check_document
from gpuaas.api.status import KubeError, details, resource_name
from gpuaas.engine.documents import merge_patch
from gpuaas.vocab.kinds import Kind

JsonDoc = dict[str, Any]
Compute = Callable[[JsonDoc | None], JsonDoc]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
_MAX_MANAGER = 128


def media_types(kind: Kind) -> list[str]:
    """The patch types ``kind`` accepts, in kube-apiserver's order."""
    out = [JSON_PATCH, MERGE]
    if strategic_merge.supports(kind.kind):
        out.append(STRATEGIC)
    return [*out, APPLY]


def patch_type(kind: Kind, content_type: str | None) -> str:
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    accepted = media_types(kind)
    if ctype not in accepted:
        raise KubeError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )
    return ctype


def parse(ptype: str, raw: bytes) -> Any:
    """The patch body: YAML for an apply, JSON otherwise; checked as any body is."""
    try:
        text = raw.decode("utf-8")
        body = yaml.safe_load(text) if ptype == APPLY else json.loads(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise KubeError(400, "BadRequest", f"the patch is not valid: {exc}") from None
    check_document(body)
    return body


def field_manager(query: dict[str, str], user_agent: str, ptype: str | None) -> str:
    manager = query.get("fieldManager", "")
    if not manager and ptype == APPLY:
        raise KubeError(400, "BadRequest", "fieldManager is required for apply requests")
    if len(manager) > _MAX_MANAGER:
        raise KubeError(
            422, "Invalid", f"fieldManager: Too long: may not be more than {_MAX_MANAGER} bytes"
        )
    if not manager:  # kube-apiserver: the User-Agent's product, up to the first "/"
        manager = (user_agent.split("/", 1)[0] or "unknown")[:_MAX_MANAGER]
    return manager


class Writer:
    """How one request's write is computed: its kind, version, manager and clock."""

    def __init__(self, kind: Kind, version: str, manager: str, now: Callable[[], str]) -> None:
        self.kind, self.version, self.manager, self.now = kind, version, manager, now
        self.api_version = f"{kind.group}/{version}" if kind.group else version
        self.schema = field_types.schema_of(kind, version)

    def updated(self, old: JsonDoc | None, new: JsonDoc) -> JsonDoc:
        """``new`` with ownership recorded as this manager's Update over ``old``."""
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            return new  # refused by the engine's checks, with the field named
        base = None
        given = (new.get("metadata") or {}).get("managedFields")
        if isinstance(given, list) and given:
            # As kube-apiserver: managedFields the request sets replace the stored ones (kubectl
            # moves client-side apply's fields to its server-side manager so), ``[{}]`` resets.
            base = [e for e in managed_fields.entries_of(new) if e.fields]
        return managed_fields.record_update(
            old, new, self.manager, self.api_version, self.now(), self.schema, True, base=base
        )

    def patch(self, name: str, ptype: str, body: Any, force: bool) -> Compute:
        """The function of the stored object that this patch is."""
        where = f'{resource_name(self.kind)} "{name}"'

        def compute(old: JsonDoc | None) -> JsonDoc:
            if ptype == APPLY:
                return self._apply(name, old, body, force)
            assert old is not None  # Engine.write refuses a missing object for a patch
            return self.updated(old, self._patched(where, old, ptype, body))

        return compute

    def _patched(self, where: str, old: JsonDoc, ptype: str, body: Any) -> JsonDoc:
        if ptype == MERGE:
            out = merge_patch(copy.deepcopy(old), body)
        elif ptype == STRATEGIC:
            if not isinstance(body, dict):
                raise KubeError(400, "BadRequest", f"{where}: a strategic merge patch must be "
                                "an object")  # fmt: skip
            try:
                out = strategic_merge.apply(self.kind.kind, old, body)
            except strategic_merge.PatchError as exc:
                raise KubeError(422, "Invalid", f"{where}: {exc}") from None
        else:
            out = _json_patch(where, old, body)
        if not isinstance(out, dict):
            raise KubeError(422, "Invalid", f"{where}: the patched object must be an object")
        return out

    def _apply(self, name: str, old: JsonDoc | None, body: Any, force: bool) -> JsonDoc:
        if not isinstance(body, dict):
            raise KubeError(400, "BadRequest", f'{resource_name(self.kind)} "{name}": '
                            "an applied configuration must be an object")  # fmt: skip
        for field in ("apiVersion", "kind"):
            if not body.get(field):
                raise KubeError(400, "BadRequest", f"{field} must be set in an applied object")
        if not isinstance(body.get("metadata", {}), dict):
            raise KubeError(400, "BadRequest", "metadata must be an object in an applied object")
        try:
            return managed_fields.apply(
                old, body, self.manager, self.api_version, self.now(), self.schema, True,
                force=force,
            )  # fmt: skip
        except managed_fields.ApplyConflict as exc:
            info = details(self.kind, name)
            info["causes"] = [
                {"reason": "FieldManagerConflict", "message": f"conflict with {c.manager}",
                 "field": c.path} for c in exc.conflicts
            ]  # fmt: skip
            raise KubeError(409, "Conflict", str(exc), info) from None


def _json_patch(where: str, old: JsonDoc, body: Any) -> Any:
    if not isinstance(body, list):
        raise KubeError(400, "BadRequest", f"{where}: a JSON patch must be a list of operations")
    try:
        patch = jsonpatch.JsonPatch(body)
    except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException, TypeError) as exc:
        raise KubeError(400, "BadRequest", f"{where}: invalid JSON patch: {exc}") from None
    try:
        return patch.apply(old)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise KubeError(422, "Invalid", f"{where}: the JSON patch does not apply: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise KubeError(400, "BadRequest", f"{where}: invalid JSON patch: {exc}") from None
