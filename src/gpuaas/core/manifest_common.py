"""Shared pieces of manifest parsing: the error type, typed field readers, names and selectors.

Everything here turns one part of an already-parsed YAML/JSON dict into core values, checking it as
the Kubernetes API server or Kueue's CRD schema would, and reports a bad value as ``ManifestError``
naming the object, the field path and the reason. It knows no kinds (see ``manifest_queues`` and
``manifest_workloads``) and never lets another exception escape for bad input.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from gpuaas.core.objects import (
    LabelSelector,
    NodeSelectorTerm,
    SelectorRequirement,
    Taint,
    Toleration,
)
from gpuaas.core.quantity import QuantityError, parse_quantity_exact

INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


class ManifestError(Exception):
    """A manifest Kueue or the API server would reject, with the object, field and reason."""

    def __init__(
        self, kind: str, namespace: str | None, name: str | None, field: str, reason: str
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.field = field
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        kind = self.kind or "<unknown kind>"
        if self.name is None or self.name == "":
            obj = f"{kind} <unnamed>"
        elif self.namespace is not None:
            obj = f"{kind} {self.namespace}/{self.name}"
        else:
            obj = f"{kind} {self.name}"
        return f"{obj}: {self.field}: {self.reason}" if self.field else f"{obj}: {self.reason}"

    def __str__(self) -> str:
        return self._message()


class Ctx:
    """The object being parsed, so any reader can name it in an error."""

    __slots__ = ("api_version", "kind", "name", "namespace")

    def __init__(
        self, kind: str, namespace: str | None, name: str | None, api_version: str
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.api_version = api_version

    def err(self, field: str, reason: str) -> ManifestError:
        return ManifestError(self.kind, self.namespace, self.name, field, reason)


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def opt_map(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None or type(value) is dict:
        return value
    raise ctx.err(path, f"must be an object, got {type_name(value)}")


def opt_list(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if type(value) is list:
        return value
    raise ctx.err(path, f"must be a list, got {type_name(value)}")


def item_map(ctx: Ctx, value: Any, path: str) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise ctx.err(path, f"must be an object, got {type_name(value)}")


def opt_str(ctx: Ctx, parent: dict[str, Any], key: str, path: str, default: str = "") -> str:
    value = parent.get(key)
    if value is None:
        return default
    if type(value) is str:
        return value
    raise ctx.err(path, f"must be a string, got {type_name(value)}")


def opt_int(
    ctx: Ctx,
    parent: dict[str, Any],
    key: str,
    path: str,
    *,
    minimum: int = INT32_MIN,
    maximum: int = INT32_MAX,
) -> int | None:
    value = parent.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise ctx.err(path, f"must be an integer, got {type_name(value)} {value!r}")
    if value < minimum:
        raise ctx.err(path, f"must be greater than or equal to {minimum}, got {value}")
    if value > maximum:
        raise ctx.err(path, f"must be less than or equal to {maximum}, got {value}")
    return value


def opt_bool(ctx: Ctx, parent: dict[str, Any], key: str, path: str, default: bool) -> bool:
    value = parent.get(key)
    if value is None:
        return default
    if type(value) is bool:
        return value
    raise ctx.err(path, f"must be a boolean, got {type_name(value)} {value!r}")


def enum_value(
    ctx: Ctx, parent: dict[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str
) -> str:
    value = opt_str(ctx, parent, key, path, default)
    if value in allowed:
        return value
    choices = ", ".join(f'"{a}"' for a in allowed)
    raise ctx.err(path, f'unsupported value "{value}": supported values: {choices}')


def string_map(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector); non-string values are rejected."""
    value = opt_map(ctx, parent, key, path)
    if not value:
        return {}
    for k, v in value.items():
        if type(v) is not str:
            raise ctx.err(f"{path}[{k}]", f"must be a string, got {type_name(v)} {v!r}")
    return dict(value)


def check_dns_subdomain(ctx: Ctx, value: str, path: str) -> None:
    if len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise ctx.err(
            path,
            f"invalid name {value!r}: a lowercase RFC 1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (at most 253 characters)",
        )


def check_dns_label(ctx: Ctx, value: str, path: str) -> None:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ctx.err(
            path,
            f"invalid name {value!r}: a lowercase RFC 1123 label must consist of lower case "
            "alphanumeric characters or '-', and must start and end with an alphanumeric "
            "character (at most 63 characters)",
        )


@lru_cache(maxsize=4096)
def qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a qualified name (label key, resource name), or None if it is one."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return f"invalid prefix {prefix!r} in {value!r}: must be a DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            f"invalid name {value!r}: must be 63 characters or less, consist of alphanumeric "
            "characters, '-', '_' or '.', and start and end with an alphanumeric character"
        )
    return None


def check_qualified_name(ctx: Ctx, value: str, path: str) -> None:
    problem = qualified_name_problem(value)
    if problem is not None:
        raise ctx.err(path, problem)


def check_label_value(ctx: Ctx, value: str, path: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ctx.err(
            path,
            f"invalid label value {value!r}: must be 63 characters or less, empty or start and "
            "end with an alphanumeric character, with '-', '_', '.' or alphanumerics between",
        )


def label_map(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> dict[str, str]:
    """A string map whose keys and values must be valid label keys and values."""
    labels = string_map(ctx, parent, key, path)
    for k, v in labels.items():
        check_qualified_name(ctx, k, f"{path}[{k}]")
        check_label_value(ctx, v, f"{path}[{k}]")
    return labels


# Kubernetes' TotalAnnotationSizeLimitB: keys and values together, in bytes.
MAX_ANNOTATIONS_BYTES = 256 * 1024


def check_metadata(ctx: Ctx, meta: dict[str, Any]) -> None:
    """Labels and annotations as ``ValidateObjectMeta`` checks them, for every kind."""
    if meta.get("labels"):
        label_map(ctx, meta, "labels", "metadata.labels")
    if meta.get("annotations"):
        annotations = string_map(ctx, meta, "annotations", "metadata.annotations")
        total = 0
        for k, v in annotations.items():
            check_qualified_name(ctx, k.lower(), f"metadata.annotations[{k}]")
            total += len(k.encode()) + len(v.encode())
        if total > MAX_ANNOTATIONS_BYTES:
            raise ctx.err(
                "metadata.annotations",
                f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes, got {total}",
            )


def quantity_exact(ctx: Ctx, value: Any, path: str) -> Fraction:
    if value is None:
        raise ctx.err(path, "required value")
    try:
        return parse_quantity_exact(value)
    except QuantityError as exc:
        raise ctx.err(path, str(exc)) from None


def _requirements(
    ctx: Ctx, items: list[Any], path: str, operators: tuple[str, ...]
) -> tuple[SelectorRequirement, ...]:
    out = []
    for i, raw in enumerate(items):
        p = f"{path}[{i}]"
        req = item_map(ctx, raw, p)
        key = opt_str(ctx, req, "key", f"{p}.key")
        if not key:
            raise ctx.err(f"{p}.key", "required value")
        check_qualified_name(ctx, key, f"{p}.key")
        op = opt_str(ctx, req, "operator", f"{p}.operator")
        if op not in operators:
            choices = ", ".join(f'"{o}"' for o in operators)
            raise ctx.err(f"{p}.operator", f'unsupported value "{op}": supported values: {choices}')
        values = []
        for j, v in enumerate(opt_list(ctx, req, "values", f"{p}.values")):
            if type(v) is not str:
                raise ctx.err(f"{p}.values[{j}]", f"must be a string, got {type_name(v)} {v!r}")
            values.append(v)
        if op in ("In", "NotIn") and not values:
            raise ctx.err(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise ctx.err(
                f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ctx.err(
                    f"{p}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            if not _INTEGER.fullmatch(values[0]):  # ASCII, as Go's strconv.ParseInt
                raise ctx.err(f"{p}.values[0]", f"must be an integer, got {values[0]!r}")
        out.append(SelectorRequirement(key=key, operator=op, values=tuple(values)))
    return tuple(out)


def label_selector(ctx: Ctx, raw: Any, path: str) -> LabelSelector:
    sel = item_map(ctx, raw, path)
    match_labels = label_map(ctx, sel, "matchLabels", f"{path}.matchLabels")
    exprs = _requirements(
        ctx,
        opt_list(ctx, sel, "matchExpressions", f"{path}.matchExpressions"),
        f"{path}.matchExpressions",
        _LABEL_OPERATORS,
    )
    return LabelSelector(match_labels=tuple(match_labels.items()), match_expressions=exprs)


def node_selector_terms(
    ctx: Ctx, pod_spec: dict[str, Any], path: str
) -> tuple[NodeSelectorTerm, ...]:
    """``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``.

    Only ``matchExpressions`` are kept: ``matchFields`` select node names, which flavors do not have.
    """
    affinity = opt_map(ctx, pod_spec, "affinity", f"{path}.affinity")
    if not affinity:
        return ()
    p = f"{path}.affinity.nodeAffinity"
    node_aff = opt_map(ctx, affinity, "nodeAffinity", p)
    if not node_aff:
        return ()
    p += ".requiredDuringSchedulingIgnoredDuringExecution"
    required = opt_map(ctx, node_aff, "requiredDuringSchedulingIgnoredDuringExecution", p)
    if required is None:
        return ()
    p += ".nodeSelectorTerms"
    raw_terms = opt_list(ctx, required, "nodeSelectorTerms", p)
    if not raw_terms:
        raise ctx.err(p, "must have at least one node selector term")
    terms = []
    for i, raw in enumerate(raw_terms):
        term = item_map(ctx, raw, f"{p}[{i}]")
        exprs = _requirements(
            ctx,
            opt_list(ctx, term, "matchExpressions", f"{p}[{i}].matchExpressions"),
            f"{p}[{i}].matchExpressions",
            _NODE_OPERATORS,
        )
        terms.append(NodeSelectorTerm(match_expressions=exprs))
    return tuple(terms)


def tolerations(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> tuple[Toleration, ...]:
    """Tolerations checked as Kubernetes' ``validateTolerations`` and Kueue's CRD rules do."""
    out = []
    for i, raw in enumerate(opt_list(ctx, parent, key, path)):
        p = f"{path}[{i}]"
        tol = item_map(ctx, raw, p)
        t_key = opt_str(ctx, tol, "key", f"{p}.key")
        op = enum_value(ctx, tol, "operator", f"{p}.operator", ("Equal", "Exists"), "Equal")
        value = opt_str(ctx, tol, "value", f"{p}.value")
        effect = enum_value(ctx, tol, "effect", f"{p}.effect", ("", *TAINT_EFFECTS), "")
        if t_key:
            check_qualified_name(ctx, t_key, f"{p}.key")
        elif op != "Exists":
            raise ctx.err(
                f"{p}.operator",
                "operator must be Exists when 'key' is empty, which means 'match all values and "
                "all keys'",
            )
        if op == "Exists" and value:
            raise ctx.err(f"{p}.value", "a value must be empty when 'operator' is 'Exists'")
        if tol.get("tolerationSeconds") is not None:
            opt_int(
                ctx,
                tol,
                "tolerationSeconds",
                f"{p}.tolerationSeconds",
                minimum=-(1 << 63),
                maximum=(1 << 63) - 1,
            )
            if effect != "NoExecute":
                raise ctx.err(
                    f"{p}.effect", "effect must be 'NoExecute' when 'tolerationSeconds' is set"
                )
        out.append(Toleration(key=t_key, operator=op, value=value, effect=effect))
    return tuple(out)


def taint_items(
    ctx: Ctx,
    parent: dict[str, Any],
    key: str,
    path: str,
    effects: tuple[str, ...],
    *,
    label_value: bool = True,
) -> list[tuple[str, str, str, dict[str, Any], str]]:
    """A taint list checked as Kubernetes checks one: a qualified key, a value (a label value
    unless ``label_value`` is off), an effect among ``effects``, unique by key and effect. Each
    entry is (key, value, effect, the raw map, its path), for the caller's own taint type."""
    out = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(opt_list(ctx, parent, key, path)):
        p = f"{path}[{i}]"
        taint = item_map(ctx, raw, p)
        t_key = opt_str(ctx, taint, "key", f"{p}.key")
        if not t_key:
            raise ctx.err(f"{p}.key", "required value")
        check_qualified_name(ctx, t_key, f"{p}.key")
        value = opt_str(ctx, taint, "value", f"{p}.value")
        if label_value:
            check_label_value(ctx, value, f"{p}.value")
        if taint.get("effect") is None:
            raise ctx.err(f"{p}.effect", "required value")
        effect = enum_value(ctx, taint, "effect", f"{p}.effect", effects, "")
        if (t_key, effect) in seen:
            raise ctx.err(p, "taints must be unique by key and effect pair")
        seen.add((t_key, effect))
        out.append((t_key, value, effect, taint, p))
    return out


def taints(ctx: Ctx, parent: dict[str, Any], key: str, path: str) -> tuple[Taint, ...]:
    """Node taints as Kueue's ResourceFlavor webhook checks them (unique by key and effect)."""
    return tuple(
        Taint(key=k, value=v, effect=e)
        for k, v, e, _, _ in taint_items(ctx, parent, key, path, TAINT_EFFECTS)
    )


def non_negative_seconds(ctx: Ctx, annotations: dict[str, str], key: str) -> float | None:
    """A gpuaas duration annotation: a finite number of seconds, zero or more."""
    raw = annotations.get(key)
    if raw is None:
        return None
    path = f"metadata.annotations[{key}]"
    if not raw.isascii():  # float() also reads "٣" and full-width digits
        raise ctx.err(path, f"must be a number of seconds, got {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise ctx.err(path, f"must be a number of seconds, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ctx.err(path, f"must be a finite number of seconds, got {raw!r}")
    if value < 0:
        raise ctx.err(path, f"must be greater than or equal to 0, got {raw!r}")
    return value
