"""Open Data Hub hardware profiles and what their mutating webhook does to a workbench.

Followed: opendatahub-operator v3.0.0 (commit b26c1237a745c88d9bfc799699cd5560f628aaa2):
``api/infrastructure/v1/hardwareprofile_types.go`` (the ``infrastructure.opendatahub.io`` v1 and
v1alpha1 shape), ``internal/webhook/hardwareprofile/mutating.go`` (the injection) and
``internal/controller/components/dashboard/dashboard_controller_actions.go`` (how an older
``dashboard.opendatahub.io/v1alpha1`` profile is migrated into the infrastructure one).

For a Notebook annotated ``opendatahub.io/hardware-profile-name`` the webhook finds the profile in
``opendatahub.io/hardware-profile-namespace`` or else the Notebook's namespace (a missing one is
refused: ``hardware profile 'X' not found in namespace 'Y'``), records the namespace annotation,
and for every container and every identifier sets ``requests[identifier]`` to ``defaultCount``
and ``limits[identifier]`` to ``maxCount`` where the container does not already set them. A
``Queue`` profile sets the ``kueue.x-k8s.io/queue-name`` label (the webhook stops there); a ``Node``
profile sets the pod template's ``nodeSelector`` and ``tolerations``. gpuaas additions, said in
docs/workbenches.md: a ``Queue`` profile's ``kueue.priorityClass`` also becomes the
``kueue.x-k8s.io/priority-class`` label, and a container whose request for an identifier is above
the profile's ``maxCount`` is refused (the ODH webhook does not check this). Pure: documents in,
documents out; finding the profile is the caller's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuaas.core.manifest_common import (
    Ctx,
    ManifestError,
    check_dns_subdomain,
    item_map,
    opt_list,
    opt_map,
    opt_str,
    string_map,
    tolerations,
    type_name,
)
from gpuaas.core.quantity import QuantityError, parse_quantity_exact

KIND = "HardwareProfile"
GROUP = "infrastructure.opendatahub.io"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1alpha1")
DASHBOARD_API_VERSION = "dashboard.opendatahub.io/v1alpha1"
NAME_ANNOTATION = "opendatahub.io/hardware-profile-name"
NAMESPACE_ANNOTATION = "opendatahub.io/hardware-profile-namespace"
DISPLAY_NAME_ANNOTATION = "opendatahub.io/display-name"
DESCRIPTION_ANNOTATION = "opendatahub.io/description"
DISABLED_ANNOTATION = "opendatahub.io/disabled"
MIGRATED_ANNOTATION = "opendatahub.io/migrated-from"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
RESOURCE_TYPES = ("CPU", "Memory", "Accelerator")
SCHEDULING_TYPES = ("Queue", "Node")


@dataclass(slots=True, frozen=True)
class Identifier:
    identifier: str  # the resource name, "nvidia.com/gpu"
    display_name: str
    min_count: str  # as a Kubernetes quantity text ("1", "8Gi")
    max_count: str | None
    default_count: str
    resource_type: str  # "CPU", "Memory", "Accelerator" or ""


@dataclass(slots=True, frozen=True)
class HardwareProfile:
    namespace: str
    name: str
    display_name: str
    description: str
    enabled: bool
    identifiers: tuple[Identifier, ...]
    scheduling_type: str  # "Queue", "Node" or "" (none)
    local_queue: str
    priority_class: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]  # as written, for the pod template


def migrate_dashboard_profile(doc: Mapping[str, Any]) -> dict[str, Any]:
    """An old ``dashboard.opendatahub.io/v1alpha1`` profile as the operator migrates it:
    display name, description and enabled become annotations, and its node selector and
    tolerations a ``Node`` scheduling spec."""
    meta = dict(doc.get("metadata") or {})
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        spec = {}
    annotations = dict(meta.get("annotations") or {})
    annotations[MIGRATED_ANNOTATION] = (
        f"hardwareprofiles.dashboard.opendatahub.io/{meta.get('name')}"
    )
    annotations[DISPLAY_NAME_ANNOTATION] = str(spec.get("displayName") or "")
    annotations[DESCRIPTION_ANNOTATION] = str(spec.get("description") or "")
    annotations[DISABLED_ANNOTATION] = "false" if spec.get("enabled") is True else "true"
    meta["annotations"] = annotations
    node: dict[str, Any] = {}
    if spec.get("nodeSelector"):
        node["nodeSelector"] = copy.deepcopy(spec["nodeSelector"])
    if spec.get("tolerations"):
        node["tolerations"] = copy.deepcopy(spec["tolerations"])
    new_spec: dict[str, Any] = {"scheduling": {"type": "Node", "node": node}}
    if spec.get("identifiers"):
        new_spec["identifiers"] = copy.deepcopy(spec["identifiers"])
    return {"apiVersion": API_VERSIONS[0], "kind": KIND, "metadata": meta, "spec": new_spec}


def _count(ctx: Ctx, raw: Mapping[str, Any], key: str, path: str, required: bool) -> str | None:
    """An IntOrString count, checked as a quantity and kept as its text."""
    value = raw.get(key)
    if value is None:
        if required:
            raise ctx.err(path, "required value")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ctx.err(path, f"must be an integer or a quantity string, got {type_name(value)}")
    try:
        if parse_quantity_exact(value) < 0:
            raise ctx.err(path, "must be greater than or equal to 0")
    except QuantityError as exc:
        raise ctx.err(path, str(exc)) from None
    return str(value)


def _identifiers(ctx: Ctx, spec: dict[str, Any]) -> tuple[Identifier, ...]:
    out = []
    for i, raw in enumerate(opt_list(ctx, spec, "identifiers", "spec.identifiers")):
        p = f"spec.identifiers[{i}]"
        item = item_map(ctx, raw, p)
        ident = opt_str(ctx, item, "identifier", f"{p}.identifier")
        if not ident:
            raise ctx.err(f"{p}.identifier", "required value")
        rtype = opt_str(ctx, item, "resourceType", f"{p}.resourceType")
        if rtype and rtype not in RESOURCE_TYPES:
            raise ctx.err(
                f"{p}.resourceType",
                f'unsupported value "{rtype}": supported values: "CPU", "Memory", "Accelerator"',
            )
        min_count = _count(ctx, item, "minCount", f"{p}.minCount", True)
        max_count = _count(ctx, item, "maxCount", f"{p}.maxCount", False)
        default = _count(ctx, item, "defaultCount", f"{p}.defaultCount", True)
        assert min_count is not None and default is not None
        low, dflt = parse_quantity_exact(min_count), parse_quantity_exact(default)
        if dflt < low:
            raise ctx.err(f"{p}.defaultCount", f"{default} is below minCount {min_count}")
        if max_count is not None:
            high = parse_quantity_exact(max_count)
            if high < low:
                raise ctx.err(f"{p}.maxCount", f"{max_count} is below minCount {min_count}")
            if dflt > high:
                raise ctx.err(f"{p}.defaultCount", f"{default} is above maxCount {max_count}")
        display = opt_str(ctx, item, "displayName", f"{p}.displayName") or ident
        out.append(Identifier(ident, display, min_count, max_count, default, rtype))
    return tuple(out)


def parse_hardware_profile(doc: Mapping[str, Any]) -> HardwareProfile:
    """A profile document, checked as its CRD (and its CEL rules) check it."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    ctx = Ctx(KIND, str(namespace), str(name) if name else None, str(doc.get("apiVersion", "")))
    if doc.get("apiVersion") == DASHBOARD_API_VERSION:
        doc = migrate_dashboard_profile(doc)
        meta = doc["metadata"]
    elif doc.get("apiVersion") not in API_VERSIONS:
        raise ctx.err("apiVersion", f"must be one of {', '.join(API_VERSIONS)}")
    if not isinstance(name, str) or not name:
        raise ctx.err("metadata.name", "required value")
    check_dns_subdomain(ctx, name, "metadata.name")
    spec = opt_map(ctx, dict(doc), "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    annotations = (
        string_map(ctx, meta, "annotations", "metadata.annotations")
        if meta.get("annotations")
        else {}
    )
    identifiers = _identifiers(ctx, spec)
    stype, queue, priority = "", "", ""
    selector: dict[str, str] = {}
    tols: tuple[Mapping[str, Any], ...] = ()
    sched = opt_map(ctx, spec, "scheduling", "spec.scheduling")
    if sched is not None:
        stype = opt_str(ctx, sched, "type", "spec.scheduling.type")
        if stype not in SCHEDULING_TYPES:
            raise ctx.err(
                "spec.scheduling.type",
                f'unsupported value "{stype}": supported values: "Queue", "Node"',
            )
        kueue = opt_map(ctx, sched, "kueue", "spec.scheduling.kueue")
        node = opt_map(ctx, sched, "node", "spec.scheduling.node")
        if stype == "Queue":
            if kueue is None or not kueue.get("localQueueName") or node is not None:
                raise ctx.err(
                    "spec.scheduling",
                    "When schedulingType is 'Queue', the 'kueue.localQueueName' field must be "
                    "specified and non-empty, and the 'node' field must not be set",
                )
            queue = opt_str(ctx, kueue, "localQueueName", "spec.scheduling.kueue.localQueueName")
            check_dns_subdomain(ctx, queue, "spec.scheduling.kueue.localQueueName")
            priority = opt_str(ctx, kueue, "priorityClass", "spec.scheduling.kueue.priorityClass")
            if priority:
                check_dns_subdomain(ctx, priority, "spec.scheduling.kueue.priorityClass")
        else:
            if node is None or kueue is not None:
                raise ctx.err(
                    "spec.scheduling",
                    "When schedulingType is 'Node', the 'node' field must be set, and the "
                    "'kueue' field must not be set",
                )
            if node.get("nodeSelector"):
                selector = string_map(
                    ctx, node, "nodeSelector", "spec.scheduling.node.nodeSelector"
                )
            tolerations(ctx, node, "tolerations", "spec.scheduling.node.tolerations")
            tols = tuple(copy.deepcopy(t) for t in node.get("tolerations") or ())
    return HardwareProfile(
        namespace=str(namespace),
        name=name,
        display_name=annotations.get(DISPLAY_NAME_ANNOTATION) or name,
        description=annotations.get(DESCRIPTION_ANNOTATION, ""),
        enabled=annotations.get(DISABLED_ANNOTATION, "false").lower() != "true",
        identifiers=identifiers,
        scheduling_type=stype,
        local_queue=queue,
        priority_class=priority,
        node_selector=selector,
        tolerations=tols,
    )


def profile_ref(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the profile a workload names, or None when it names none."""
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping):
        return None
    name = annotations.get(NAME_ANNOTATION)
    if not isinstance(name, str) or not name:
        return None
    ns = annotations.get(NAMESPACE_ANNOTATION)
    if not isinstance(ns, str) or not ns:
        ns = meta.get("namespace") or "default"
    return str(ns), name


def not_found(kind: str, namespace: str, name: str, ref: tuple[str, str]) -> ManifestError:
    """The webhook's refusal of a profile that does not exist (its wording)."""
    return ManifestError(
        kind,
        namespace,
        name,
        f"metadata.annotations[{NAME_ANNOTATION}]",
        f"hardware profile '{ref[1]}' not found in namespace '{ref[0]}'",
    )


def _containers(doc: dict[str, Any]) -> list[Any]:
    """The Notebook's pod template containers (``spec.template.spec.containers``)."""
    spec = doc.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return containers if isinstance(containers, list) else []


def inject(doc: Mapping[str, Any], profile: HardwareProfile) -> dict[str, Any]:
    """``doc`` (a Notebook) with ``profile`` applied as the ODH webhook applies it; then the
    gpuaas check that no container asks for more than the profile's maximum."""
    out = copy.deepcopy(dict(doc))
    meta = out.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    annotations.setdefault(NAMESPACE_ANNOTATION, profile.namespace)
    if not profile.identifiers and not profile.scheduling_type:
        return out  # "HardwareProfile has no configuration to apply"
    for container in _containers(out):
        if not isinstance(container, dict):
            continue
        resources = container.setdefault("resources", {})
        if not isinstance(resources, dict):
            continue
        requests = resources.setdefault("requests", {})
        limits = resources.setdefault("limits", {})
        if not isinstance(requests, dict) or not isinstance(limits, dict):
            continue
        for ident in profile.identifiers:
            requests.setdefault(ident.identifier, _canonical(ident.default_count))
            if ident.max_count is not None:
                limits.setdefault(ident.identifier, _canonical(ident.max_count))
    if profile.scheduling_type == "Queue":
        labels = meta.setdefault("labels", {})
        labels[QUEUE_LABEL] = profile.local_queue
        if profile.priority_class:
            labels[PRIORITY_CLASS_LABEL] = profile.priority_class
    elif profile.scheduling_type == "Node":
        pod = out.get("spec", {}).get("template", {}).get("spec")
        if isinstance(pod, dict):
            if profile.node_selector:
                pod["nodeSelector"] = dict(profile.node_selector)
            if profile.tolerations:
                pod["tolerations"] = [copy.deepcopy(dict(t)) for t in profile.tolerations]
    check_maximum(out, profile)
    return out


def _canonical(count: str) -> str:
    """The count as the webhook writes it (``quantity.String()``): integers without decoration."""
    value = parse_quantity_exact(count)
    if isinstance(value, Fraction) and value.denominator == 1 and count.lstrip("+").isdigit():
        return str(value.numerator)
    return count


def check_maximum(doc: Mapping[str, Any], profile: HardwareProfile) -> None:
    """gpuaas rule (not the ODH webhook's): no container may request more of an identifier than
    the profile's ``maxCount``; the error names the container, the resource and both amounts."""
    meta = doc.get("metadata") or {}
    ctx = Ctx(str(doc.get("kind", "")), meta.get("namespace"), meta.get("name"), "")
    for i, container in enumerate(_containers(dict(doc))):
        if not isinstance(container, dict):
            continue
        resources = container.get("resources") or {}
        for field in ("requests", "limits"):
            values = resources.get(field) if isinstance(resources, dict) else None
            if not isinstance(values, dict):
                continue
            for ident in profile.identifiers:
                if ident.max_count is None or ident.identifier not in values:
                    continue
                try:
                    asked = parse_quantity_exact(values[ident.identifier])
                except QuantityError:
                    continue  # the pod-template reader reports the bad quantity itself
                if asked > parse_quantity_exact(ident.max_count):
                    raise ctx.err(
                        f"spec.template.spec.containers[{i}].resources.{field}[{ident.identifier}]",
                        f"{values[ident.identifier]} is above hardware profile "
                        f"{profile.namespace}/{profile.name}'s maxCount {ident.max_count} "
                        "(a gpuaas rule: the profile's maximum is enforced)",
                    )
