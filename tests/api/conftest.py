"""Real server processes over SQLite and PostgreSQL; every one is stopped after its test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuaas.api.testing import ServerProcess
from gpuaas.store.testing import drop_schema, postgres_schema_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    url = postgres_schema_url()
    try:
        yield url
    finally:
        drop_schema(url)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(db: str | None = None, data_dir: Path | None = None, **kw: object) -> ServerProcess:
        srv = ServerProcess(data_dir or tmp_path / "data", db, **kw)  # type: ignore[arg-type]
        started.append(srv)
        return srv.start()

    try:
        yield start
    finally:
        for srv in started:
            srv.kill()


@pytest.fixture
def server(servers: Callable[..., ServerProcess], db_url: str | None) -> ServerProcess:
    return servers(db_url)
