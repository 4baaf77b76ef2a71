"""``gpuaas report usage`` and ``gpuaas get hoarding``: the chargeback table and the offenders.

Both ask the server (``/apis/gpuaas.dev/v1alpha1/usage`` and ``.../hoarding``) and print with
``telemetry.report``'s renderers, so the CLI and the library show the same table. The server
computes; this module parses flags, turns the JSON back into rows and prints. ``--since`` and
``--until`` go to the server as given (epoch seconds, ISO 8601, or ``24h``/``7d`` ago, read
against the server's clock); they are checked here first so a typo fails before any request.
``app`` is mounted as the ``report`` group; ``get hoarding`` is reached through ``gpuaas get``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from gpuaas.cli.client import Client, ClientError, load_config
from gpuaas.telemetry import (
    HoardingAction,
    HoardingRow,
    TelemetryInputError,
    UsageRow,
    parse_group_by,
    parse_time,
    render_hoarding,
    render_usage,
)

GPUAAS = "/apis/gpuaas.dev/v1alpha1"

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(1)


def _request(path: str, params: dict[str, str]) -> dict[str, Any]:
    try:
        client = Client(load_config())
    except ClientError as exc:
        raise _fail(f"error: {exc}") from exc
    try:
        return client.request("GET", path, params=params)
    except ClientError as exc:
        raise _fail(str(exc)) from exc
    finally:
        client.close()


@app.command("usage")
def usage(
    since: Annotated[
        str | None, typer.Option("--since", help="Start: epoch seconds, ISO 8601, or 24h / 7d ago.")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="End (default: now).")] = None,
    by: Annotated[
        str, typer.Option("--by", help="namespace, localqueue, clusterqueue or flavor.")
    ] = "namespace",
    output: Annotated[str, typer.Option("--output", "-o", help="table, csv or json.")] = "table",
) -> None:
    """GPU-hours, CPU-core-hours, memory-GB-hours, cost and GPU-hours wasted by idle holders
    per group: the chargeback table."""
    try:
        group_by = parse_group_by(by)
        for flag, value in (("--since", since), ("--until", until)):
            if value is not None:
                parse_time(value, time.time(), flag)
        if output not in ("table", "csv", "json"):
            raise TelemetryInputError(
                f"report usage: -o: unknown format {output!r} (allowed: table|csv|json)"
            )
    except TelemetryInputError as exc:
        raise _fail(f"error: {exc}") from exc
    params = {"by": group_by.value}
    if since is not None:
        params["since"] = since
    if until is not None:
        params["until"] = until
    body = _request(f"{GPUAAS}/usage", params)
    rows = [
        UsageRow(
            str(r["group"]),
            float(r["gpuHours"]),
            float(r["cpuCoreHours"]),
            float(r["memoryGBHours"]),
            float(r["cost"]),
            float(r.get("wastedGPUHours", 0.0)),
        )
        for r in body.get("rows", [])
    ]
    text = render_usage(rows, group_by, output, str(body.get("currency", "USD")))
    typer.echo(text.rstrip("\n"))


def get_hoarding(output: str | None) -> None:
    """``gpuaas get hoarding``: workloads flagged for idle GPUs, most wasteful first, then
    those evicted for it (backing off, deactivated or stopped), with their idle-eviction count."""
    fmt = output or "table"
    if fmt not in ("table", "json"):
        raise _fail(f"error: get hoarding: -o: unknown format {fmt!r} (allowed: table|json)")
    body = _request(f"{GPUAAS}/hoarding", {})
    rows = [
        HoardingRow(
            namespace=str(r["namespace"]),
            workload=str(r["workload"]),
            cluster_queue=str(r["clusterQueue"]),
            gpus=int(r["gpus"]),
            idle_since=float(r["idleSince"]),
            idle_seconds=float(r["idleSeconds"]),
            wasted_gpu_hours=float(r["wastedGPUHours"]),
            action=HoardingAction(r["action"]),
            state=str(r["state"]),
            idle_evictions=int(r.get("idleEvictions", 0)),
            requeue_at=float(r["requeueAt"]) if r.get("requeueAt") is not None else None,
        )
        for r in body.get("items", [])
    ]
    typer.echo(render_hoarding(rows, fmt).rstrip("\n"))
