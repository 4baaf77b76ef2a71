"""The admission webhooks gpuaas runs before a write: ODH hardware profiles and queue defaulting.

In a cluster these are webhooks outside Kueue; here they run in the engine, under its lock, on the
document about to be stored, in Kubernetes' order (mutating, then validating):

1. A ``HardwareProfile`` written in the older ``dashboard.opendatahub.io/v1alpha1`` shape is
   migrated to ``infrastructure.opendatahub.io/v1`` (as the ODH operator migrates it) and checked.
2. A Notebook naming a hardware profile gets it injected (``core.hardware_profile``); a profile
   that does not exist is refused with the webhook's message (400).
3. Kueue's LocalQueueDefaulting, then RHOAI's Kueue label validator
   (``core.managed_namespaces``; denied with 403).

It reads the engine's stored objects only; it decides no admission and writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.core import hardware_profile, managed_namespaces
from gpuaas.core.manifest_common import ManifestError
from gpuaas.engine.errors import BadRequest, Denied, Invalid
from gpuaas.store import JsonDoc, ObjectKey
from gpuaas.vocab.kinds import BY_KIND, HARDWARE_PROFILE, NAMESPACE, NOTEBOOK, Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

_LOCAL_QUEUE = BY_KIND["LocalQueue"]


def admit(engine: Engine, kind: Kind, namespace: str | None, doc: JsonDoc) -> JsonDoc:
    """``doc`` as the webhooks leave it; raises ``BadRequest``, ``Denied`` or ``Invalid``."""
    if kind is HARDWARE_PROFILE:
        return _profile(doc)
    if not kind.job:
        return doc
    ns = namespace or "default"
    if kind is NOTEBOOK:
        ref = hardware_profile.profile_ref(doc)
        if ref is not None:
            profile = find_profile(engine, ref)
            if profile is None:
                raise BadRequest(str(hardware_profile.not_found(kind.kind, ns, _name(doc), ref)))
            try:
                doc = hardware_profile.inject(doc, profile)
            except ManifestError as exc:
                raise Invalid(str(exc)) from exc
    has_default = (
        ObjectKey(_LOCAL_QUEUE.gk, ns, managed_namespaces.DEFAULT_LOCAL_QUEUE) in engine.objects
    )
    doc = managed_namespaces.default_local_queue(doc, has_default)
    ns_rec = engine.objects.get(ObjectKey(NAMESPACE.gk, "", ns))
    labels = (ns_rec.doc.get("metadata") or {}).get("labels") or {} if ns_rec else {}
    try:
        managed_namespaces.check_queue_label(doc, labels)
    except ManifestError as exc:
        raise Denied(str(exc)) from exc
    return doc


def find_profile(engine: Engine, ref: tuple[str, str]) -> hardware_profile.HardwareProfile | None:
    """The stored profile ``ref`` = (namespace, name), parsed; None when there is none."""
    rec = engine.objects.get(ObjectKey(HARDWARE_PROFILE.gk, ref[0], ref[1]))
    if rec is None:
        return None
    try:
        return hardware_profile.parse_hardware_profile(rec.doc)
    except ManifestError:
        return None  # checked when written; a profile stored by an older version reads as absent


def _profile(doc: JsonDoc) -> JsonDoc:
    if doc.get("apiVersion") == hardware_profile.DASHBOARD_API_VERSION:
        doc = hardware_profile.migrate_dashboard_profile(doc)
    try:
        hardware_profile.parse_hardware_profile(doc)
    except ManifestError as exc:
        raise Invalid(str(exc)) from exc
    return doc


def _name(doc: JsonDoc) -> str:
    return str((doc.get("metadata") or {}).get("name", ""))
