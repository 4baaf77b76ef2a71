"""``limit``/``continue`` pages that are consistent at the first page's resourceVersion.

kube-apiserver reads every page of a list at the resourceVersion of its first page (etcd keeps
old revisions until compaction), so a list read in chunks (``kubectl get --chunk-size``, client-go
pagers) never shows an object twice or misses one that existed throughout. gpuaas's engine keeps
only the present, so the first page keeps the whole narrowed list it was cut from (references to
the documents the engine handed out, which are never changed in place), and each continue token
names that list and its resourceVersion. A token whose list is gone (older than ``ttl`` seconds,
evicted by newer lists, or from before a restart) is answered 410 Expired with
kube-apiserver's message, as a compacted revision is. Nothing here touches the engine.
"""

from __future__ import annotations

import base64
import bisect
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from gpuaas.api.body import BodyError
from gpuaas.api.status import KubeError

JsonDoc = dict[str, Any]

EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


def _key(doc: JsonDoc) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _keys(docs: Sequence[JsonDoc]) -> list[tuple[str, str]]:
    """Every item's (namespace, name): from the list itself when it can tell them without
    decoding its items (``engine.listed.ListedDocs``)."""
    item_keys = getattr(docs, "item_keys", None)
    return list(item_keys()) if callable(item_keys) else [_key(d) for d in docs]


def encode(state: JsonDoc) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode()


def decode(token: str) -> JsonDoc:
    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not isinstance(state, dict) or not isinstance(state.get("start"), list):
            raise ValueError("no start key")
        return state
    except (ValueError, TypeError) as exc:
        raise BodyError(400, "continue key is not valid: cannot decode") from exc


class Pages:
    """The lists that open continue tokens read from, each kept ``ttl`` seconds (at most
    ``keep`` of them: a newer list pushes out the oldest)."""

    def __init__(
        self, *, ttl: float = 300.0, keep: int = 64, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl, self._keep, self._clock = ttl, keep, clock
        # list id -> (when kept, resourceVersion, documents, their (namespace, name) keys)
        self._lists: OrderedDict[
            str, tuple[float, int, Sequence[JsonDoc], list[tuple[str, str]]]
        ] = OrderedDict()
        self._lock = threading.Lock()

    def _remember(self, rv: int, docs: Sequence[JsonDoc]) -> str:
        ident = secrets.token_hex(8)
        with self._lock:
            self._expire()
            self._lists[ident] = (self._clock(), rv, docs, _keys(docs))
            while len(self._lists) > self._keep:
                self._lists.popitem(last=False)
        return ident

    def _expire(self) -> None:
        now = self._clock()
        for ident in [i for i, (at, *_) in self._lists.items() if now - at > self._ttl]:
            del self._lists[ident]

    def _recall(self, ident: str) -> tuple[int, Sequence[JsonDoc], list[tuple[str, str]]] | None:
        with self._lock:
            self._expire()
            found = self._lists.get(ident)
        return None if found is None else found[1:]

    def page(
        self,
        read: Callable[[], tuple[Sequence[JsonDoc], int]],
        limit: int | None,
        token: str | None,
    ) -> tuple[list[JsonDoc], int, str | None, int | None]:
        """One page: (items, resourceVersion, continue token or None, items remaining).

        ``read`` gives the whole narrowed list, sorted by namespace and name, and its
        resourceVersion; it is called for a first page only."""
        if token:
            state = decode(token)
            found = self._recall(str(state.get("list", "")))
            if found is None:
                raise KubeError(410, "Expired", EXPIRED)
            rv, docs, keys = found
            after = tuple(str(x) for x in state["start"])
            start = bisect.bisect_right(keys, after)
            ident = str(state["list"])
        else:
            docs, rv = read()
            start, ident = 0, ""
        if not limit or limit <= 0 or start + limit >= len(docs):
            return list(docs[start:]), rv, None, None
        items = list(docs[start : start + limit])
        if not ident:
            ident = self._remember(rv, docs)
        nxt = encode({"rv": rv, "start": list(_key(items[-1])), "list": ident})
        return items, rv, nxt, len(docs) - start - limit
