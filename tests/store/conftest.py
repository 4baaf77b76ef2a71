"""Every store test runs against SQLite and PostgreSQL (the latter marked ``postgres``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.store import Store, open_store
from gpuaas.store.testing import drop_schema, postgres_schema_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gpuaas.db'}"
        return
    url = postgres_schema_url()
    try:
        yield url
    finally:
        drop_schema(url)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()
