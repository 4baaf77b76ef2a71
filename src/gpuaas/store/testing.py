"""Test support for suites that run against every store adapter: a throw-away PostgreSQL schema.

Tests that need PostgreSQL call ``postgres_schema_url()``: it returns a URL for a fresh schema
(dropped again by ``drop_schema``), or skips the test with the reason when PostgreSQL is not
reachable, unless ``GPUAAS_REQUIRE_SERVICES=1``, where an absent service fails the test instead.
No production code imports this module.
"""

from __future__ import annotations

import os
import uuid

import psycopg

from gpuaas.store.postgres import split_schema

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_base_url() -> str:
    return os.environ.get("GPUAAS_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be used, or None if it can."""
    try:
        with psycopg.connect(postgres_base_url(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {postgres_base_url()} is not reachable: {exc}"
    return None


def require_postgres() -> None:
    """Skip (or, under GPUAAS_REQUIRE_SERVICES=1, fail) when PostgreSQL is absent."""
    import pytest

    reason = postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("GPUAAS_REQUIRE_SERVICES") == "1":
        pytest.fail(f"GPUAAS_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


def postgres_schema_url() -> str:
    """A URL whose tables live in a new, unique schema."""
    require_postgres()
    schema = f"gpuaas_test_{uuid.uuid4().hex[:12]}"
    base = postgres_base_url()
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}schema={schema}"


def drop_schema(url: str) -> None:
    conninfo, schema = split_schema(url)
    if schema is None:
        return
    with psycopg.connect(conninfo, connect_timeout=5, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
