"""Checks and edits of API documents before the engine applies them: identity against the path,
merge patches, and the names used in error messages.

Pure functions over JSON documents; they raise ``Invalid`` with the object, field and reason, and
never touch engine state.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from typing import Any, cast

import msgspec

from gpuaas.core import ocm
from gpuaas.core.manifests import ManifestError, parse_object
from gpuaas.core.objects import KueueObject, Workload
from gpuaas.engine.errors import Invalid
from gpuaas.store import JsonDoc
from gpuaas.telemetry import TelemetryInputError, parse_configuration
from gpuaas.vocab import corev1, multikueue
from gpuaas.vocab.kinds import (
    CONFIG_MAP,
    CONFIGURATION,
    HARDWARE_PROFILE,
    MULTIKUEUE_CLUSTER,
    MULTIKUEUE_CONFIG,
    SECRET,
    Kind,
)


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def with_rv(doc: JsonDoc, rv: int) -> JsonDoc:
    out = dict(doc)
    out["metadata"] = {**doc.get("metadata", {}), "resourceVersion": str(rv)}
    return out


def spec_of(doc: JsonDoc) -> Any:
    return {k: v for k, v in doc.items() if k not in ("metadata", "status")}


def describe(kind: Kind, namespace: str | None, name: str) -> str:
    return f"{kind.kind} {namespace}/{name}" if kind.namespaced else f"{kind.kind} {name}"


def obj_name(obj: KueueObject) -> str:
    ns = getattr(obj, "namespace", None)
    return f"{ns}/{obj.name}" if ns else obj.name


def parse(doc: JsonDoc) -> KueueObject | None:
    """The core object, or ``None`` for a valid stored-only kind (``GpuaasConfiguration``,
    Secret, ConfigMap, MultiKueueConfig, MultiKueueCluster)."""
    kind = doc.get("kind")
    if kind == CONFIGURATION.kind:
        check_configuration(doc)
        return None
    if doc.get("kind") == HARDWARE_PROFILE.kind:
        return None  # checked by engine.admission_hooks; read by the profile webhook only
    try:
        if kind == MULTIKUEUE_CONFIG.kind:
            multikueue.check_config(doc)
            return None
        if kind == MULTIKUEUE_CLUSTER.kind:
            multikueue.check_cluster(doc)
            return None
    except ValueError as exc:
        raise Invalid(str(exc)) from exc
    if kind in ocm.KINDS:
        try:
            ocm.check(doc)  # stored only: read by the placement controller
        except ManifestError as exc:
            raise Invalid(str(exc)) from exc
        return None
    if kind in (SECRET.kind, CONFIG_MAP.kind):
        return None  # checked and normalized by ``checked``
    try:
        return shared_strings(parse_object(doc))
    except ManifestError as exc:
        raise Invalid(str(exc)) from exc


def shared_strings(obj: KueueObject) -> KueueObject:
    """``obj``, a Workload's repeated names (namespace, queue, kind, pod set and resource names)
    made the one shared copy of each (``sys.intern``) instead of one per workload: the core keeps
    every workload for its life, 100,000 of them and more. Equal strings, so nothing decides
    differently."""
    if isinstance(obj, Workload):
        obj.namespace = sys.intern(obj.namespace)
        obj.queue_name = sys.intern(obj.queue_name)
        obj.kind = sys.intern(obj.kind)
        for ps in obj.pod_sets:
            ps.name = sys.intern(ps.name)
            ps.requests = {sys.intern(r): q for r, q in ps.requests.items()}
    return obj


def check_configuration(doc: JsonDoc) -> None:
    """One configuration per server, named ``default``; its fields as ``telemetry.config``."""
    name = (doc.get("metadata") or {}).get("name")
    if name != "default":
        raise Invalid(
            f"{CONFIGURATION.kind} {name}: metadata.name: must be 'default' "
            "(one configuration per server)"
        )
    try:
        parse_configuration(doc)
    except TelemetryInputError as exc:
        raise Invalid(str(exc)) from exc


def _stored_copy(doc: JsonDoc) -> JsonDoc:
    """A deep copy of ``doc`` as the store will hold it; raises what ``json`` raises for what
    JSON cannot hold (a non-string key, a non-finite number, an odd type).

    The copy is msgspec's encoding decoded back (several times faster than ``copy.deepcopy``);
    when it differs from ``doc`` (msgspec turns an int key into a string and NaN into null), the
    standard library's strict encoding decides, as it did before.
    """
    copied: JsonDoc = msgspec.json.decode(msgspec.json.encode(doc))
    if copied == doc:
        return copied
    json.dumps(doc, allow_nan=False, sort_keys=True)  # raises for what the store cannot hold
    return copy.deepcopy(doc)


def checked(kind: Kind, namespace: str | None, name: str | None, doc: Any) -> JsonDoc:
    """The body's identity must match the path: apiVersion, kind, namespace and name."""
    if not isinstance(doc, dict):
        raise Invalid(f"{kind.kind}: the body must be a single object, not {type(doc).__name__}")
    try:
        # What the store will write, checked before it joins a group-commit batch: one
        # unstorable document must never fail other tenants' writes (the API refuses it first).
        doc = _stored_copy(doc)
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError) as exc:
        raise Invalid(f"{kind.kind}: the object cannot be stored as JSON: {exc}") from None
    meta = doc.get("metadata")
    if meta is None:
        meta = doc["metadata"] = {}
    if not isinstance(meta, dict):
        raise Invalid(f"{kind.kind}: metadata: must be an object")
    body_name = meta.get("name")
    where = describe(kind, namespace, str(body_name or name or "<unnamed>"))
    doc.setdefault("apiVersion", kind.api_version)
    doc.setdefault("kind", kind.kind)
    if doc["kind"] != kind.kind:
        raise Invalid(f"{where}: kind: {doc['kind']!r} does not match the path ({kind.kind})")
    if not isinstance(doc["apiVersion"], str) or not kind.accepts(doc["apiVersion"]):
        raise Invalid(
            f"{where}: apiVersion: {doc['apiVersion']!r} is not served for {kind.kind} "
            f"(use {kind.api_version})"
        )
    if name is not None:
        if body_name in (None, ""):
            meta["name"] = name
        elif body_name != name:
            raise Invalid(f"{where}: metadata.name: {body_name!r} does not match the path ({name})")
    elif not isinstance(body_name, str) or not body_name:
        raise Invalid(f"{where}: metadata.name: required")
    if kind.namespaced:
        body_ns = meta.get("namespace")
        if body_ns in (None, ""):
            meta["namespace"] = namespace
        elif body_ns != namespace:
            raise Invalid(
                f"{where}: metadata.namespace: {body_ns!r} does not match the path ({namespace})"
            )
    elif meta.get("namespace"):
        raise Invalid(f"{where}: metadata.namespace: {kind.kind} is cluster-scoped")
    try:
        if kind is SECRET:
            doc = corev1.normalize_secret(doc)
        elif kind is CONFIG_MAP:
            doc = corev1.normalize_config_map(doc)
    except ValueError as exc:
        raise Invalid(str(exc)) from exc
    return cast(JsonDoc, doc)


def finite_json(raw: bytes) -> tuple[JsonDoc, bool]:
    """A stored document's JSON read back, with ``finite``'s repair when it holds NaN or an
    infinity (which msgspec refuses and Python's ``json`` reads)."""
    try:
        return msgspec.json.decode(raw), False
    except msgspec.DecodeError:
        doc, changed = finite(json.loads(raw))
        return cast(JsonDoc, doc), changed


def finite(doc: Any) -> tuple[Any, bool]:
    """``doc`` with every NaN or infinity replaced by null, and whether any was.

    For documents stored before the API refused such numbers: served as they were, they made
    every list that included them fail (JSON has no NaN), even after a restart.
    """
    if isinstance(doc, float):
        return (doc, False) if math.isfinite(doc) else (None, True)
    if isinstance(doc, dict):
        changed = False
        out = {}
        for k, v in doc.items():
            out[k], c = finite(v)
            changed |= c
        return (out, True) if changed else (doc, False)
    if isinstance(doc, list):
        items = [finite(v) for v in doc]
        if any(c for _, c in items):
            return [v for v, _ in items], True
        return doc, False
    return doc, False


def stamp_uid(obj: KueueObject | None, kind: Kind, meta: JsonDoc) -> None:
    """The core names a preemptor by its UIDs (never its name): give it the ones just stored."""
    if isinstance(obj, Workload):
        uid = str(meta.get("uid") or "")
        if kind.job:
            obj.job_uid = uid  # the Workload's own uid comes with its derived document
        else:
            obj.uid = uid


def keep_identity(doc: JsonDoc, old: JsonDoc) -> None:
    """An update of ``old`` to ``doc``, as kube-apiserver stores it: uid, creation time and
    resourceVersion stay, generation counts a spec change, the status is the stored one
    (written through the status subresource only). Used by a replace and its dry run."""
    old_meta = old["metadata"]
    changed = spec_of(doc) != spec_of(old)
    doc["metadata"].update(
        uid=old_meta.get("uid"),
        creationTimestamp=old_meta.get("creationTimestamp"),
        generation=int(old_meta.get("generation", 1)) + (1 if changed else 0),
        resourceVersion=old_meta.get("resourceVersion"),
    )
    doc.pop("status", None)
    if "status" in old:
        doc["status"] = old["status"]
