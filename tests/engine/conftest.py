"""The engine on a fresh SQLite store, shared by the engine tests that need nothing more (a module
that needs another set-up, a check served or a different store, defines its own ``engine``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.store import open_store


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store)
    try:
        yield e
    finally:
        e.close()
        store.close()
