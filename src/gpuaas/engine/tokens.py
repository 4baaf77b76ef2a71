"""API tokens: creation, look-up by hash, and the admin token file written on first start.

A token is random; only its SHA-256 is stored. Namespace tokens list the namespaces they may use
(each a namespace name: a DNS label); the admin token may do everything. Tokens are listed by id
(the first characters of the hash: the token itself is never shown again) and revoked by id or
name. A found token is cached for ``CACHE_SECONDS`` at most, and a revocation through this object
drops it at once, so a revoked token stops working at once here and within ``CACHE_SECONDS`` in
any other process (``gpuaas token revoke --data-dir``). This module decides nothing about which
request a token may make (see ``api.auth``).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaas.datadir import ADMIN_TOKEN_FILE
from gpuaas.store import DeleteToken, GroupCommitter, PutToken, Store, TokenRecord, Write

CACHE_SECONDS = 1.0
ID_LENGTH = 12  # hex characters of the hash shown as a token's id
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class TokenError(ValueError):
    """A token request that cannot be met (a bad namespace, no or several tokens matching)."""


def token_id(rec: TokenRecord) -> str:
    return rec.hash[:ID_LENGTH]


def check_namespaces(namespaces: Sequence[str]) -> None:
    """Each namespace a token names must be a namespace name (a DNS label, as Kubernetes asks)."""
    for ns in namespaces:
        if len(ns) > 63 or not _NAMESPACE.fullmatch(ns):
            raise TokenError(
                f"namespace {ns!r} is not a namespace name: a lowercase RFC 1123 label of at most "
                "63 characters (letters, digits and '-', starting and ending with a letter or digit)"
            )


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "gpuaas_" + secrets.token_urlsafe(32)


class Tokens:
    def __init__(
        self,
        store: Store,
        committer: GroupCommitter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.committer = committer
        self._clock = clock
        self._cache: dict[str, tuple[TokenRecord, float]] = {}  # hash -> (record, found at)
        self._lock = threading.Lock()
        self._revocations = 0  # a look-up that raced a revocation does not cache what it read

    def _commit(self, writes: list[Write]) -> None:
        if self.committer is not None:
            self.committer.submit(writes).result(timeout=60)
        else:
            self.store.commit(writes)

    def create(
        self, name: str, namespaces: tuple[str, ...], *, admin: bool = False
    ) -> tuple[str, TokenRecord]:
        """A new token; raises ``TokenError`` if a namespace is not a namespace name."""
        check_namespaces(namespaces)
        if not namespaces and not admin:
            raise TokenError("give at least one namespace (or make an admin token)")
        token = new_token()
        rec = TokenRecord(hash_token(token), name, tuple(namespaces), admin, time.time())
        self._commit([PutToken(rec)])
        return token, rec

    def cached(self, token: str) -> TokenRecord | None:
        """The token's record when it was found less than ``CACHE_SECONDS`` ago, else None.

        No I/O: the API answers most requests from here on its event loop and hands only a miss
        to a worker thread (``authenticate``), a thread hop less per request."""
        hit = self._cache.get(hash_token(token))  # one dict read: atomic under the GIL
        if hit is not None and self._clock() - hit[1] < CACHE_SECONDS:
            return hit[0]
        return None

    def authenticate(self, token: str) -> TokenRecord | None:
        h = hash_token(token)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(h)
            revocations = self._revocations
        if hit is not None and now - hit[1] < CACHE_SECONDS:
            return hit[0]
        rec = self.store.token(h)
        with self._lock:
            if rec is None or revocations != self._revocations:
                self._cache.pop(h, None)
            else:
                if len(self._cache) >= 10_000:
                    self._cache.clear()
                self._cache[h] = (rec, now)
        return rec

    def records(self) -> list[TokenRecord]:
        """Every token, oldest first (hashes, names and namespaces: never a token itself)."""
        return self.store.tokens()

    def revoke(self, ref: str) -> TokenRecord:
        """Delete the one token whose id starts with ``ref`` or whose name is ``ref``.

        Effective at once for this process (its cache forgets the token before this returns).
        Raises ``TokenError`` when no token or several match.
        """
        ref = ref.strip()
        if not ref:
            raise TokenError("name a token to revoke: its id (gpuaas token list) or its name")
        everything = self.store.tokens()
        matches = [r for r in everything if r.name == ref]
        if not matches and len(ref) >= 6:
            matches = [r for r in everything if r.hash.startswith(ref.lower())]
        if not matches:
            raise TokenError(f"no token has the id or name {ref!r}")
        if len(matches) > 1:
            ids = ", ".join(token_id(r) for r in matches)
            raise TokenError(f"{len(matches)} tokens match {ref!r} ({ids}): revoke one by its id")
        rec = matches[0]
        self._commit([DeleteToken(rec.hash)])
        with self._lock:
            self._revocations += 1
            self._cache.pop(rec.hash, None)
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
