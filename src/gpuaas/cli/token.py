"""``gpuaas token create``: make a namespace token (or another admin token).

Through the API with the admin token (``GPUAAS_SERVER``/``GPUAAS_TOKEN`` or the login file), or
straight into the store with ``--data-dir``/``--db`` on the server's machine. Prints the token once;
only its hash is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuaas.cli.client import Client, ClientError, load_config
from gpuaas.server import ServerError, ServerOptions, create_token

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
        options = ServerOptions((data_dir or Path()).expanduser(), db=db)
        try:
            token = create_token(options.store_url, label, tuple(namespaces), admin=admin)
        except ServerError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(token)
        return
    try:
        client = Client(load_config())
        try:
            out = client.create_token(namespaces, label, admin)
        finally:
            client.close()
    except ClientError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    typer.echo(out["token"])
