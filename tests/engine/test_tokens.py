"""Tokens: namespace names only, listed by id, revoked at once here and soon everywhere (item 10).

A found token used to stay cached for the life of the process, so a token revoked by another
process (``gpuaas token revoke --data-dir``) kept working. The cache now holds a token for
``CACHE_SECONDS`` of a passed-in clock at most, and a revocation through the same ``Tokens`` drops
it before returning.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.engine.tokens import CACHE_SECONDS, TokenError, Tokens, token_id
from gpuaas.store import open_store


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_revoked_elsewhere_stops_working_once_the_cache_expires(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    try:
        clock = Clock()
        server = Tokens(store, clock=clock)
        other = Tokens(store)
        token, rec = other.create("ci", ("team-a",))
        assert server.authenticate(token) == rec
        other.revoke(token_id(rec))
        clock.now += CACHE_SECONDS / 2
        assert server.authenticate(token) == rec  # still cached, for less than CACHE_SECONDS
        clock.now += CACHE_SECONDS
        assert server.authenticate(token) is None
    finally:
        store.close()


def test_revoked_here_stops_working_at_once(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    try:
        tokens = Tokens(store, clock=Clock())
        token, rec = tokens.create("ci", ("team-a",))
        assert tokens.authenticate(token) == rec
        assert tokens.revoke("ci") == rec
        assert tokens.authenticate(token) is None
        assert tokens.records() == []
    finally:
        store.close()


@pytest.mark.parametrize(
    ("namespaces", "ref", "problem"),
    [
        (("../b",), None, "not a namespace name"),
        (("",), None, "not a namespace name"),
        (("a\n",), None, "not a namespace name"),
        ((), None, "at least one namespace"),
        (("team-a",), "", "name a token"),
        (("team-a",), "nope", "no token"),
        (("team-a",), "dup", "2 tokens match"),
    ],
)
def test_refusals(
    tmp_path: Path, namespaces: tuple[str, ...], ref: str | None, problem: str
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    try:
        tokens = Tokens(store)
        with pytest.raises(TokenError, match=problem):
            tokens.create("dup", namespaces)
            tokens.create("dup", namespaces)
            tokens.revoke(ref or "")
    finally:
        store.close()
