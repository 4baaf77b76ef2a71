"""Read-compute-write updates of stored objects, as kube-apiserver's ``GuaranteedUpdate`` does.

``Engine`` inherits ``Updates``. A merge patch, a JSON or strategic patch and a server-side apply
all compute the new object from a copy of the stored one and write it on the condition that
nobody wrote it meanwhile; on a conflict they read and compute again, a bounded number of times.
The write itself is the engine's ``create`` or ``replace``: nothing here touches the Cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuaas.engine import documents
from gpuaas.engine.errors import AlreadyExists, Conflict, Invalid, NotFound
from gpuaas.engine.readmodel import ObjectIndex
from gpuaas.engine.settling import SettlingLock
from gpuaas.store import JsonDoc, ObjectKey
from gpuaas.vocab.kinds import Kind

_WRITE_TRIES = 5  # reads and computes of one patch while others keep writing the object


class Updates:
    """Patches and the retrying write under them; see the module docstring."""

    _lock: SettlingLock
    objects: ObjectIndex

    if TYPE_CHECKING:  # the engine's own, for the type checker only

        def key_of(self, kind: Kind, namespace: str | None, name: str) -> ObjectKey: ...
        def create(self, kind: Kind, namespace: str | None, doc: JsonDoc) -> JsonDoc: ...
        def replace(
            self, kind: Kind, namespace: str | None, name: str, doc: JsonDoc
        ) -> JsonDoc: ...

    def patch(self, kind: Kind, namespace: str | None, name: str, patch: JsonDoc) -> JsonDoc:
        """JSON merge patch (RFC 7386) of the stored object, then the same path as replace."""

        def merged(old: JsonDoc | None) -> JsonDoc:
            out = documents.merge_patch(old, patch)
            if not isinstance(out, dict):
                raise Invalid(
                    f"{documents.describe(kind, namespace, name)}: a patch must be an object"
                )
            return out

        return self.write(kind, namespace, name, merged)

    def write(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        compute: Callable[[JsonDoc | None], JsonDoc],
        *,
        create_missing: bool = False,
    ) -> JsonDoc:
        """Read, compute and write as kube-apiserver's GuaranteedUpdate does: ``compute`` gets a
        copy of the stored object (None if there is none) and returns the new one, which is
        created, or replaced on the condition that nothing wrote the object meanwhile (its
        resourceVersion); if something did, it reads and computes again. Patches and
        server-side apply go through here; the commit is waited for outside the lock."""
        for _ in range(_WRITE_TRIES):
            with self._lock:
                old = self.objects.get(self.key_of(kind, namespace, name))
                if old is None and not create_missing:
                    raise NotFound(f"{documents.describe(kind, namespace, name)} not found")
                new = compute(copy.deepcopy(old.doc) if old is not None else None)
            seen = old.doc["metadata"].get("resourceVersion") if old is not None else None
            meta = new.get("metadata") if isinstance(new, dict) else None
            asked = meta.get("resourceVersion") if isinstance(meta, dict) else None
            try:
                if old is None:
                    return self.create(kind, namespace, new)
                if isinstance(meta, dict) and asked in (None, "", seen):
                    new = {**new, "metadata": {**meta, "resourceVersion": seen}}
                return self.replace(kind, namespace, name, new)
            except Conflict:
                if asked not in (None, "", seen):
                    raise  # the request's own precondition failed: the client must retry
            except AlreadyExists:
                if old is not None or not create_missing:
                    raise
        raise Conflict(f"{documents.describe(kind, namespace, name)}: written by others meanwhile")
