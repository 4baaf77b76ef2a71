"""``gpuaas kubeconfig``: a kubeconfig for kubectl and Kubernetes clients, printed to stdout.

It names the server (``GPUAAS_SERVER`` or the login file), the user's token, and the CA when TLS
is on (``GPUAAS_CA``, embedded as ``certificate-authority-data``; ``GPUAAS_INSECURE=1``: skip
verification); ``--namespace`` sets the context's default namespace (a tenant's own). It talks to
no server: ``gpuaas kubeconfig > ~/.kube/gpuaas; export KUBECONFIG=~/.kube/gpuaas``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gpuaas.cli.client import ClientError, Config, load_config


def kubeconfig(cfg: Config, name: str, namespace: str | None) -> dict[str, Any]:
    """The kubeconfig document for ``cfg`` (one cluster, user and context, all named ``name``)."""
    cluster: dict[str, Any] = {"server": cfg.server}
    if cfg.ca:
        cluster["certificate-authority-data"] = base64.b64encode(
            Path(cfg.ca).expanduser().read_bytes()
        ).decode()
    elif cfg.insecure:
        cluster["insecure-skip-tls-verify"] = True
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": cfg.token}}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
        "preferences": {},
    }


def command(
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="The context's default namespace."),
    ] = None,
    name: Annotated[
        str, typer.Option("--name", help="The cluster, user and context name.")
    ] = "gpuaas",
) -> None:
    """Print a kubeconfig for this server and token (kubectl, Kubernetes clients)."""
    try:
        cfg = load_config()
    except ClientError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    if not cfg.server or not cfg.token:
        typer.echo(
            "error: no server or token: set GPUAAS_SERVER/GPUAAS_TOKEN or gpuaas login", err=True
        )
        raise typer.Exit(1)
    try:
        doc = kubeconfig(cfg, name, namespace)
    except OSError as exc:
        typer.echo(f"error: reading the CA {cfg.ca}: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``kubeconfig`` to the root app."""
    app.command("kubeconfig")(command)
