"""``gpuaas server``: parse the server's options and run it.

This module owns only the command line: each option, its help and default, and turning a
``ServerError`` into an exit status. Putting the server together (store, engine, runtime,
telemetry, HTTP app, tick thread, uvicorn) is ``gpuaas.server``'s; the ``--runtime`` choices are
the names in ``runtimes.registry``. It holds no wiring of its own.
``python -m gpuaas.cli.server`` runs the same command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from gpuaas.api.body import DEFAULT_MAX_BODY
from gpuaas.runtimes import registry
from gpuaas.server import ServerError, ServerOptions, run

DEFAULT_DATA_DIR = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local/share")) / "gpuaas"


def _registered_runtime(name: str) -> str:
    if name not in registry.names():
        raise typer.BadParameter(f"{name!r}: choose one of {', '.join(registry.names())}")
    return name


def serve(
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the SQLite store and admin-token live.")
    ] = DEFAULT_DATA_DIR,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Store URL: postgresql://... (default: SQLite in the data dir)."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="PEM certificate; enables HTTPS.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key.")] = None,
    tick: Annotated[
        float, typer.Option("--tick", help="Seconds between scheduling passes.", min=0.05)
    ] = 1.0,
    max_body: Annotated[
        int, typer.Option("--max-body", help="Largest request body accepted, in bytes.", min=1024)
    ] = DEFAULT_MAX_BODY,
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime",
            envvar="GPUAAS_RUNTIME",
            metavar=f"[{'|'.join(registry.names())}]",
            callback=_registered_runtime,
            help=registry.describe() + ".",
        ),
    ] = registry.names()[0],
    fake_gpus: Annotated[
        str | None,
        typer.Option(
            "--fake-gpus",
            metavar="N[:MODEL]",
            help="Declare N GPUs (e.g. 4:NVIDIA-L4) instead of asking NVML.",
        ),
    ] = None,
    node_config: Annotated[
        Path | None,
        typer.Option("--node-config", help="YAML node config: cpus, memory, gpus, labels, taints."),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="--runtime ray: the Ray cluster to join (host:port); default: start one here.",
        ),
    ] = None,
    ray_nodes: Annotated[
        Path | None,
        typer.Option("--ray-nodes", help="--runtime ray: YAML {nodes: {NAME: {taints: [...]}}}."),
    ] = None,
    kueue_config: Annotated[
        Path | None,
        typer.Option(
            "--kueue-config",
            help="Kueue's Configuration (config.kueue.x-k8s.io) YAML: fairSharing, waitForPodsReady.",
        ),
    ] = None,
    telemetry_interval: Annotated[
        float,
        typer.Option("--telemetry-interval", help="Seconds between GPU samples.", min=0.05),
    ] = 15.0,
    watch_history: Annotated[
        int,
        typer.Option(
            "--watch-history",
            help="Changes back a watch may start from (older: 410 Expired, clients relist).",
            min=1,
        ),
    ] = 1_000_000,
    multikueue_namespace: Annotated[
        str,
        typer.Option(
            "--multikueue-namespace",
            help="MultiKueue: the namespace of the workers' kubeconfig Secrets (Kueue's own).",
        ),
    ] = "kueue-system",
    worker_lost_timeout: Annotated[
        float,
        typer.Option(
            "--multikueue-worker-lost-timeout",
            help="MultiKueue workerLostTimeout: seconds a chosen worker may not answer before "
            "its workloads are evicted here and dispatched again.",
            min=0.0,
        ),
    ] = 900.0,
    dispatcher: Annotated[
        str,
        typer.Option(
            "--multikueue-dispatcher",
            help="MultiKueue dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once, "
            "...-incremental, or another name (External: nominatedClusterNames written by "
            "another controller).",
        ),
    ] = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    origin: Annotated[
        str,
        typer.Option(
            "--multikueue-origin",
            help="MultiKueue origin: the label value on this manager's copies on workers "
            "(managers sharing workers need different ones).",
        ),
    ] = "multikueue",
    cpus: Annotated[
        str | None,
        typer.Option(
            "--cpus",
            envvar="GPUAAS_CPUS",
            metavar="LIST",
            help="Run the server's own threads on these CPUs only (taskset -c's list: 0, 0-3, "
            "0,2). Its Python runs on one core at a time, and threads spread over the machine "
            "pay a cross-CPU wake-up per hand-off. They also run as SCHED_BATCH, so a thread "
            "woken by another does not preempt it while it holds the GIL. The pods it starts "
            "keep every CPU it had, with the default policy. Linux only. Default: wherever the "
            "kernel puts them, with the policy the server was started with.",
        ),
    ] = None,
) -> None:
    """Run the gpuaas API server."""
    options = ServerOptions(
        data_dir=data_dir.expanduser(),
        db=db,
        host=host,
        port=port,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tick=tick,
        max_body=max_body,
        runtime=runtime,
        fake_gpus=fake_gpus,
        node_config=node_config,
        ray_address=ray_address,
        ray_nodes=ray_nodes,
        kueue_config=kueue_config,
        telemetry_interval=telemetry_interval,
        watch_history=watch_history,
        multikueue_namespace=multikueue_namespace,
        worker_lost_timeout=worker_lost_timeout,
        multikueue_dispatcher=dispatcher,
        multikueue_origin=origin,
        cpus=cpus,
    )
    try:
        run(options, say=typer.echo)
    except ServerError as exc:
        typer.echo(f"gpuaas server: {exc}", err=True)
        raise typer.Exit(2) from exc


def register(app: typer.Typer) -> None:
    """Add ``server`` to the root app."""
    app.command("server")(serve)


if __name__ == "__main__":
    typer.run(serve)
