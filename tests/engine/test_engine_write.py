"""``Engine.write``: a patch reads, computes and writes on the condition that nothing wrote the
object meanwhile, and computes again if something did, so concurrent patches lose nothing; a
precondition the request itself carries is answered with Conflict."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Conflict, NotFound
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

NS = BY_KIND["Namespace"]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    e = Engine(store)
    e.create(NS, None, {"metadata": {"name": "ns"}})
    try:
        yield e
    finally:
        e.close()
        store.close()


def _label(key: str) -> Any:
    def compute(old: dict[str, Any] | None) -> dict[str, Any]:
        assert old is not None
        old["metadata"].setdefault("labels", {})[key] = "1"
        return old

    return compute


def test_concurrent_patches_lose_nothing(engine: Engine) -> None:
    threads = [
        threading.Thread(target=engine.write, args=(NS, None, "ns", _label(f"l{i}")))
        for i in range(12)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    labels = engine.get(NS, None, "ns")["metadata"]["labels"]
    assert {f"l{i}" for i in range(12)} <= set(labels)


def test_a_stale_precondition_is_a_conflict(engine: Engine) -> None:
    def stale(old: dict[str, Any] | None) -> dict[str, Any]:
        assert old is not None
        old["metadata"]["resourceVersion"] = "1"
        old["metadata"]["labels"] = {"x": "y"}
        return old

    engine.write(NS, None, "ns", _label("a"))
    with pytest.raises(Conflict):
        engine.write(NS, None, "ns", stale)


def test_a_missing_object_is_created_only_when_asked(engine: Engine) -> None:
    def new(old: dict[str, Any] | None) -> dict[str, Any]:
        assert old is None
        return {"metadata": {"name": "fresh"}}

    with pytest.raises(NotFound):
        engine.write(NS, None, "fresh", new)
    assert engine.write(NS, None, "fresh", new, create_missing=True)["metadata"]["uid"]
    unchanged = engine.get(NS, None, "fresh")
    assert engine.write(NS, None, "fresh", lambda old: dict(old or {})) == unchanged
