"""Events as Kubernetes serves them: ``v1 Event`` and ``events.k8s.io/v1 Event``, read only.

The audit trail (``store`` events: Kueue's QuotaReserved, Admitted, Preempted, ..., the runtime's
Started/Stopped) is served on ``/api/v1[/namespaces/{ns}]/events`` and
``/apis/events.k8s.io/v1[/namespaces/{ns}]/events``, as lists or Tables (``kubectl get events``,
kube-apiserver's event printer), with the field selectors Kubernetes supports on events
(``involvedObject.*``, ``reason``, ``type``, ``source``; ``kubectl describe`` selects by them)
and label selectors, filtered to the caller's namespaces, and watched (``kubectl get events -w``,
``-A``). Events carry no uid of their object,
so a selector on ``involvedObject.uid`` matches every event of that object.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from gpuaas.api import selectors, tables
from gpuaas.api.auth import authenticate, require_namespace
from gpuaas.api.body import int_param
from gpuaas.api.json_response import FastJSONResponse
from gpuaas.api.runtime_book import BOOKMARK_SECONDS
from gpuaas.engine.engine import Engine
from gpuaas.store import EventRecord
from gpuaas.vocab.render import rfc3339

JsonDoc = dict[str, Any]
EVENTS_V1 = "/apis/events.k8s.io/v1"
POLL_SECONDS = 0.25  # how often an open watch of events reads the store for new ones


def micro_time(ts: float) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds, UTC."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _involved(e: EventRecord) -> JsonDoc:
    kind, _, ref = e.object.partition(" ")
    ns, _, name = ref.rpartition("/")
    return {"kind": kind, "name": name, **({"namespace": ns} if ns else {})}


def event_doc(e: EventRecord) -> JsonDoc:
    """A ``v1 Event``."""
    doc: JsonDoc = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"gpuaas.{e.id}",
            "namespace": e.namespace,
            "resourceVersion": str(e.id),
            "creationTimestamp": rfc3339(e.time),
        },
        "type": e.type,
        "reason": e.reason,
        "message": e.message,
        "involvedObject": _involved(e),
        "firstTimestamp": rfc3339(e.time),
        "lastTimestamp": rfc3339(e.time),
        "eventTime": micro_time(e.time),
        "count": 1,
        "source": {"component": "gpuaas"},
        "reportingComponent": "gpuaas",
        "reportingInstance": "gpuaas",
    }
    if e.related:
        doc["related"] = {"kind": "Workload", "name": e.related}
    return doc


def events_v1_doc(e: EventRecord) -> JsonDoc:
    """An ``events.k8s.io/v1 Event`` (``regarding``, ``note``, ``reportingController``)."""
    core = event_doc(e)
    doc: JsonDoc = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": core["metadata"],
        "eventTime": core["eventTime"],
        "reportingController": "gpuaas",
        "reportingInstance": "gpuaas",
        "action": e.reason,
        "reason": e.reason,
        "regarding": core["involvedObject"],
        "note": e.message,
        "type": e.type,
        "deprecatedFirstTimestamp": core["firstTimestamp"],
        "deprecatedLastTimestamp": core["lastTimestamp"],
        "deprecatedCount": 1,
    }
    if "related" in core:
        doc["related"] = core["related"]
    return doc


def _without_uid(raw: str) -> str:
    return ",".join(
        p
        for p in raw.split(",")
        if not p.strip().startswith(("involvedObject.uid", "regarding.uid"))
    )


def _object_filter(raw: str, namespace: str | None) -> str | None:
    """The store's ``Kind ns/name`` key when the selector names one object (a narrow query)."""
    name = selectors.wanted("involvedObject.name", raw) or selectors.wanted("regarding.name", raw)
    kind = selectors.wanted("involvedObject.kind", raw) or selectors.wanted("regarding.kind", raw)
    if name is None or kind is None:
        return None
    ns = selectors.wanted("involvedObject.namespace", raw)
    ns = namespace if ns is None else ns
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def install(app: FastAPI) -> None:
    router = APIRouter()

    async def events(request: Request, namespace: str | None, v1: bool) -> Response:
        s = request.app.state
        engine: Engine = s.engine
        p = await authenticate(request, s.tokens)
        if namespace is not None:
            require_namespace(p, namespace, "list events")
        q = request.query_params
        raw = _without_uid(q.get("fieldSelector", ""))
        fields = selectors.field_selector(raw, "Event")
        labels = selectors.label_selector(q.get("labelSelector", ""))
        obj = _object_filter(raw, namespace)

        def shown(records: list[EventRecord]) -> list[JsonDoc]:
            """The records the caller may see and selected, as the asked version's Events."""
            if not p.admin:
                records = [r for r in records if r.namespace in p.namespaces]
            out = []
            for r in records:
                doc = event_doc(r)
                if fields(doc) and labels(doc):
                    out.append(events_v1_doc(r) if v1 else doc)
            return out

        include = q.get("includeObject", "Metadata")
        as_table = tables.wants_table(request.headers.get("accept", ""))
        if q.get("watch", "").lower() in ("true", "1"):

            def read(after: int) -> list[JsonDoc]:
                return shown([r for r in engine.events(namespace, obj) if r.id > after])

            def render(doc: JsonDoc) -> JsonDoc:
                return tables.table(None, "v1", [doc], include=include) if as_table else doc

            gen = _watch(
                read,
                render,
                int_param("resourceVersion", q.get("resourceVersion")),
                int_param("timeoutSeconds", q.get("timeoutSeconds")),
                "events.k8s.io/v1" if v1 else "v1",
                bookmarks=q.get("allowWatchBookmarks", "").lower() == "true",
            )
            return StreamingResponse(gen, media_type="application/json")
        records = await run_in_threadpool(engine.events, namespace, obj)
        docs = shown(records)
        rv = str(max((r.id for r in records), default=0))
        if as_table:
            table = tables.table(
                None, "v1", docs, include=include, metadata={"resourceVersion": rv}
            )
            return FastJSONResponse(table, media_type=tables.TABLE_MEDIA)
        return FastJSONResponse(
            {
                "apiVersion": "events.k8s.io/v1" if v1 else "v1",
                "kind": "EventList",
                "metadata": {"resourceVersion": rv},
                "items": docs,
            }
        )

    for base, v1 in (("/api/v1", False), (EVENTS_V1, True)):
        op = "events_v1" if v1 else "events"
        _routes(router, base, v1, op, events)
    app.include_router(router)


async def _watch(
    read: Callable[[int], list[JsonDoc]],
    render: Callable[[JsonDoc], JsonDoc],
    resource_version: int | None,
    timeout: int | None,
    api_version: str,
    *,
    bookmarks: bool,
) -> AsyncIterator[bytes]:
    """``?watch=true`` on events: the audit trail is append-only and each event's id is its
    resourceVersion, so a watch sends the events after the version it starts from (all of them
    without one, as ADDED), then each new one as it is stored. New events are read every
    ``POLL_SECONDS``: events reach the store in the engine's commits, outside the object
    watch hub."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    last = resource_version or 0
    idle_since = loop.time()
    first = True
    while first or deadline is None or loop.time() < deadline:
        if not first:
            await asyncio.sleep(POLL_SECONDS)
        docs = await run_in_threadpool(read, last)
        for doc in docs:
            last = max(last, int(doc["metadata"]["resourceVersion"]))
            yield (json.dumps({"type": "ADDED", "object": render(doc)}) + "\n").encode()
        if docs:
            idle_since = loop.time()
        if bookmarks and (first or loop.time() - idle_since >= BOOKMARK_SECONDS):
            idle_since = loop.time()
            meta = {"resourceVersion": str(last)}
            bookmark = {"kind": "Event", "apiVersion": api_version, "metadata": meta}
            yield (json.dumps({"type": "BOOKMARK", "object": bookmark}) + "\n").encode()
        first = False


def _routes(router: APIRouter, base: str, v1: bool, op: str, events: Any) -> None:
    @router.get(f"{base}/events", tags=["Event"], operation_id=f"list_{op}_all")
    async def _all(request: Request) -> Response:
        return await events(request, None, v1)  # type: ignore[no-any-return]

    @router.get(
        f"{base}/namespaces/{{namespace}}/events", tags=["Event"], operation_id=f"list_{op}"
    )
    async def _ns(request: Request, namespace: str) -> Response:
        return await events(request, namespace, v1)  # type: ignore[no-any-return]
