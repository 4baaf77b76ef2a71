"""``gpuaas server``: run the control plane (store, engine, HTTP API) in this process.

It opens the store (SQLite in the data dir unless ``--db`` names PostgreSQL), rebuilds the engine
from it, makes sure an admin token exists in ``DATA_DIR/admin-token``, starts the once-a-second
scheduling tick, attaches the local runtime (``--runtime local``, the default: admitted workloads
run as processes on this node, polled every 50 ms; ``DATA_DIR/runtime`` keeps their state and
logs), and serves the API with uvicorn (TLS with ``--tls-cert``/``--tls-key``). It holds
no scheduling or HTTP logic of its own. ``python -m gpuaas.cli.server`` runs the same command.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuaas.runtimes.base import RuntimeRequestError

if TYPE_CHECKING:
    from gpuaas.engine.runtime_bridge import RuntimeBridge

POLL_INTERVAL = 0.05  # seconds between runtime polls


class Runtime(StrEnum):
    local = "local"
    none = "none"


DEFAULT_DATA_DIR = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local/share")) / "gpuaas"


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
    ] = 4 * 1024 * 1024,
    runtime: Annotated[
        Runtime,
        typer.Option(
            "--runtime",
            envvar="GPUAAS_RUNTIME",
            help="local: admitted workloads run as processes here; none: admission only.",
        ),
    ] = Runtime.local,
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
    telemetry_interval: Annotated[
        float,
        typer.Option("--telemetry-interval", help="Seconds between GPU samples.", min=0.05),
    ] = 15.0,
) -> None:
    """Run the gpuaas API server."""
    import uvicorn

    from gpuaas.api.app import create_app
    from gpuaas.engine.engine import Engine
    from gpuaas.engine.telemetry_bridge import install as install_telemetry
    from gpuaas.engine.tokens import Tokens
    from gpuaas.inventory import InventoryError, detect_node
    from gpuaas.store import StoreError, open_store
    from gpuaas.telemetry.usage_store import UsageStoreError
    from gpuaas.telemetry.usage_store_postgres import is_postgres_url

    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("give both --tls-cert and --tls-key, or neither")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    data_dir = data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    url = db or f"sqlite:///{data_dir / 'gpuaas.db'}"
    try:
        bridge = _local_runtime(data_dir, fake_gpus, node_config) if runtime == "local" else None
        node = detect_node(fake_gpus, node_config)  # telemetry's GPUs; the dashboard's node
        store = open_store(url)
    except (InventoryError, RuntimeRequestError) as exc:
        typer.echo(f"gpuaas server: {exc}", err=True)
        raise typer.Exit(2) from exc
    except StoreError as exc:
        typer.echo(f"gpuaas server: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        engine = Engine(store, live_runtime=bridge is not None)
        if bridge is not None:
            adopted = bridge.attach(engine)
            if adopted:
                typer.echo(f"re-adopted the pods of {len(adopted)} workload(s): {adopted}")
    except StoreError as exc:
        store.close()
        typer.echo(f"gpuaas server: {exc}", err=True)
        raise typer.Exit(2) from exc
    for problem in engine.restore_problems:
        typer.echo(f"gpuaas server: warning: {problem}", err=True)
    owners = bridge.runtime.gpu_owners if bridge is not None else None
    # Usage goes to the server's own database: PostgreSQL when --db is, else DATA_DIR/usage.db.
    usage_db = db if db is not None and is_postgres_url(db) else data_dir / "usage.db"
    try:
        telemetry = install_telemetry(
            engine, usage_db=usage_db, gpus=node.gpus,
            interval_seconds=telemetry_interval, owners=owners,
        )  # fmt: skip
    except UsageStoreError as exc:
        engine.close()
        store.close()
        typer.echo(f"gpuaas server: {exc}", err=True)
        raise typer.Exit(2) from exc
    tokens = Tokens(store, engine.committer)
    token_path = tokens.ensure_admin(data_dir)
    typer.echo(f"admin token: {token_path}")
    scheme = "https" if tls_cert else "http"
    typer.echo(f"serving on {scheme}://{host}:{port} (store {url.split('?')[0]})")
    sys.stdout.flush()

    stop = threading.Event()

    def ticker() -> None:
        # With a runtime, pods are polled every POLL_INTERVAL (a stopped victim frees its quota
        # within that time); the full scheduling pass still runs every ``tick`` seconds.
        interval = min(tick, POLL_INTERVAL) if bridge is not None else tick
        next_tick = time.monotonic() + tick
        while not stop.wait(interval):
            try:
                if time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + tick
                    engine.tick()
                else:
                    engine.poll_observers()
            except Exception:  # keep ticking: the next request or tick retries after a reload
                logging.getLogger("gpuaas.server").exception("scheduling tick failed")

    thread = threading.Thread(target=ticker, name="gpuaas-tick", daemon=True)
    thread.start()
    app = create_app(engine, tokens, max_body=max_body, node=node)
    # uvicorn re-raises SIGTERM once it has shut down; turn it into an exception so the
    # ``finally`` below still runs and stops the pods (the default action would just exit).
    signal.signal(signal.SIGTERM, _terminated)
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
            timeout_graceful_shutdown=2,
            access_log=False,
        )
    except _Terminated:
        pass
    finally:
        stop.set()
        thread.join(timeout=5)
        if bridge is not None:
            typer.echo("stopping every workload's pods (graceful server stop)")
            bridge.shutdown()
        telemetry.close()
        engine.close()
        store.close()


class _Terminated(Exception):
    """SIGTERM arrived: a graceful stop."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _local_runtime(
    data_dir: Path, fake_gpus: str | None, node_config: Path | None
) -> RuntimeBridge:
    """The node inventory and the local runtime on it, wrapped for the engine."""
    from gpuaas.engine.runtime_bridge import RuntimeBridge
    from gpuaas.inventory import detect_node
    from gpuaas.runtimes import LocalRuntime

    node = detect_node(fake_gpus, node_config)
    if node.gpu_source.startswith("none:"):
        typer.echo(
            f"no GPUs ({node.gpu_source[5:].strip()}); use --fake-gpus N to declare some", err=True
        )
    rt = LocalRuntime(data_dir / "runtime", node.gpus)
    models = sorted({g.model for g in node.gpus})
    typer.echo(
        f"local runtime on node {node.name}: {len(node.gpus)} GPU(s) {', '.join(models)} "
        f"({node.gpu_source.split(':')[0]}); {rt.limits.note}"
    )
    return RuntimeBridge(rt, node)


def register(app: typer.Typer) -> None:
    """Add ``server`` to the root app."""
    app.command("server")(serve)


if __name__ == "__main__":
    typer.run(serve)
