"""A worker cluster as the manager reaches it: a kubeconfig, checked as Kueue checks it, and the
few Kubernetes REST calls MultiKueue makes.

Kueue loads a MultiKueueCluster's kubeconfig from the Secret key ``kubeconfig`` in its own
namespace (or a file under a path), refuses unsafe ones (``InsecureKubeConfig``: TLS verification
off, a CA or token given as a file, basic auth, exec or auth-provider plugins) and connects with
it. This module does the same over the plain Kubernetes paths, so a worker can be a gpuaas
server or a Kubernetes cluster running Kueue: request/response calls (the copies' and Jobs'
writes, lists, gets) on a small pool of kept-alive connections (``connections``: one send of
the request, the answer read by httptools' C parser) with bodies encoded and decoded by msgspec
(the hub makes six writes per workload), watches on a connection each, read the same way
(``streams``). It owns sockets only; what to call when is the
controller's business. Every call has a short timeout, so that a worker that stops answering
costs the controller seconds, never a hang.
"""

from __future__ import annotations

import base64
import binascii
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import msgspec
import yaml

from gpuaas.engine.multikueue.connections import Connections
from gpuaas.engine.multikueue.streams import Stream

JsonDoc = dict[str, Any]
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
JOBS = "/apis/batch/v1"
_CONNECT, _READ = 2.0, 5.0
_TIMEOUT = httpx.Timeout(_READ, connect=_CONNECT)
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class _Metadata(msgspec.Struct, omit_defaults=True):
    """A watched object's metadata without its ``managedFields``, which nothing in the manager
    reads (a third of a gpuaas worker's Workload event, and many small dicts to build)."""

    name: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None
    generation: Any = None
    creationTimestamp: Any = None
    deletionTimestamp: Any = None
    labels: Any = None
    annotations: Any = None
    ownerReferences: Any = None
    finalizers: Any = None


class _Watched(msgspec.Struct, omit_defaults=True):
    """What the manager keeps of a watched copy or Job: its metadata and status (its cache and
    the controller read nothing else: ``workers``, ``remote_copy``, the Job status mirror); the
    spec, a whole pod template for a real Job, is skipped unread. ``message``, ``reason`` and
    ``code``: an ERROR event's Status."""

    apiVersion: Any = None
    kind: Any = None
    metadata: _Metadata | None = None
    status: Any = None
    message: Any = None
    reason: Any = None
    code: Any = None


class _WatchEvent(msgspec.Struct):
    type: Any = None
    object: _Watched | None = None


_decode_event = msgspec.json.Decoder(_WatchEvent).decode
# A watch asks the server to end it after this long (and the bookmarks it asks for come every
# few seconds on a gpuaas server); a stream silent for longer than _WATCH_READ is re-watched.
WATCH_SECONDS = 60
_WATCH_READ = 15.0


class KubeConfigError(Exception):
    """The kubeconfig cannot be used; ``reason`` is the Active condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class RemoteError(Exception):
    """A call to a worker failed (it did not answer, or answered an error: ``status``, else 0)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Target:
    server: str
    token: str
    ca_data: bytes | None


def parse_kubeconfig(raw: bytes) -> Target:
    """The current context's server, bearer token and CA, or ``KubeConfigError``."""
    try:
        cfg = yaml.safe_load(raw.decode())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise KubeConfigError("BadKubeConfig", f"failed to parse kubeconfig: {exc}") from None
    if not isinstance(cfg, dict):
        raise KubeConfigError("BadKubeConfig", "failed to parse kubeconfig: not a mapping")

    def named(section: str, name: str | None) -> JsonDoc:
        for entry in cfg.get(section) or []:
            if isinstance(entry, dict) and (name is None or entry.get("name") == name):
                inner = entry.get(section[:-1] if section != "users" else "user")
                return inner if isinstance(inner, dict) else {}
        return {}

    context = named("contexts", cfg.get("current-context"))
    cluster = named("clusters", context.get("cluster"))
    user = named("users", context.get("user"))
    for entry in cfg.get("clusters") or []:
        c = entry.get("cluster") if isinstance(entry, dict) else None
        name = entry.get("name") if isinstance(entry, dict) else "?"
        if isinstance(c, dict):
            if c.get("insecure-skip-tls-verify"):
                raise KubeConfigError(
                    "InsecureKubeConfig",
                    f"insecure TLS verification is not allowed for cluster {name}",
                )
            if c.get("certificate-authority"):
                raise KubeConfigError(
                    "InsecureKubeConfig",
                    "certificate-authority file paths are not allowed, use "
                    f"certificate-authority-data for cluster {name}",
                )
            if not c.get("server"):
                raise KubeConfigError(
                    "InsecureKubeConfig", f"server URL is required for cluster {name}"
                )
    if user.get("tokenFile"):
        raise KubeConfigError("InsecureKubeConfig", "tokenFile is not allowed")
    if user.get("username") or user.get("password"):
        raise KubeConfigError("InsecureKubeConfig", "basic auth is not allowed")
    if user.get("exec"):
        raise KubeConfigError("InsecureKubeConfig", "exec plugins are not allowed")
    if user.get("auth-provider"):
        raise KubeConfigError("InsecureKubeConfig", "auth providers are not allowed")
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeConfigError("BadKubeConfig", "no cluster for the current context")
    ca = cluster.get("certificate-authority-data")
    try:
        ca_data = base64.b64decode(ca, validate=True) if ca else None
    except (binascii.Error, ValueError):
        raise KubeConfigError("BadKubeConfig", "certificate-authority-data: bad base64") from None
    return Target(server.rstrip("/"), str(user.get("token") or ""), ca_data)


def _ssl_context(ca_data: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    try:
        ctx.load_verify_locations(cadata=ca_data.decode())
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        with tempfile.NamedTemporaryFile() as f:  # DER, or PEM with odd bytes
            f.write(ca_data)
            f.flush()
            ctx.load_verify_locations(cafile=f.name)
    return ctx


@dataclass(frozen=True, slots=True)
class Call:
    """One request/response call: its method, path (and query), JSON body, and the error
    statuses that count as done (a create's 409, a delete's 404)."""

    method: str
    path: str
    body: JsonDoc | None = None
    allowed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    """A worker's answer to one call: its status and its body, decoded on demand."""

    method: str
    path: str
    status: int
    body: bytes

    def json(self) -> Any:
        try:
            return _decode(self.body)
        except msgspec.DecodeError:
            raise RemoteError(f"{self.method} {self.path}: not JSON") from None

    def ok(self, *allowed: int) -> Answer:
        """Itself when it is a success (or an ``allowed`` status), else ``RemoteError`` with
        the worker's message."""
        if self.status < 300 or self.status in allowed:
            return self
        text = self.body.decode(errors="replace")
        try:
            doc = _decode(self.body)
            message = str(doc.get("message") or text) if isinstance(doc, dict) else text
        except msgspec.DecodeError:
            message = text
        raise RemoteError(f"{self.method} {self.path}: {self.status}: {message}", self.status)


class RemoteClient:
    """The manager's connection to one worker."""

    def __init__(self, target: Target) -> None:
        self.target = target
        context = _ssl_context(target.ca_data) if target.ca_data is not None else None
        verify: ssl.SSLContext | bool = context or True
        headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
        self.http = httpx.Client(
            base_url=target.server, headers=headers, verify=verify, timeout=_TIMEOUT
        )
        self._conns = Connections(target.server, context, _CONNECT, _READ)
        plain = {**headers, "Accept": "application/json"}
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in plain.items())
        self._body_headers = f"{self._headers}Content-Type: application/json\r\n"

    def close(self) -> None:
        self._conns.close()
        self.http.close()

    def _call(self, method: str, path: str, body: JsonDoc | None = None) -> Answer:
        data = None if body is None else _encode(body)
        headers = self._headers if data is None else self._body_headers
        try:
            status, answer = self._conns.call(self._conns.request(method, path, headers, data))
        except OSError as exc:
            detail = str(exc) or type(exc).__name__
            raise RemoteError(f"{method} {self.target.server}{path}: {detail}") from None
        return Answer(method, path.partition("?")[0], status, answer)

    def calls(self, calls: Sequence[Call]) -> list[Answer | RemoteError]:
        """Several calls at once from this thread (``Connections.call_many``), each answered
        or failed apart: a pass's writes to this worker pay no thread hand-off each."""
        encoded = [None if c.body is None else _encode(c.body) for c in calls]
        requests = [
            self._conns.request(
                c.method, c.path, self._headers if data is None else self._body_headers, data
            )
            for c, data in zip(calls, encoded, strict=True)
        ]
        out: list[Answer | RemoteError] = []
        for c, got in zip(calls, self._conns.call_many(requests), strict=True):
            if isinstance(got, OSError):
                detail = str(got) or type(got).__name__
                out.append(RemoteError(f"{c.method} {self.target.server}{c.path}: {detail}"))
                continue
            try:
                out.append(Answer(c.method, c.path.partition("?")[0], *got).ok(*c.allowed))
            except RemoteError as exc:
                out.append(exc)
        return out

    def list_labelled(self, base: str, plural: str, label: str, value: str) -> list[JsonDoc]:
        return self.list_with_version(base, plural, label, value)[0]

    def list_with_version(
        self, base: str, plural: str, label: str, value: str
    ) -> tuple[list[JsonDoc], str]:
        """The labelled objects and the list's resourceVersion, where a watch starts."""
        sel = quote(f"{label}={value}", safe="")
        body = self._call("GET", f"{base}/{plural}?labelSelector={sel}").ok().json()
        if not isinstance(body, dict):
            raise RemoteError(f"GET {base}/{plural}: not a list")
        items = body.get("items") or []
        rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return [i for i in items if isinstance(i, dict)], rv

    def watch(
        self, base: str, plural: str, label: str, value: str, resource_version: str
    ) -> Iterator[tuple[str, JsonDoc]]:
        """The changes after ``resource_version`` as (type, object: its metadata, less
        ``managedFields``, and its status; ``_Watched``), BOOKMARKs included, until
        the server ends the stream or it stays silent too long (then it just ends: the caller
        watches again from the last resourceVersion). An ERROR event (410 Expired: the caller
        lists again) and a failed connection raise ``RemoteError``."""
        sel = quote(f"{label}={value}", safe="")
        path = (
            f"{base}/{plural}?watch=true&labelSelector={sel}&allowWatchBookmarks=true"
            f"&timeoutSeconds={WATCH_SECONDS}&resourceVersion={quote(resource_version)}"
        )
        request = self._conns.request("GET", path, self._headers, None)
        where = f"watch {self.target.server}{base}/{plural}"
        try:
            stream = Stream(self._conns.open_stream(_WATCH_READ), request)
        except OSError as exc:  # no connection, or no answer to the request
            raise RemoteError(f"{where}: {str(exc) or type(exc).__name__}") from None
        try:
            if stream.status >= 300:
                Answer("GET", f"{base}/{plural}", stream.status, stream.body()).ok()
            for line in stream.lines():
                try:
                    event = _decode_event(line)
                except msgspec.DecodeError:
                    raise RemoteError(f"watch {base}/{plural}: bad line") from None
                kind = str(event.type or "")
                obj: JsonDoc = msgspec.to_builtins(event.object) if event.object else {}
                if kind == "ERROR":
                    raise RemoteError(f"watch {base}/{plural}: {obj.get('message', obj)}")
                yield kind, obj
        except TimeoutError:
            return  # an open stream silent for too long: watch again
        except OSError as exc:
            raise RemoteError(f"{where}: {str(exc) or type(exc).__name__}") from None
        finally:
            stream.close()

    def get(self, base: str, plural: str, namespace: str, name: str) -> JsonDoc | None:
        """One object, or None if there is none."""
        r = self._call("GET", f"{base}/namespaces/{namespace}/{plural}/{name}").ok(404)
        if r.status == 404:
            return None
        doc = r.json()
        return doc if isinstance(doc, dict) else None

    def create(self, base: str, plural: str, doc: JsonDoc) -> None:
        """Create, or nothing if it exists already (a retry after a lost answer)."""
        ns = doc["metadata"]["namespace"]
        self._call("POST", f"{base}/namespaces/{ns}/{plural}", doc).ok(409)

    def delete(self, base: str, plural: str, namespace: str, name: str) -> None:
        """Delete, or nothing if it is gone already."""
        path = f"{base}/namespaces/{namespace}/{plural}/{name}"
        self._call("DELETE", path).ok(404)

    def probe(self) -> None:
        """Whether the worker answers and knows Kueue's API (as Kueue's watch set-up does)."""
        self._call("GET", f"{WORKLOADS}/workloads?limit=1").ok()


__all__ = [
    "JOBS",
    "WORKLOADS",
    "Answer",
    "Call",
    "KubeConfigError",
    "RemoteClient",
    "RemoteError",
    "Target",
    "parse_kubeconfig",
]
