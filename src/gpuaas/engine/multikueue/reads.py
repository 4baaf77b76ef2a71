"""The MultiKueue controller's reads of the manager: many documents at once.

A pass reads the workloads its events named and the Jobs it sends to workers. ``Engine.get``
takes the engine lock (settling whatever arrived first) and deep-copies each document; a pass
reading dozens of them one by one waited for the lock, and a create's catch-up, as many times.
Here one hold of the lock reads them all, each decoded once as the API shows it (a record
decodes a fresh copy on every read, so no further copy is needed). It reads only: no write, no
remote I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpuaas.vocab.kinds import Kind

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

JsonDoc = dict[str, Any]


def read_docs(engine: Engine, wanted: Iterable[tuple[Kind, str]]) -> dict[str, JsonDoc]:
    """The documents of ``wanted`` (kind, ``namespace/name``) that exist, by ``namespace/name``
    (the keys of one call name one kind each)."""
    found: dict[str, JsonDoc] = {}
    with engine._lock:
        for kind, key in wanted:
            ns, _, name = key.partition("/")
            rec = engine.objects.get(engine.key_of(kind, ns, name))
            if rec is not None:
                found[key] = engine._shown(kind, rec)
    return found


__all__ = ["read_docs"]
