"""Strategic merge patch (``application/strategic-merge-patch+json``) for the built-in kinds.

kube-apiserver merges a strategic patch into the stored object by the Go types' patch metadata:
a list field with ``patchStrategy: merge`` merges item by item (maps by their ``patchMergeKey``,
primitives as a set), any other list is replaced, maps merge key by key and ``null`` deletes. The
directives kubectl sends ride in the patch: ``$patch: replace|delete|merge`` (on a map or as a
list item), ``$setElementOrder/<field>`` (the order of a merged list), ``$retainKeys`` (keys of a
map to keep, the rest cleared) and ``$deleteFromPrimitiveList/<field>``.

No maintained Python library implements this (apimachinery's ``strategicpatch`` is Go), so it is
written here, small, against Kubernetes' documented behaviour and tested by a table of cases.
The patch metadata is one table per kind (``PATCH_META``): adding a built-in kind is one entry.
Custom resources (Kueue's, Ray's) have no patch metadata; kube-apiserver answers 415 for them,
which ``patching`` does before calling here. Pure functions, no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JsonDoc = dict[str, Any]
Path = tuple[str, ...]


@dataclass(frozen=True)
class ListMeta:
    """One list field's patch strategy: ``merge`` (by ``key`` for maps) or ``retainKeys`` too."""

    key: str | None = None  # patchMergeKey; None for a list of primitives
    retain_keys: bool = False  # ``merge,retainKeys`` (a volume's source is replaced whole)


class PatchError(ValueError):
    """The patch cannot be applied (bad directive, item without its merge key)."""


# ObjectMeta's merge lists, at any object's ``metadata`` (and a pod template's).
_META: dict[Path, ListMeta] = {
    ("finalizers",): ListMeta(),
    ("ownerReferences",): ListMeta("uid"),
}

_CONTAINER: dict[Path, ListMeta] = {
    ("ports",): ListMeta("containerPort"),
    ("env",): ListMeta("name"),
    ("volumeMounts",): ListMeta("mountPath"),
    ("volumeDevices",): ListMeta("devicePath"),
}

_POD_SPEC: dict[Path, ListMeta] = {
    ("volumes",): ListMeta("name", retain_keys=True),
    ("imagePullSecrets",): ListMeta("name"),
    ("hostAliases",): ListMeta("ip"),
    ("topologySpreadConstraints",): ListMeta("topologyKey"),
    ("schedulingGates",): ListMeta("name"),
    ("resourceClaims",): ListMeta("name", retain_keys=True),
}
for _c in ("containers", "initContainers", "ephemeralContainers"):
    _POD_SPEC[(_c,)] = ListMeta("name")
    for _p, _m in _CONTAINER.items():
        _POD_SPEC[(_c, *_p)] = _m


def _under(prefix: Path, table: Mapping[Path, ListMeta]) -> dict[Path, ListMeta]:
    return {(*prefix, *p): m for p, m in table.items()}


def _kind_meta(*parts: Mapping[Path, ListMeta]) -> dict[Path, ListMeta]:
    out: dict[Path, ListMeta] = _under(("metadata",), _META)
    for part in parts:
        out.update(part)
    return out


# Kubernetes' patchMergeKey/patchStrategy for the fields of each built-in kind served here
# (k8s.io/api: core/v1 types.go, batch/v1 types.go). A list not named is replaced whole.
PATCH_META: dict[str, dict[Path, ListMeta]] = {
    "Namespace": _kind_meta({("status", "conditions"): ListMeta("type")}),
    "Job": _kind_meta(
        _under(("spec", "template", "metadata"), _META),
        _under(("spec", "template", "spec"), _POD_SPEC),
        {("status", "conditions"): ListMeta("type")},
    ),
    # No merge lists beyond ObjectMeta's (data and stringData are maps).
    "Secret": _kind_meta(),
    "ConfigMap": _kind_meta(),
}

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def supports(kind: str) -> bool:
    """Whether ``kind`` takes strategic patches (a built-in kind with patch metadata)."""
    return kind in PATCH_META


def apply(kind: str, original: JsonDoc, patch: JsonDoc) -> JsonDoc:
    """``patch`` merged into a copy of ``original`` by ``kind``'s patch metadata."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be an object")
    merged = _merge_map(copy.deepcopy(original), patch, PATCH_META[kind], ())
    return merged if merged is not None else {}


def _merge_map(
    original: JsonDoc, patch: JsonDoc, meta: Mapping[Path, ListMeta], path: Path
) -> JsonDoc | None:
    """The map after the patch; None when the patch says ``$patch: delete``."""
    directive = patch.get(_PATCH)
    if directive == "delete":
        return None
    if directive == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != _PATCH}, meta, path)
    if directive not in (None, "merge"):
        raise PatchError(f"{_where(path)}: unknown $patch directive {directive!r}")
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError(f"{_where(path)}: $retainKeys must be a list of field names")
        for key, value in patch.items():
            plain = not key.startswith((_ORDER, _DELETE_PRIMITIVE)) and key != _RETAIN
            if plain and value is not None and key not in retain:
                raise PatchError(f"{_where((*path, key))}: not in $retainKeys")
        original = {k: v for k, v in original.items() if k in retain}
    orders: dict[str, list[Any]] = {
        k[len(_ORDER) :]: v for k, v in patch.items() if k.startswith(_ORDER)
    }
    before = {field: original.get(field) for field in orders}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            if not isinstance(value, list):
                raise PatchError(f"{_where((*path, key))}: must be a list")
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            current = original.get(field)
            if isinstance(current, list) and isinstance(value, list):
                original[field] = [v for v in current if v not in value]
            continue
        original = _merge_field(original, key, value, meta, (*path, key))
    for field, order in orders.items():
        server = before[field]
        if isinstance(original.get(field), list):
            server_list = server if isinstance(server, list) else []
            lm = meta.get((*path, field))
            original[field] = _ordered(original[field], order, lm, server_list)
    return original


def _merge_field(
    original: JsonDoc, key: str, value: Any, meta: Mapping[Path, ListMeta], path: Path
) -> JsonDoc:
    if value is None:
        original.pop(key, None)
        return original
    current = original.get(key)
    if isinstance(value, dict):
        base = current if isinstance(current, dict) else {}
        merged = _merge_map(base, value, meta, path)
        if merged is None:
            original.pop(key, None)
        else:
            original[key] = merged
    elif isinstance(value, list):
        base_list = current if isinstance(current, list) else []
        merged_list = _merge_list(base_list, value, meta, path)
        if merged_list or not value:
            original[key] = merged_list
        else:  # emptied by its directives: gone, as Go's omitempty drops an empty list
            original.pop(key, None)
    else:
        original[key] = value
    return original


def _merge_list(
    original: list[Any], patch: list[Any], meta: Mapping[Path, ListMeta], path: Path
) -> list[Any]:
    lm = meta.get(path)
    if lm is None:
        return [_strip(i, meta, path) if isinstance(i, dict) else i for i in patch]
    if lm.key is None:  # a set of primitives: union
        out = list(original)
        for item in patch:
            if item not in out:
                out.append(item)
        return _ordered(out, patch, lm, original)
    directives = [i.get(_PATCH) for i in patch if isinstance(i, dict) and _PATCH in i]
    if "merge" in directives:
        raise PatchError(f"{_where(path)}: merging lists cannot yet be specified in the patch")
    if "replace" in directives:
        return [_strip(i, meta, path) for i in patch if isinstance(i, dict) and _PATCH not in i]
    return _merge_keyed(original, patch, lm.key, meta, path)


def _merge_keyed(
    original: list[Any], patch: list[Any], key: str, meta: Mapping[Path, ListMeta], path: Path
) -> list[Any]:
    out = [copy.deepcopy(i) for i in original]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"{_where(path)}: every item must be an object with {key!r}")
        at = next(
            (n for n, o in enumerate(out) if isinstance(o, dict) and o.get(key) == item[key]), None
        )
        if item.get(_PATCH) == "delete":
            if at is not None:
                del out[at]
            continue
        if at is None:
            out.append(_strip(item, meta, path))
        else:
            merged = _merge_map(out[at], item, meta, path)
            if merged is None:
                del out[at]
            else:
                out[at] = merged
    # Without $setElementOrder, the patch's items keep the patch's order among themselves.
    plain = [i for i in patch if isinstance(i, dict) and _PATCH not in i]
    return _ordered(out, plain, meta.get(path), original)


def _ordered(
    items: list[Any], order: list[Any], lm: ListMeta | None, server: list[Any]
) -> list[Any]:
    """``items`` with those named in ``order`` in that order and the others (server-only) in
    their order, interleaved by the live list's order (``server``), as apimachinery's
    ``normalizeElementOrder`` does: an item the live list lacks goes before the server-only
    items still to place."""
    key = lm.key if lm is not None else None

    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    in_patch = [i for i in items if ident(i) in wanted]
    server_only = [i for i in items if ident(i) not in wanted]
    in_patch.sort(key=lambda i: wanted.index(ident(i)))
    server_order = [ident(i) for i in server]
    server_only.sort(key=lambda i: server_order.index(ident(i)) if ident(i) in server_order else 0)

    def before(left: Any, right: Any) -> bool:
        li, ri = ident(left), ident(right)
        if li in server_order and ri in server_order:
            return server_order.index(li) < server_order.index(ri)
        return False

    out: list[Any] = []
    s = p = 0
    while s < len(server_only) or p < len(in_patch):
        if p >= len(in_patch) or (s < len(server_only) and before(server_only[s], in_patch[p])):
            out.append(server_only[s])
            s += 1
        else:
            out.append(in_patch[p])
            p += 1
    return out


def _strip(value: Any, meta: Mapping[Path, ListMeta], path: Path) -> Any:
    """A patch value with its directives resolved, for where nothing is there to merge into."""
    if isinstance(value, dict):
        body = {k: v for k, v in value.items() if k != _PATCH}
        return _merge_map({}, body, meta, path)
    return value


def _where(path: Path) -> str:
    return ".".join(path) or "<root>"
