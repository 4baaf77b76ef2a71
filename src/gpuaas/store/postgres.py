"""PostgreSQL adapter (psycopg 3): the same tables as SQLite, in a schema of the caller's choice.

A ``schema=NAME`` query parameter on the URL (not a libpq parameter, so it is removed before
connecting) puts every table in that schema, created if missing; tests use it to run in isolation.
A commit returns only after PostgreSQL has flushed it (``synchronous_commit`` as configured, on by
default). This module must not hold a transaction open across anything but its own statements.
"""

from __future__ import annotations

import psycopg

from gpuaas.pgurl import is_plain_identifier, split_schema
from gpuaas.store.base import StoreError
from gpuaas.store.sql import SqlStore

__all__ = ["PostgresStore", "split_schema"]


class PostgresStore(SqlStore):
    placeholder = "%s"
    real_type = "DOUBLE PRECISION"

    def __init__(self, url: str) -> None:
        conninfo, schema = split_schema(url)
        if schema is not None and not is_plain_identifier(schema):
            raise StoreError(f"--db {url}: schema {schema!r} is not a plain SQL identifier")

        def connect() -> psycopg.Connection[tuple[object, ...]]:
            try:
                conn = psycopg.connect(conninfo, connect_timeout=10)
            except psycopg.Error as exc:
                raise StoreError(f"cannot connect to PostgreSQL at {url}: {exc}") from exc
            if schema is not None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                conn.execute(f'SET search_path TO "{schema}"')
                conn.commit()
            return conn

        super().__init__(url, connect)
