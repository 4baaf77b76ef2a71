"""API tokens: creation, look-up by hash, and the admin token file written on first start.

A token is random; only its SHA-256 is stored. Namespace tokens list the namespaces they may use;
the admin token may do everything. Look-ups are cached once found, and fall back to the store so a
token created by another process (``gpuaas token create --data-dir``) works without a restart.
This module decides nothing about which request a token may make (see ``api.auth``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from pathlib import Path

from gpuaas.store import GroupCommitter, PutToken, Store, TokenRecord

ADMIN_TOKEN_FILE = "admin-token"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "gpuaas_" + secrets.token_urlsafe(32)


class Tokens:
    def __init__(self, store: Store, committer: GroupCommitter | None = None) -> None:
        self.store = store
        self.committer = committer
        self._cache: dict[str, TokenRecord] = {}
        self._lock = threading.Lock()

    def create(
        self, name: str, namespaces: tuple[str, ...], *, admin: bool = False
    ) -> tuple[str, TokenRecord]:
        token = new_token()
        rec = TokenRecord(hash_token(token), name, tuple(namespaces), admin, time.time())
        if self.committer is not None:
            self.committer.submit([PutToken(rec)]).result(timeout=60)
        else:
            self.store.commit([PutToken(rec)])
        with self._lock:
            self._cache[rec.hash] = rec
        return token, rec

    def authenticate(self, token: str) -> TokenRecord | None:
        h = hash_token(token)
        with self._lock:
            rec = self._cache.get(h)
        if rec is not None:
            return rec
        rec = self.store.token(h)
        if rec is not None:
            with self._lock:
                self._cache[h] = rec
        return rec

    def ensure_admin(self, data_dir: Path) -> Path:
        """Make sure ``DATA_DIR/admin-token`` holds a valid admin token (mode 0600)."""
        path = data_dir / ADMIN_TOKEN_FILE
        if path.exists():
            existing = path.read_text().strip()
            rec = self.authenticate(existing) if existing else None
            if rec is not None and rec.admin:
                os.chmod(path, 0o600)
                return path
        token, _ = self.create("admin", (), admin=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o600)
        return path
