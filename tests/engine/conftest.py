"""The engine on a fresh SQLite store, shared by the engine tests that need nothing more (a module
that needs another set-up, a check served or a different store, defines its own ``engine``), and
``node``: an engine with the local runtime attached (``test_runtime_bridge.Node``) and the
queues of ``test_runtime_bridge._setup``, for the tests that run real pods."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_runtime_bridge import Node, _setup

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


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path)
    try:
        _setup(n.engine)
        yield n
    finally:
        n.close()
