"""A pod template's per-pod requests and scheduling constraints, as Kubernetes and Kueue see them.

Requests follow ``k8s.io/component-helpers/resource.PodRequests`` after Kueue's
``workload.AdjustResources``: a container's missing requests default to its limits; containers
are summed; each init container raises the total to at least its own need (restartable "sidecar"
init containers, ``restartPolicy: Always``, add to everything after them); pod-level
``spec.resources`` replaces cpu/memory/hugepages; ``spec.overhead`` is added. Quantities are summed
exactly before rounding into Kueue's int units. This module builds one ``PodSet``; it does not know
which kind the template came from (see ``manifest_workloads``) and does no I/O.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpuaas.core.manifest_common import (
    Ctx,
    item_map,
    node_selector_terms,
    opt_list,
    opt_map,
    qualified_name_problem,
    string_map,
    tolerations,
    type_name,
)
from gpuaas.core.objects import PodSet
from gpuaas.core.quantity import (
    INT64_MAX,
    Int64RangeError,
    QuantityError,
    parse_quantity_exact,
    parse_quantity_rounded,
)

Number = int | Fraction
ResourceMap = dict[str, Number]

# Where a request above its limit is noted: None to refuse it instead (see ``_requirements``).
OverLimits = list[str] | None
REQUESTS_OVER_LIMITS = "requests must not exceed its limits"  # Kueue's and Kubernetes' words

# Extra per-container requests that Kueue adds for a podset (RayJob sidecar submitter, ...),
# given as raw Kubernetes quantities.
ExtraContainer = dict[str, dict[str, str]]


# resource -> quantity text -> its exact int value, for quantities already checked once.
_SEEN: dict[str, dict[str, int]] = {}
_SEEN_MAX = 4096


class _Inexact(Exception):
    """Raised on the fast integer path when some quantity needs rounding; retried exactly."""


def _is_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def is_integer_resource(name: str) -> bool:
    """An extended resource (``nvidia.com/gpu``): Kubernetes accepts only whole amounts of it.

    ``IsExtendedResourceName``: a name with a domain outside ``kubernetes.io`` and not a quota's
    ``requests.`` name. Native resources (cpu, memory, ``hugepages-*``) may be fractional.
    """
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _quantity(ctx: Ctx, exact: bool, name: Any, q: Any, path: str) -> Number:
    """One checked quantity; on the fast path, raises ``_Inexact`` when rounding is needed."""
    if name == "pods":
        raise ctx.err(f"{path}[pods]", "the key is reserved for internal kueue use")
    if type(name) is not str or qualified_name_problem(name) is not None:
        raise ctx.err(f"{path}[{name}]", f"invalid resource name {name!r}")
    try:
        if exact:
            value: Number = parse_quantity_exact(q)
            if name == "cpu":
                value *= 1000
        else:
            value, ok = parse_quantity_rounded(q, name)
            if not ok:
                raise _Inexact
    except Int64RangeError:
        raise _Inexact from None  # the exact path keeps it, and clamps the pod's total
    except QuantityError as exc:
        raise ctx.err(f"{path}[{name}]", str(exc)) from None
    if value < 0:
        raise ctx.err(f"{path}[{name}]", "must be greater than or equal to 0")
    if exact and type(value) is Fraction and value.denominator != 1 and is_integer_resource(name):
        # The fast path rounds nothing (it raises _Inexact), so only the exact path sees these.
        raise ctx.err(f"{path}[{name}]", f"must be an integer, got {q!r}")
    if not exact and type(q) is str:
        seen = _SEEN.get(name)
        if seen is None:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            seen = _SEEN[name] = {}
        elif len(seen) >= _SEEN_MAX:
            seen.clear()
        seen[q] = int(value)
    return value


def _resource_list(
    ctx: Ctx, exact: bool, parent: dict[str, Any], key: str, path: str
) -> ResourceMap:
    raw = parent.get(key)
    if type(raw) is not dict:
        if raw is None:
            return {}
        raise ctx.err(path, f"must be an object, got {type_name(raw)}")
    out: ResourceMap = {}
    if exact:
        for name, q in raw.items():
            out[name] = _quantity(ctx, True, name, q, path)
        return out
    for name, q in raw.items():
        # Manifests repeat a handful of (resource, "quantity") pairs: remember checked ones.
        value = None
        if type(q) is str:
            seen = _SEEN.get(name)
            if seen is not None:
                value = seen.get(q)
        out[name] = _quantity(ctx, False, name, q, path) if value is None else value
    return out


def _requirements(
    ctx: Ctx, exact: bool, res: dict[str, Any], path: str, over: OverLimits
) -> ResourceMap:
    """A container's effective requests: its requests, plus its limits where requests are absent.

    A request above its limit is refused (``over`` None: Kubernetes validates a Job's or a
    RayCluster's pod template so) or noted in ``over`` (a Workload's podSets, which Kueue accepts
    and finds misconfigured when it schedules them: ``ValidateResources``)."""
    requests = _resource_list(ctx, exact, res, "requests", f"{path}.requests")
    if "limits" not in res:
        return requests
    limits = _resource_list(ctx, exact, res, "limits", f"{path}.limits")
    above: list[str] = []
    for name, limit in limits.items():
        req = requests.get(name)
        if req is None:
            requests[name] = limit  # Kubernetes defaulting: requests = limits
        elif req > limit:
            if over is None:
                raise ctx.err(f"{path}.requests[{name}]", REQUESTS_OVER_LIMITS)
            above.append(name)
    if above and over is not None:
        names = ", ".join(f'"{n}"' for n in sorted(above))
        owner = path.removesuffix(".resources") if path.endswith("].resources") else path
        over.append(f"{owner}: Invalid value: []v1.ResourceName{{{names}}}: {REQUESTS_OVER_LIMITS}")
    return requests


def _container(ctx: Ctx, exact: bool, raw: Any, path: str, over: OverLimits) -> ResourceMap:
    if type(raw) is not dict:
        raise ctx.err(path, f"must be an object, got {type_name(raw)}")
    res = raw.get("resources")
    if type(res) is not dict:
        if res is None:
            return {}
        raise ctx.err(f"{path}.resources", f"must be an object, got {type_name(res)}")
    return _requirements(ctx, exact, res, f"{path}.resources", over)


def _add(into: ResourceMap, other: ResourceMap) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: ResourceMap, other: ResourceMap) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _pod_requests(
    ctx: Ctx,
    exact: bool,
    spec: dict[str, Any],
    path: str,
    extra: list[ExtraContainer],
    over: OverLimits,
) -> ResourceMap:
    containers = spec.get("containers")
    if type(containers) is not list:
        if containers is None:
            raise ctx.err(f"{path}.containers", "required value")
        raise ctx.err(f"{path}.containers", f"must be a list, got {type_name(containers)}")
    if not containers:
        raise ctx.err(f"{path}.containers", "must have at least one container")
    total: ResourceMap | None = None
    for i, c in enumerate(containers):
        reqs = _container(ctx, exact, c, f"{path}.containers[{i}]", over)
        if total is None:
            total = reqs  # a fresh dict: safe to accumulate into
        else:
            _add(total, reqs)
    if total is None:
        total = {}
    for i, raw in enumerate(extra):
        p = f"{path}.containers[{len(containers) + i}].resources"
        _add(total, _requirements(ctx, exact, raw, p, []))  # Kueue's own: never over
    inits = spec.get("initContainers")
    if inits:
        if type(inits) is not list:
            raise ctx.err(f"{path}.initContainers", f"must be a list, got {type_name(inits)}")
        sidecars: ResourceMap = {}
        init_peak: ResourceMap = {}
        for i, c in enumerate(inits):
            p = f"{path}.initContainers[{i}]"
            reqs = _container(ctx, exact, c, p, over)
            policy = c.get("restartPolicy")
            if policy is not None and policy != "Always":
                raise ctx.err(
                    f"{p}.restartPolicy",
                    f'unsupported value "{policy}": supported values: "Always"',
                )
            if policy == "Always":  # a sidecar: runs alongside everything after it
                _add(total, reqs)
                _add(sidecars, reqs)
                need = dict(sidecars)
            else:
                need = dict(reqs)
                _add(need, sidecars)
            _max_into(init_peak, need)
        _max_into(total, init_peak)
    pod_res = spec.get("resources")
    if pod_res is not None:
        pod_res = opt_map(ctx, spec, "resources", f"{path}.resources")
        assert pod_res is not None
        pod_level = _requirements(ctx, exact, pod_res, f"{path}.resources", over)
        for name, value in pod_level.items():
            if _is_pod_level_resource(name):
                total[name] = value
    if spec.get("overhead") is not None:
        _add(total, _resource_list(ctx, exact, spec, "overhead", f"{path}.overhead"))
    return total


def _to_ints(values: ResourceMap) -> dict[str, int]:
    """Kueue's int units: rounded up (``Value()``), clamped to int64 (``ResourceValue``)."""
    out: dict[str, int] = {}
    for name, v in values.items():
        if type(v) is not int:
            assert isinstance(v, Fraction)
            n, d = v.numerator, v.denominator
            v = n if d == 1 else -((-n) // d)  # values are >= 0: round up like Value()
        out[name] = min(v, INT64_MAX)
    return out


def _kueue_order(entry: str) -> int:
    """Init containers, then containers, then the pod's own resources, as Kueue lists them."""
    return 0 if ".initContainers[" in entry else 1 if ".containers[" in entry else 2


def pod_requests(
    ctx: Ctx,
    spec: dict[str, Any],
    path: str,
    extra: list[ExtraContainer] | None = None,
    over: OverLimits = None,
) -> dict[str, int]:
    """Per-pod requests in Kueue's int units; ``extra`` lists containers Kueue adds to the pod.

    Values past int64 are clamped to its largest, as Kueue's ``ResourceValue`` and its
    saturating sums do (a quantity Kubernetes accepts is never refused for its size here: such
    a pod set exceeds every quota and waits, as in Kueue). ``over`` is ``_requirements``'."""
    mark = len(over) if over is not None else 0
    try:
        values = _pod_requests(ctx, False, spec, path, extra or [], over)
    except _Inexact:
        if over is not None:
            del over[mark:]  # the exact pass notes them again
        values = _pod_requests(ctx, True, spec, path, extra or [], over)
    if over is not None:
        over[mark:] = sorted(over[mark:], key=_kueue_order)
    return _to_ints(values)


def build_pod_set(
    ctx: Ctx,
    name: str,
    count: int,
    min_count: int | None,
    template: Any,
    path: str,
    extra: list[ExtraContainer] | None = None,
    over: OverLimits = None,
) -> PodSet:
    """One PodSet from a pod template (``path`` points at the template); ``over`` is
    ``pod_requests``'."""
    tmpl = item_map(ctx, template, path)
    spec = opt_map(ctx, tmpl, "spec", f"{path}.spec")
    if spec is None:
        raise ctx.err(f"{path}.spec", "required value")
    sp = f"{path}.spec"
    requests = pod_requests(ctx, spec, sp, extra, over)
    node_selector = (
        string_map(ctx, spec, "nodeSelector", f"{sp}.nodeSelector")
        if spec.get("nodeSelector")
        else {}
    )
    tols = (
        tolerations(ctx, spec, "tolerations", f"{sp}.tolerations")
        if spec.get("tolerations")
        else ()
    )
    affinity = node_selector_terms(ctx, spec, sp) if spec.get("affinity") else ()
    return PodSet(
        name=name,
        count=count,
        requests=requests,
        min_count=min_count,
        node_selector=node_selector,
        tolerations=tols,
        required_affinity=affinity,
    )


def first_container(ctx: Ctx, template: Any, path: str) -> dict[str, Any] | None:
    """The template's first container (Ray's container index 0), if there is one."""
    tmpl = item_map(ctx, template, path)
    spec = opt_map(ctx, tmpl, "spec", f"{path}.spec") or {}
    containers = opt_list(ctx, spec, "containers", f"{path}.spec.containers")
    if not containers:
        return None
    return item_map(ctx, containers[0], f"{path}.spec.containers[0]")
