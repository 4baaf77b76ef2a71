"""Field ownership (``metadata.managedFields``) and server-side apply, as structured-merge-diff
keeps them in kube-apiserver.

A field set is a set of paths; a path element is written as FieldsV1 writes it: ``f:name`` (a
struct field or map key), ``k:{"name":"c"}`` (an item of a keyed list), ``v:"x"`` (an item of a
set), ``i:0`` (an index). Each manager's entry (``manager``, ``operation`` Apply or Update,
``apiVersion``, ``time``, ``fieldsType: FieldsV1``, ``fieldsV1``) owns a set:

- an Update (create, replace, patch) owns what it added or changed, taking those fields from every
  other manager; fields it removed belong to nobody;
- an Apply owns exactly the fields of the applied configuration; a field whose value it would change
  and that another manager owns is a conflict (409, each field and manager named), unless forced,
  which moves the field; a field it applied before and no longer applies is removed from the
  object when no other manager owns it.

No maintained Python library does this (structured-merge-diff is Go); this is small and tested by
a table of cases against Kubernetes' documented behaviour. Pure: documents in, documents out.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuaas.api import field_types as ft
from gpuaas.api.subtree_cache import SubtreeCache

JsonDoc = dict[str, Any]
Path = tuple[str, ...]
FieldSet = set[Path]

# Paths kube-apiserver never attributes to a manager (fieldmanager's stripMeta).
_META_IGNORED = {
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
}


@dataclass(frozen=True)
class Conflict:
    manager: str  # as kube-apiserver prints it: ``"kubectl"``, ``"x" using v1 at <time>``
    path: str  # ``.spec.x``


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(message(conflicts))
        self.conflicts = conflicts


def message(conflicts: list[Conflict]) -> str:
    """kube-apiserver's wording (fieldmanager's ``getConflictMessage``)."""
    if len(conflicts) == 1:
        c = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {c.manager}: {c.path}"
    by: dict[str, list[str]] = {}
    for c in conflicts:
        by.setdefault(c.manager, []).append(c.path)
    lines = []
    for manager in sorted(by):
        lines.append(f"conflicts with {manager}:")
        lines += [f"- {p}" for p in by[manager]]
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# -- paths ---------------------------------------------------------------------------------------
def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def item_element(item: Any, lt: str, keys: tuple[str, ...], index: int) -> str:
    if lt == "set":
        return "v:" + _go_json(item)
    if lt == "map" and isinstance(item, dict) and all(k in item for k in keys):
        if len(keys) == 1:  # the common case (a name): written directly when nothing needs escaping
            value = item[keys[0]]
            if (
                type(value) is str
                and value.isprintable()
                and '"' not in value
                and "\\" not in value
            ):
                return f'k:{{"{keys[0]}":"{value}"}}'
        return "k:" + _go_json({k: item[k] for k in keys})
    return f"i:{index}"


def path_string(path: Path) -> str:
    """``.spec.containers[name="c"].image``, as structured-merge-diff prints a path."""
    out = ""
    for pe in path:
        tag, body = pe[:2], pe[2:]
        if tag == "f:":
            out += "." + body
        elif tag == "k:":
            keys = json.loads(body)
            out += "[" + ",".join(f"{k}={_go_json(v)}" for k, v in keys.items()) + "]"
        elif tag == "v:":
            out += f"[={body}]"
        else:
            out += f"[{body}]"
    return out


def _ignored(path: Path, has_status: bool) -> bool:
    if not path:
        return True
    if path[0] in ("f:apiVersion", "f:kind") or (has_status and path[0] == "f:status"):
        return True
    if path[0] == "f:metadata":
        return len(path) == 1 or path[1][2:] in _META_IGNORED
    return False


# -- field sets ----------------------------------------------------------------------------------
def field_set(obj: Any, schema: JsonDoc, has_status: bool) -> FieldSet:
    """The fields an applied configuration sets (structured-merge-diff's ``ToFieldSet``)."""
    out: FieldSet = set()
    _walk(obj, (), schema, out)
    return {p for p in out if not _ignored(p, has_status)}


def _walk(value: Any, path: Path, node: JsonDoc, out: FieldSet) -> None:
    if isinstance(value, dict):
        if ft.atomic_map(node):
            out.add(path)
            return
        for key, sub in value.items():
            here = (*path, f"f:{key}")
            _walk(sub, here, ft.child(node, key), out)
            if sub is None or sub == {} or not ft.declared(node, key):
                out.add(here)
    elif isinstance(value, list):
        lt, keys = ft.list_type(node)
        if lt == "atomic":
            out.add(path)
            return
        for i, item in enumerate(value):
            here = (*path, item_element(item, lt, keys, i))
            _walk(item, here, ft.items(node), out)
            out.add(here)
    else:
        out.add(path)


def changes(old: Any, new: Any, schema: JsonDoc, has_status: bool) -> tuple[FieldSet, FieldSet]:
    """(added or modified, removed) paths from ``old`` to ``new`` (structured-merge-diff's
    ``Compare``): a node that appears is added with everything under it."""
    changed: FieldSet = set()
    removed: FieldSet = set()
    _compare(old, new, (), schema, changed, removed)
    keep = {p for p in changed if not _ignored(p, has_status)}
    return keep, {p for p in removed if not _ignored(p, has_status)}


def _all_nodes(value: Any, path: Path, node: JsonDoc, out: FieldSet) -> None:
    out.add(path)
    if isinstance(value, dict) and not ft.atomic_map(node):
        for key, sub in value.items():
            _all_nodes(sub, (*path, f"f:{key}"), ft.child(node, key), out)
    elif isinstance(value, list):
        lt, keys = ft.list_type(node)
        if lt != "atomic":
            for i, item in enumerate(value):
                _all_nodes(item, (*path, item_element(item, lt, keys, i)), ft.items(node), out)


def _elements(value: list[Any], node: JsonDoc) -> dict[str, Any]:
    lt, keys = ft.list_type(node)
    return {item_element(item, lt, keys, i): item for i, item in enumerate(value)}


def _compare(
    old: Any, new: Any, path: Path, node: JsonDoc, changed: FieldSet, removed: FieldSet
) -> None:
    both_dicts = isinstance(old, dict) and isinstance(new, dict)
    if both_dicts and (old or new) and not ft.atomic_map(node):
        for key in old.keys() | new.keys():
            here, sub = (*path, f"f:{key}"), ft.child(node, key)
            if key not in old:
                _all_nodes(new[key], here, sub, changed)
            elif key not in new:
                _all_nodes(old[key], here, sub, removed)
            else:
                _compare(old[key], new[key], here, sub, changed, removed)
        return
    atomic = ft.list_type(node)[0] == "atomic"
    if isinstance(old, list) and isinstance(new, list) and not atomic and (old or new):
        before, after = _elements(old, node), _elements(new, node)
        for pe in before.keys() | after.keys():
            here = (*path, pe)
            if pe not in before:
                _all_nodes(after[pe], here, ft.items(node), changed)
            elif pe not in after:
                _all_nodes(before[pe], here, ft.items(node), removed)
            else:
                _compare(before[pe], after[pe], here, ft.items(node), changed, removed)
        return
    if old != new:
        changed.add(path)


# -- FieldsV1 encoding ---------------------------------------------------------------------------
def encode(fields: FieldSet) -> JsonDoc:
    tree: JsonDoc = {}
    for path in sorted(fields):
        node = tree
        for pe in path:
            node = node.setdefault(pe, {})
    members = fields

    def mark(node: JsonDoc, path: Path) -> None:
        for pe, sub in node.items():
            here = (*path, pe)
            if sub:
                mark(sub, here)
                if here in members:
                    sub["."] = {}

    mark(tree, ())
    return _sorted(tree)


def _sorted(node: JsonDoc) -> JsonDoc:
    return {k: _sorted(node[k]) for k in sorted(node)}


def decode(tree: Any) -> FieldSet:
    out: FieldSet = set()

    def walk(node: JsonDoc, path: Path) -> None:
        for pe, sub in node.items():
            if pe == ".":
                out.add(path)
                continue
            here = (*path, pe)
            if isinstance(sub, dict) and sub:
                walk(sub, here)
            else:
                out.add(here)

    if isinstance(tree, dict):
        walk(tree, ())
    return out


# -- entries -------------------------------------------------------------------------------------
@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    fields: FieldSet
    subresource: str | None = None

    def printed(self) -> str:
        out = json.dumps(self.manager)
        if self.subresource:
            out += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            out += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return out

    def doc(self) -> JsonDoc:
        out: JsonDoc = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def entries_of(doc: JsonDoc | None) -> list[Entry]:
    meta = (doc or {}).get("metadata") or {}
    out = []
    for e in meta.get("managedFields") or []:
        if not isinstance(e, dict) or not isinstance(e.get("manager"), str):
            continue
        out.append(
            Entry(
                e["manager"],
                str(e.get("operation") or "Update"),
                str(e.get("apiVersion") or ""),
                str(e.get("time") or ""),
                decode(e.get("fieldsV1")),
                e.get("subresource") if isinstance(e.get("subresource"), str) else None,
            )
        )
    return out


def with_entries(doc: JsonDoc, entries: list[Entry]) -> JsonDoc:
    meta = doc.setdefault("metadata", {})
    kept = [e.doc() for e in entries if e.fields]
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)
    return doc


def _find(entries: list[Entry], manager: str, operation: str) -> Entry | None:
    return next((e for e in entries if e.manager == manager and e.operation == operation), None)


def created_fields(doc: JsonDoc, schema: JsonDoc, has_status: bool) -> JsonDoc:
    """The FieldsV1 of every field of ``doc``: ``encode(changes({}, doc)[0])`` in one walk.

    A create's Update owns the whole object; the general path (a set of paths, then a tree from
    it) cost more than the rest of a create's API work, so a create builds the tree directly.
    ``tests/api/test_managed_fields_created.py`` checks both give the same tree."""
    tree: JsonDoc = {}
    for key in sorted(doc):
        if key in ("apiVersion", "kind") or (has_status and key == "status"):
            continue
        sub = ft.child(schema, key)
        if key == "metadata" and isinstance(doc[key], dict):
            meta: JsonDoc = {}
            for mkey in sorted(doc[key]):
                if mkey not in _META_IGNORED:
                    meta[f"f:{mkey}"] = _subtree(doc[key][mkey], ft.child(sub, mkey))
            if meta:
                tree["f:metadata"] = meta
            continue
        # kept by the field's value (``subtree_cache``): a batch system's creates share a spec
        walk = functools.partial(_subtree_json, doc[key], sub)
        tree[f"f:{key}"] = _decode(_CREATED.get(schema, key, doc[key], walk))
    return tree


def _subtree_json(value: Any, node: JsonDoc) -> bytes:
    return msgspec.json.encode(_subtree(value, node))


_CREATED: SubtreeCache[bytes] = SubtreeCache()  # kept encoded: every create gets its own copy
_decode = msgspec.json.decode


def _subtree(value: Any, node: JsonDoc) -> JsonDoc:
    """The FieldsV1 of ``value`` and all below it (``_all_nodes``'s paths, as ``encode`` nests
    them: a node with children also owns itself, written ``"."``, first)."""
    kids: list[tuple[str, Any, JsonDoc]] = []
    if isinstance(value, dict) and not ft.atomic_map(node):
        kids = [(f"f:{k}", value[k], ft.child(node, k)) for k in value]
    elif isinstance(value, list):
        lt, keys = ft.list_type(node)
        if lt != "atomic":
            sub = ft.items(node)
            kids = [(item_element(it, lt, keys, i), it, sub) for i, it in enumerate(value)]
    if not kids:
        return {}
    out: JsonDoc = {".": {}}
    kids.sort(key=lambda kid: kid[0])
    for pe, item, sub in kids:
        tree = _subtree(item, sub)
        if pe in out:  # two list items with the same key: their fields are one set
            out[pe] = _sorted(_merged(out[pe], tree))
        else:
            out[pe] = tree
    return out


def _merged(a: JsonDoc, b: JsonDoc) -> JsonDoc:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merged(out[k], v) if k in out else v
    return out


def record_update(
    old: JsonDoc | None,
    new: JsonDoc,
    manager: str,
    api_version: str,
    now: str,
    schema: JsonDoc,
    has_status: bool,
    *,
    base: list[Entry] | None = None,
) -> JsonDoc:
    """``new`` with its managedFields after ``manager``'s Update (create, replace or patch),
    over ``base`` (what the request set, when it set them) or else ``old``'s entries."""
    if old is None and not base:  # a create: this manager owns every field
        fields = created_fields(_body(new), schema, has_status)
        out = new.setdefault("metadata", {})
        if fields:
            entry = Entry(manager, "Update", api_version, now, set()).doc()
            out["managedFields"] = [{**entry, "fieldsV1": fields}]
        else:
            out.pop("managedFields", None)
        return new
    entries = entries_of(old) if base is None else base
    added, removed = changes(_body(old or {}), _body(new), schema, has_status)
    for e in entries:
        if e.manager != manager or e.operation != "Update":
            e.fields -= added
        e.fields -= removed
    mine = _find(entries, manager, "Update")
    if added:
        if mine is None:
            mine = Entry(manager, "Update", api_version, now, set())
            entries.append(mine)
        mine.fields |= added
        mine.time, mine.api_version = now, api_version
    return with_entries(new, entries)


def _body(doc: JsonDoc) -> JsonDoc:
    out = {k: v for k, v in doc.items()}
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


# -- apply ---------------------------------------------------------------------------------------
def merge(live: Any, config: Any, node: JsonDoc) -> Any:
    """``config`` merged into ``live`` by the schema: structs and maps by key, keyed lists and
    sets by item, atomic lists and scalars replaced."""
    if isinstance(live, dict) and isinstance(config, dict) and not ft.atomic_map(node):
        out = dict(live)
        for key, sub in config.items():
            if sub is None:
                out.pop(key, None)
            else:
                out[key] = merge(live.get(key), sub, ft.child(node, key))
        return out
    lt, _ = ft.list_type(node)
    if isinstance(live, list) and isinstance(config, list) and lt != "atomic":
        before = _elements(live, node)
        after = _elements(config, node)
        out_list = [
            merge(item, after[pe], ft.items(node)) if pe in after else item
            for pe, item in before.items()
        ]
        out_list += [item for pe, item in after.items() if pe not in before]
        return out_list
    return copy.deepcopy(config)


def remove(obj: Any, path: Path, node: JsonDoc) -> None:
    """Delete the value at ``path`` from ``obj`` (in place), if it is there."""
    if not path:
        return
    pe, rest = path[0], path[1:]
    if isinstance(obj, dict) and pe.startswith("f:"):
        key = pe[2:]
        if key not in obj:
            return
        if rest:
            remove(obj[key], rest, ft.child(node, key))
        else:
            del obj[key]
    elif isinstance(obj, list):
        elements = list(_elements(obj, node).keys())
        if pe not in elements:
            return
        at = elements.index(pe)
        if rest:
            remove(obj[at], rest, ft.items(node))
        else:
            del obj[at]


def apply(
    live: JsonDoc | None,
    config: JsonDoc,
    manager: str,
    api_version: str,
    now: str,
    schema: JsonDoc,
    has_status: bool,
    *,
    force: bool,
) -> JsonDoc:
    """The object after ``manager`` applies ``config`` to ``live`` (None: it is created).

    Raises ``ApplyConflict`` naming every field another manager owns and this apply would
    change, unless ``force``. The result's managedFields are set; an apply that changes nothing
    returns the live object unchanged (equal), so the caller can skip the write.
    """
    entries = entries_of(live)
    base = _body(live or {})
    config = _body(config)
    config["metadata"].pop("resourceVersion", None)
    applied = field_set(config, schema, has_status)
    merged = merge(base, config, schema)
    changed, _ = changes(base, merged, schema, has_status)
    conflicts = []
    for e in entries:
        if e.manager == manager and e.operation == "Apply":
            continue
        for path in sorted(e.fields & changed):
            conflicts.append((e, path))
    if conflicts and not force:
        raise ApplyConflict([Conflict(e.printed(), path_string(p)) for e, p in conflicts])
    for e, path in conflicts:
        e.fields.discard(path)
    mine = _find(entries, manager, "Apply")
    previous = mine.fields if mine is not None else set()
    kept: FieldSet = set(applied)  # what someone still owns, this apply included
    for e in entries:
        if e is not mine:
            kept |= e.fields
    removed: list[Path] = []
    for path in sorted(previous - applied, key=len):  # an item before its fields
        if any(path[: len(r)] == r for r in removed):
            continue  # gone with its item or parent
        if path not in kept and not any(o[: len(path)] == path for o in kept):
            remove(merged, path, schema)
            removed.append(path)
    if mine is None:
        mine = Entry(manager, "Apply", api_version, now, set())
        entries.append(mine)
    if mine.fields != applied or changed or previous - applied:
        mine.fields, mine.time, mine.api_version = applied, now, api_version
    return with_entries(merged, entries)
