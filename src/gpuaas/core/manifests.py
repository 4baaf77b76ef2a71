"""Manifests in, core objects out: the one entry point from Kubernetes/Kueue documents to the core.

``parse_object`` takes a document already parsed from YAML or JSON (a dict, as ``kubectl apply -f``
would read it) and returns the core object it describes, validated and defaulted as Kueue's CRDs
and webhooks do; job kinds (batch/v1 Job, ray.io RayCluster and RayJob, kubeflow.org Notebook) become one ``Workload``
each, as Kueue's job integrations build it. Any bad input raises ``ManifestError`` naming the
object, the field and the reason, never another exception. This module only dispatches on kind and
reads metadata; the per-kind rules live in ``manifest_queues``, ``manifest_workloads`` and
``manifest_pods``. It reads no files (callers load YAML) and resolves no references between objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from gpuaas.core.manifest_common import (
    DNS_SUBDOMAIN,
    Ctx,
    ManifestError,
    check_dns_label,
    check_dns_subdomain,
    check_metadata,
    type_name,
)
from gpuaas.core.manifest_notebook import NOTEBOOK_API_VERSIONS, parse_notebook
from gpuaas.core.manifest_queues import (
    parse_admission_check,
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_namespace,
    parse_priority_class,
    parse_resource_flavor,
)
from gpuaas.core.manifest_workloads import (
    parse_job,
    parse_ray_cluster,
    parse_ray_job,
    parse_workload,
)
from gpuaas.core.objects import KueueObject

__all__ = [
    "WORKLOAD_KINDS",
    "ManifestError",
    "core_kind",
    "object_ref",
    "parse_object",
    "parse_object_with_ref",
]

WORKLOAD_KINDS = frozenset({"Workload", "Job", "RayCluster", "RayJob", "Notebook"})

_KUEUE = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
_RAY = ("ray.io/v1", "ray.io/v1alpha1")

_Parser = Callable[[Ctx, dict[str, Any], dict[str, Any]], KueueObject]


class _Kind:
    __slots__ = ("api_versions", "core", "namespaced", "parse")

    def __init__(
        self, api_versions: tuple[str, ...], namespaced: bool, core: str, parse: _Parser
    ) -> None:
        self.api_versions = api_versions
        self.namespaced = namespaced
        self.core = core
        self.parse = parse


_KINDS: dict[str, _Kind] = {
    "Namespace": _Kind(("v1",), False, "Namespace", parse_namespace),
    "ResourceFlavor": _Kind(_KUEUE, False, "ResourceFlavor", parse_resource_flavor),
    "ClusterQueue": _Kind(_KUEUE, False, "ClusterQueue", parse_cluster_queue),
    "Cohort": _Kind((*_KUEUE, "kueue.x-k8s.io/v1alpha1"), False, "Cohort", parse_cohort),
    "LocalQueue": _Kind(_KUEUE, True, "LocalQueue", parse_local_queue),
    "WorkloadPriorityClass": _Kind(_KUEUE, False, "WorkloadPriorityClass", parse_priority_class),
    "AdmissionCheck": _Kind(_KUEUE, False, "AdmissionCheck", parse_admission_check),
    "Workload": _Kind(_KUEUE, True, "Workload", parse_workload),
    "Job": _Kind(("batch/v1",), True, "Workload", parse_job),
    "RayCluster": _Kind(_RAY, True, "Workload", parse_ray_cluster),
    "RayJob": _Kind(_RAY, True, "Workload", parse_ray_job),
    "Notebook": _Kind(NOTEBOOK_API_VERSIONS, True, "Workload", parse_notebook),
}
# Namespaces already seen to be valid DNS labels ("" is kubectl's "default").
_GOOD_NAMESPACES: set[str] = {"", "default"}
_SUPPORTED = ", ".join(f"{v[0]} {k}" for k, v in ((k, s.api_versions) for k, s in _KINDS.items()))


def core_kind(kind: str) -> str:
    """The core class a manifest kind becomes: job kinds map to "Workload", others to themselves."""
    spec = _KINDS.get(kind)
    if spec is None:
        raise ManifestError(
            kind, None, None, "kind", f"unsupported kind {kind!r}; supported: {', '.join(_KINDS)}"
        )
    return spec.core


def _header(doc: Any) -> tuple[Ctx, _Kind, dict[str, Any]]:
    """Kind, apiVersion and metadata checked; the context names the object for later errors."""
    if type(doc) is not dict:
        raise ManifestError(
            "", None, None, "", f"a manifest must be an object, got {type_name(doc)}"
        )
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    meta = doc.get("metadata")
    spec = _KINDS.get(kind) if type(kind) is str else None
    if spec is not None and type(meta) is dict:
        name = meta.get("name")
        ns = meta.get("namespace") if spec.namespaced else None
        # The common case, checked in as few steps as possible: 50,000 workloads must load fast.
        if (
            api_version in spec.api_versions
            and type(name) is str
            and (ns is None or (type(ns) is str and ns in _GOOD_NAMESPACES))
            and DNS_SUBDOMAIN.match(name)
            and len(name) <= 253
            and kind != "Namespace"
        ):
            ctx = Ctx(
                cast(str, kind), (ns or "default") if spec.namespaced else None, name, api_version
            )
            return ctx, spec, meta
    return _header_slow(doc, kind, api_version, meta, spec)


def _header_slow(
    doc: dict[str, Any], kind: Any, api_version: Any, meta: Any, spec: _Kind | None
) -> tuple[Ctx, _Kind, dict[str, Any]]:
    name = meta.get("name") if type(meta) is dict else None
    shown_name = name if type(name) is str else None
    if type(kind) is not str or not kind:
        raise ManifestError("", None, shown_name, "kind", f"required string, got {kind!r}")
    namespace: str | None = None
    if spec is not None and spec.namespaced and type(meta) is dict:
        ns = meta.get("namespace")
        namespace = ns if type(ns) is str and ns else "default"
    ctx = Ctx(kind, namespace, shown_name, api_version if type(api_version) is str else "")
    if spec is None:
        raise ctx.err(
            "kind",
            f"unsupported kind {kind!r} (apiVersion {api_version!r}); supported: {_SUPPORTED}",
        )
    if api_version not in spec.api_versions:
        if type(api_version) is not str or not api_version:
            raise ctx.err("apiVersion", f"required string for kind {kind}, got {api_version!r}")
        raise ctx.err(
            "apiVersion",
            f"unsupported apiVersion {api_version!r} for kind {kind}; "
            f"supported: {', '.join(spec.api_versions)}",
        )
    if type(meta) is not dict:
        raise ctx.err(
            "metadata",
            "required value" if meta is None else f"must be an object, got {type_name(meta)}",
        )
    if name is None or name == "":
        raise ctx.err("metadata.name", "required value")
    if type(name) is not str:
        raise ctx.err("metadata.name", f"must be a string, got {type_name(name)} {name!r}")
    if kind == "Namespace":
        check_dns_label(ctx, name, "metadata.name")
    else:
        check_dns_subdomain(ctx, name, "metadata.name")
    if spec.namespaced:
        raw_ns = meta.get("namespace")
        if raw_ns is not None and type(raw_ns) is not str:
            raise ctx.err("metadata.namespace", f"must be a string, got {type_name(raw_ns)}")
        if raw_ns:
            check_dns_label(ctx, raw_ns, "metadata.namespace")
            if len(_GOOD_NAMESPACES) < 10000:
                _GOOD_NAMESPACES.add(raw_ns)
    return ctx, spec, meta


def object_ref(doc: dict[str, Any]) -> tuple[str, str | None, str]:
    """(kind, namespace, name) of a manifest; namespace is None for cluster-scoped kinds.

    The kind is the manifest's own ("Job"), not the core one: ``core_kind`` maps it. Namespaced
    kinds without a namespace are in "default", as kubectl does.
    """
    ctx, _, _ = _header(doc)
    assert ctx.name is not None
    return ctx.kind, ctx.namespace, ctx.name


def parse_object(doc: dict[str, Any]) -> KueueObject:
    """The core object a manifest describes; raises ``ManifestError`` for anything invalid."""
    return parse_object_with_ref(doc)[0]


def parse_object_with_ref(
    doc: dict[str, Any],
) -> tuple[KueueObject, tuple[str, str | None, str]]:
    """``parse_object`` and ``object_ref`` together, reading the header once (bulk loads)."""
    ctx, spec, meta = _header(doc)
    assert ctx.name is not None
    try:
        check_metadata(ctx, meta)
        return spec.parse(ctx, doc, meta), (ctx.kind, ctx.namespace, ctx.name)
    except ManifestError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A shape no reader anticipated: still an error about this object, never a traceback.
        raise ctx.err("", f"invalid manifest ({type(exc).__name__}: {exc})") from exc
