"""Results of pure per-field walks of a request body, kept by the field's value as JSON.

A create walks its body three times in Python before the engine sees it: the body checks
(``body.check_document``), unknown fields (``validation``) and field ownership
(``managed_fields.created_fields``); together about a quarter of a create's event-loop time in
``bench/api.py``'s profile. Yet clients create thousands of objects from one template: the
``spec`` of a batch system's Workloads or Jobs is the same document again and again, and only
``metadata`` differs. ``SubtreeCache`` keeps what such a walk found for one top-level field of a
document (its ``context``: the schema and field walked) under that field's value encoded as JSON
by msgspec, which is a fraction of a walk's cost. Equal encodings are equal values for the
documents that reach a cache: plain JSON with finite numbers (``body.check_document`` refuses
the rest first; msgspec writes a NaN as ``null``, so a walk that must tell them apart may only
use a cache for documents msgspec decoded). Results are kept as given: callers keep immutable
ones (tuples, bytes) and hand out copies. Bounded: a value over ``MAX_BYTES`` is never kept,
and the whole cache is dropped when it holds ``MAX_ENTRIES``.

No I/O and no locks: one dict read or write at a time, atomic under the GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

MAX_BYTES = 16 * 1024  # a Job's or Workload's spec is a few hundred bytes to a few KiB
MAX_ENTRIES = 1024

_R = TypeVar("_R")
_encode = msgspec.json.encode


class SubtreeCache(Generic[_R]):
    """``compute()``'s result for ``(context, value)``, kept by ``value``'s JSON."""

    def __init__(self) -> None:
        # (id(context), field, JSON) -> (context, result); the context is kept so its id stays its
        self._kept: dict[tuple[int, str, bytes], tuple[object, _R]] = {}

    def get(self, context: object, field: str, value: Any, compute: Callable[[], _R]) -> _R:
        try:
            raw = _encode(value)
        except (TypeError, ValueError, msgspec.EncodeError):  # not plain JSON: never kept
            return compute()
        if len(raw) > MAX_BYTES:
            return compute()
        key = (id(context), field, raw)
        hit = self._kept.get(key)
        if hit is not None and hit[0] is context:
            return hit[1]
        result = compute()
        if len(self._kept) >= MAX_ENTRIES:
            self._kept = {}
        self._kept[key] = (context, result)
        return result
