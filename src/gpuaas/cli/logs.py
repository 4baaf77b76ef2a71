"""``gpuaas logs WORKLOAD [-f] [-n NS] [--pod POD]``: a workload's pod output, as ``kubectl logs``.

The workload of a Job has the Job's name, so ``gpuaas logs team-a-job -n team-a`` works for both.
The lines come from the server's local runtime (``api.logs_routes``); with ``-f`` they stream
until the pods end or Ctrl-C. Errors print as the other commands print them and exit 1.
"""

from __future__ import annotations

from typing import Annotated

import httpx
import typer

from gpuaas.cli.client import Client, ClientError, load_config

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def logs(
    workload: Annotated[str, typer.Argument(metavar="WORKLOAD", help="Workload or Job name.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Stream new lines until the pods end.")
    ] = False,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace.")] = None,
    pod: Annotated[str | None, typer.Option("--pod", help="Only this pod's lines.")] = None,
) -> None:
    """Print the stdout and stderr of a workload's pods."""
    try:
        client = Client(load_config(), timeout=30.0)
    except ClientError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    ns = namespace or client.cfg.namespace or "default"
    path = f"{GPUAAS}/namespaces/{ns}/workloads/{workload}/logs"
    params = {"follow": "true" if follow else "false"}
    if pod:
        params["pod"] = pod
    try:
        with client.http.stream("GET", path, params=params, timeout=None) as resp:
            if resp.status_code >= 400:
                resp.read()
                client._decode(resp)
            for chunk in resp.iter_text():
                typer.echo(chunk, nl=False)
    except ClientError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    except httpx.HTTPError as exc:
        typer.echo(f"error: logs from {client.cfg.server} ended: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        return
    finally:
        client.close()


def register(app: typer.Typer) -> None:
    """Add ``logs`` to the root app."""
    app.command("logs")(logs)
