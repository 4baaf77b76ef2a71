"""Server-side dry runs (``dryRun=All``): what a create, replace, patch, apply or delete would
store or answer, checked as the real write would be, with nothing written.

``kubectl diff`` and ``--dry-run=server`` rely on it. It reads the engine's objects under its lock
and calls the same checks (identity, finalizers, parsing); the core's own refusals after parsing
(a quota tree it cannot build) are not previewed, as they would need the core changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuaas.engine import documents, finalizers, generate_name
from gpuaas.engine.errors import AlreadyExists, Conflict, NotFound
from gpuaas.vocab import render
from gpuaas.vocab.kinds import Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

JsonDoc = dict[str, Any]


def preview(
    engine: Engine,
    kind: Kind,
    namespace: str | None,
    name: str | None,
    compute: Callable[[JsonDoc | None], JsonDoc],
    create_missing: bool,
) -> JsonDoc:
    """A server-side dry run (``dryRun=All``): the object a create (``name`` None), replace,
    patch or apply would store, checked as it would be, with nothing written. The core's
    own refusals after parsing (quota trees) are not previewed."""
    with engine._lock:
        key = engine.key_of(kind, namespace, name) if name is not None else None
        old = engine.objects.get(key) if key is not None else None
        if old is None and name is not None and not create_missing:
            raise NotFound(f"{documents.describe(kind, namespace, name)} not found")
        doc = compute(copy.deepcopy(old.doc) if old is not None else None)
        if old is None:
            doc = generate_name.named(
                doc, lambda n: engine.key_of(kind, namespace, n) in engine.objects
            )
        doc = documents.checked(kind, namespace, name, doc)
        meta = doc["metadata"]
        if old is None:
            if engine.key_of(kind, namespace, meta["name"]) in engine.objects:
                raise AlreadyExists(
                    f"{documents.describe(kind, namespace, meta['name'])} already exists"
                )
            engine._check_namespace(kind, namespace)
            finalizers.on_create(kind, meta["name"], doc)
            meta.update(creationTimestamp=render.rfc3339(engine.clock()), generation=1)
            meta.pop("resourceVersion", None)
            doc.pop("status", None)
        else:
            want = meta.get("resourceVersion")
            if want not in (None, "", old.doc["metadata"].get("resourceVersion")):
                raise Conflict(f"{documents.describe(kind, namespace, name or '')}: stale")
            finalizers.on_update(kind, meta["name"], old.doc, doc)
            documents.keep_identity(doc, old.doc)
        documents.parse(doc)
        return engine._shown(kind, old.replace(doc=doc)) if old is not None else doc


def preview_delete(engine: Engine, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
    """What a DELETE would answer, with nothing deleted (``dryRun=All``)."""
    with engine._lock:
        key = engine.key_of(kind, namespace, name)
        owned = engine.objects.get(key) if kind.kind == "Workload" else None
        if owned is not None and owned.internal.get("owner"):
            return copy.deepcopy(owned.doc)  # a job's own Workload: deleted, then made anew
        old = engine._existing_unowned(kind, namespace, name, key, "delete")
        if finalizers.finalizers_of(old.doc) and not finalizers.terminating(old.doc):
            return finalizers.marked_for_deletion(old.doc, render.rfc3339(engine.clock()))
        return copy.deepcopy(old.doc)
