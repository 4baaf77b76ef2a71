"""``gpuaas token create|list|revoke``: namespace tokens (or more admin tokens).

Through the API with the admin token (``GPUAAS_SERVER``/``GPUAAS_TOKEN`` or the login file), or
straight into the store with ``--data-dir``/``--db`` on the server's machine. ``create`` prints the
token once (only its hash is kept); ``list`` shows each token's id (the start of its hash), name,
namespaces and age; ``revoke ID_OR_NAME`` deletes one, effective at once through the API (within a
second for a server on the same store when written with ``--data-dir``/``--db``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from gpuaas.cli.client import Client, ClientError, JsonDoc, load_config
from gpuaas.server import ServerError, ServerOptions, create_token, list_tokens, revoke_token

_T = TypeVar("_T")
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.command("create")
def create(
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="A namespace it may use.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="A label for the token.")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="An admin token.")] = False,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Write into this server data dir's store.")
    ] = None,
    db: Annotated[str | None, typer.Option("--db", help="Write into this store URL.")] = None,
) -> None:
    """Create a token for the given namespaces and print it."""
    namespaces = list(namespace or [])
    if not namespaces and not admin:
        typer.echo("error: give at least one --namespace (or --admin)", err=True)
        raise typer.Exit(1)
    label = name or ",".join(namespaces) or "admin"
    if data_dir is not None or db is not None:
        url = _store_url(data_dir, db)
        typer.echo(_direct(lambda: create_token(url, label, tuple(namespaces), admin=admin)))
        return
    out = _api(lambda c: c.create_token(namespaces, label, admin))
    typer.echo(out["token"])


DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Use this server data dir's store directly.")
]
Db = Annotated[str | None, typer.Option("--db", help="Use this store URL directly.")]


@app.command("list")
def list_(data_dir: DataDir = None, db: Db = None) -> None:
    """List the tokens: id, name, namespaces (never the tokens themselves)."""
    if data_dir is not None or db is not None:
        url = _store_url(data_dir, db)
        rows = [
            (
                r.hash[:12],
                r.name,
                ",".join(r.namespaces) or "*",
                "yes" if r.admin else "",
                _when(r.created),
            )
            for r in _direct(lambda: list_tokens(url))
        ]
    else:
        items = _api(lambda c: c.list_tokens()).get("items", [])
        rows = [
            (
                str(t["id"]),
                str(t["name"]),
                ",".join(t["namespaces"]) or "*",
                "yes" if t["admin"] else "",
                str(t["created"]),
            )
            for t in items
        ]
    header = ("ID", "NAME", "NAMESPACES", "ADMIN", "CREATED")
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@app.command("revoke")
def revoke(
    ref: Annotated[str, typer.Argument(help="The token's id (gpuaas token list) or its name.")],
    data_dir: DataDir = None,
    db: Db = None,
) -> None:
    """Revoke one token: requests that carry it are refused from now on."""
    if data_dir is not None or db is not None:
        url = _store_url(data_dir, db)
        rec = _direct(lambda: revoke_token(url, ref))
        typer.echo(f"revoked {rec.hash[:12]} ({rec.name})")
        return
    out = _api(lambda c: c.revoke_token(ref))
    typer.echo(f"revoked {out['id']} ({out['name']})")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _store_url(data_dir: Path | None, db: str | None) -> str:
    return ServerOptions((data_dir or Path()).expanduser(), db=db).store_url


def _direct(act: Callable[[], _T]) -> _T:
    try:
        return act()
    except ServerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _api(act: Callable[[Client], JsonDoc]) -> JsonDoc:
    try:
        client = Client(load_config())
        try:
            return act(client)
        finally:
            client.close()
    except ClientError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
