"""The engine refuses a document the store cannot write, before it joins a commit batch (item 2).

The API's body gate refuses these first; this is the engine's own guard, for any other caller:
a non-string key (which fails the store's sorted encoding) or a non-finite number used to fail
the whole group-commit batch, and with it other tenants' writes.
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Invalid
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

FLAVOR = BY_KIND["ResourceFlavor"]


def flavor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [
        {**flavor("bad"), "x": {1: "a", "b": 2}},
        {**flavor("bad"), "x": float("nan")},
        {**flavor("bad"), "x": float("inf")},
        {**flavor("bad"), "x": {"when": object()}},
    ],
    ids=["int-key", "nan", "inf", "object"],
)
def test_unstorable_documents_are_refused_and_fail_no_one_else(
    tmp_path: Path, bad: dict[str, Any]
) -> None:
    e = Engine(open_store(f"sqlite:///{tmp_path / 'db'}"))
    try:

        def good(i: int) -> str:
            return str(e.create(FLAVOR, None, flavor(f"f{i}"))["metadata"]["name"])

        def hostile(_: int) -> None:
            with pytest.raises(Invalid, match="cannot be stored as JSON"):
                e.create(FLAVOR, None, bad)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(hostile, range(20)))
            made = list(pool.map(good, range(40)))
        assert sorted(made) == sorted(f"f{i}" for i in range(40))
        names, _ = e.list_objects(FLAVOR, None)
        assert len(names) == 40
    finally:
        e.close()


def test_nan_stored_by_an_older_version_is_served_as_null(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db'}"
    e = Engine(open_store(url))
    e.create(FLAVOR, None, flavor("old", nodeLabels={"a": "b"}))
    e.close()
    with sqlite3.connect(tmp_path / "db") as db:  # what an unguarded older server wrote
        db.execute('UPDATE objects SET doc = replace(doc, \'"a":"b"}\', \'"a":"b"},"x":NaN\')')
    e = Engine(open_store(url))
    try:
        docs, _ = e.list_objects(FLAVOR, None)
        json.dumps(list(docs), allow_nan=False)  # a list answers again
        assert docs[0]["spec"]["x"] is None
        assert any("NaN or infinite" in p for p in e.restore_problems)
    finally:
        e.close()
