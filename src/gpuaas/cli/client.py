"""The HTTP client the command line uses: where the server is, which token, and the API paths.

Configuration comes from ``GPUAAS_SERVER``/``GPUAAS_TOKEN`` (and ``GPUAAS_CA`` or
``GPUAAS_INSECURE=1`` for TLS), else from the file ``gpuaas login`` writes
(``$GPUAAS_CONFIG`` or ``~/.config/gpuaas/config.json``). Only this module talks to the network;
it knows paths and errors, not how anything is printed.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gpuaas.vocab.kinds import Kind

JsonDoc = dict[str, Any]


class ClientError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message

    def __str__(self) -> str:
        if self.status == 0:
            return self.message
        return f"Error from server ({self.reason}): {self.message}"


@dataclass(slots=True)
class Config:
    server: str = ""
    token: str = ""
    ca: str | None = None
    insecure: bool = False
    namespace: str = "default"


def config_path() -> Path:
    env = os.environ.get("GPUAAS_CONFIG")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return base / "gpuaas" / "config.json"


def load_config() -> Config:
    cfg = Config()
    path = config_path()
    if path.exists():
        try:
            raw = json.loads(path.read_text())
        except ValueError as exc:
            raise ClientError(0, "", f"{path}: not valid JSON ({exc}); run gpuaas login") from exc
        if isinstance(raw, dict):
            cfg = Config(**{k: v for k, v in raw.items() if k in Config.__slots__})
    cfg.server = os.environ.get("GPUAAS_SERVER", cfg.server)
    cfg.token = os.environ.get("GPUAAS_TOKEN", cfg.token)
    cfg.ca = os.environ.get("GPUAAS_CA", cfg.ca)
    if os.environ.get("GPUAAS_INSECURE") == "1":
        cfg.insecure = True
    cfg.namespace = os.environ.get("GPUAAS_NAMESPACE", cfg.namespace)
    return cfg


def save_config(cfg: Config) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(cfg), f, indent=2)
    os.chmod(path, 0o600)
    return path


def object_path(kind: Kind, namespace: str | None, name: str | None = None) -> str:
    base = kind.base_path()
    path = (
        f"{base}/namespaces/{namespace}/{kind.plural}"
        if kind.namespaced and namespace
        else (f"{base}/{kind.plural}")
    )
    return f"{path}/{name}" if name else path


class Client:
    def __init__(self, cfg: Config, *, timeout: float = 30.0) -> None:
        if not cfg.server:
            raise ClientError(
                0, "", "no server: set GPUAAS_SERVER and GPUAAS_TOKEN, or run gpuaas login"
            )
        token = (cfg.token or "").strip()
        if not token:
            raise ClientError(
                0, "", "no token: set GPUAAS_TOKEN (it is empty), or run gpuaas login"
            )
        if any(not ch.isprintable() or ch.isspace() for ch in token) or not token.isascii():
            raise ClientError(0, "", "the token (GPUAAS_TOKEN or the login file) is malformed")
        verify: bool | ssl.SSLContext = True
        if cfg.insecure:
            verify = False
        elif cfg.ca:
            try:
                verify = ssl.create_default_context(cafile=cfg.ca)
            except (OSError, ssl.SSLError) as exc:
                raise ClientError(0, "", f"CA file {cfg.ca}: {exc}") from exc
        self.cfg = cfg
        self.http = httpx.Client(
            base_url=cfg.server.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            verify=verify,
            timeout=timeout,
        )

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kw: Any) -> JsonDoc:
        try:
            resp = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ClientError(0, "", f"cannot reach {self.cfg.server}: {exc}") from exc
        return self._decode(resp)

    @staticmethod
    def _decode(resp: httpx.Response) -> JsonDoc:
        try:
            body = resp.json()
        except ValueError:
            body = {"message": resp.text}
        if resp.status_code >= 400:
            msg = body.get("message", resp.text) if isinstance(body, dict) else resp.text
            reason = body.get("reason", "") if isinstance(body, dict) else ""
            raise ClientError(resp.status_code, reason or str(resp.status_code), str(msg))
        return body if isinstance(body, dict) else {"items": body}

    def create(self, kind: Kind, namespace: str | None, doc: JsonDoc) -> JsonDoc:
        return self.request("POST", object_path(kind, namespace), json=doc)

    def replace(self, kind: Kind, namespace: str | None, name: str, doc: JsonDoc) -> JsonDoc:
        return self.request("PUT", object_path(kind, namespace, name), json=doc)

    def get(self, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
        return self.request("GET", object_path(kind, namespace, name))

    def list_objects(self, kind: Kind, namespace: str | None) -> JsonDoc:
        return self.request("GET", object_path(kind, namespace))

    def delete(self, kind: Kind, namespace: str | None, name: str) -> JsonDoc:
        return self.request("DELETE", object_path(kind, namespace, name))

    def events(self, namespace: str | None, kind: str, name: str) -> list[JsonDoc]:
        path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
        sel = f"involvedObject.kind={kind},involvedObject.name={name}"
        items: list[JsonDoc] = self.request("GET", path, params={"fieldSelector": sel}).get(
            "items", []
        )
        return items

    def explain(self, namespace: str, name: str) -> JsonDoc:
        path = f"/apis/gpuaas.dev/v1alpha1/namespaces/{namespace}/workloads/{name}/explain"
        return self.request("GET", path)

    def create_token(self, namespaces: list[str], name: str | None, admin: bool) -> JsonDoc:
        body = {"namespaces": namespaces, "name": name, "admin": admin}
        return self.request("POST", "/apis/gpuaas.dev/v1alpha1/tokens", json=body)

    def list_tokens(self) -> JsonDoc:
        return self.request("GET", "/apis/gpuaas.dev/v1alpha1/tokens")

    def revoke_token(self, ref: str) -> JsonDoc:
        return self.request("DELETE", f"/apis/gpuaas.dev/v1alpha1/tokens/{quote(ref, safe='')}")

    def watch_path(
        self, path: str, params: dict[str, str], headers: dict[str, str] | None = None
    ) -> Iterator[JsonDoc]:
        """The events of ``?watch=true`` on ``path`` (Table events when ``headers`` ask)."""
        try:
            with self.http.stream(
                "GET", path, params={**params, "watch": "true"}, headers=headers, timeout=None
            ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._decode(resp)
                for line in resp.iter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.HTTPError as exc:
            raise ClientError(0, "", f"watch on {self.cfg.server} ended: {exc}") from exc
