"""The server: the one place where the control plane's parts are put together and run.

Named ``server`` for what it builds, a running server (``gpuaas server`` asks for one). It is the
composition root, the one module that knows every part: it opens the store (SQLite in the data
dir unless ``db`` names PostgreSQL), rebuilds the engine from it, builds the runtime chosen by name
from ``runtimes.registry`` (its state in ``DATA_DIR/runtime``) and attaches it through the runtime
bridge, installs the telemetry bridge (usage in the server's own database), makes sure an admin
token exists in ``DATA_DIR/admin-token``, builds the HTTP app, ticks the engine on a thread and
serves the app with uvicorn until SIGTERM or Ctrl-C, then stops every pod. ``build`` puts a
``Server`` together that tests can drive in-process; ``run`` serves one. It holds no scheduling,
HTTP or runtime logic of its own and parses no command line: ``gpuaas server`` (``cli.server``)
turns options into ``ServerOptions``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
import yaml
from fastapi import FastAPI
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from gpuaas import cpus, gc_policy
from gpuaas.api import fast_paths
from gpuaas.api.app import create_app
from gpuaas.api.body import DEFAULT_MAX_BODY
from gpuaas.api.draining import Draining, DrainingServer
from gpuaas.api.http_writes import HttpProtocol
from gpuaas.core.config import SchedulerConfig, parse_configuration
from gpuaas.core.errors import ApplyError
from gpuaas.datadir import DataDirError, DataDirLock, make_private
from gpuaas.engine import notebook_stop
from gpuaas.engine.checks import CheckDispatcher
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import NotFound
from gpuaas.engine.idle_actions import IDLE_ACTIONS
from gpuaas.engine.multikueue.controller import MultiKueueController, MultiKueueOptions
from gpuaas.engine.multikueue.placement_check import CONTROLLER_NAME as OCM_PLACEMENT
from gpuaas.engine.multikueue.placement_check import PlacementCheckController
from gpuaas.engine.multikueue.scores import ScoreCollector
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.engine.telemetry_bridge import install as install_telemetry
from gpuaas.engine.tokens import TokenError, Tokens
from gpuaas.inventory import InventoryError, NodeInventory, detect_node
from gpuaas.runtimes import RuntimeOptions, RuntimeRequestError, registry
from gpuaas.store import Store, StoreError, TokenRecord, open_store
from gpuaas.telemetry.usage_store import UsageStoreError
from gpuaas.telemetry.usage_store_postgres import is_postgres_url
from gpuaas.vocab.kinds import NAMESPACE

_T = TypeVar("_T")
DEFAULT_NAMESPACES = ("default", "kube-system", "kueue-system")
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
POLL_INTERVAL = 0.05  # seconds between runtime polls
log = logging.getLogger(__name__)


class ServerError(Exception):
    """The server cannot start; the message says why, for the person who started it."""


@dataclass(slots=True, frozen=True)
class ServerOptions:
    """What a server is asked for: ``gpuaas server``'s options, with the same defaults."""

    data_dir: Path
    db: str | None = None  # a store URL; None: SQLite in data_dir
    host: str = "127.0.0.1"
    port: int = 8080
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tick: float = 1.0  # seconds between scheduling passes
    max_body: int = DEFAULT_MAX_BODY
    runtime: str = "local"  # a name in runtimes.registry
    fake_gpus: str | None = None  # "N[:MODEL]": declared GPUs instead of NVML's
    node_config: Path | None = None
    ray_address: str | None = None  # --runtime ray: the Ray cluster to join (None: start one)
    ray_nodes: Path | None = None  # --runtime ray: taints per Ray node (YAML)
    kueue_config: Path | None = None  # Kueue's Configuration (fairSharing, waitForPodsReady)
    telemetry_interval: float = 15.0
    watch_history: int = 1_000_000  # changes back a watch may start (older: 410 Expired)
    multikueue_namespace: str = "kueue-system"  # Kueue's namespace: workers' kubeconfig Secrets
    worker_lost_timeout: float = 900.0  # Kueue's multiKueue.workerLostTimeout (15 min)
    multikueue_dispatcher: str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    multikueue_origin: str = "multikueue"  # the origin label's value on this hub's copies
    cpus: str | None = None  # --cpus: the server's own threads on these CPUs (``gpuaas.cpus``)

    @property
    def store_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir / 'gpuaas.db'}"

    @property
    def usage_db(self) -> str | Path:
        """Usage goes to the server's own database: PostgreSQL when the store is, else a file."""
        if self.db is not None and is_postgres_url(self.db):
            return self.db
        return self.data_dir / "usage.db"


@dataclass(slots=True)
class Server:
    """The parts ``build`` put together; ``close`` ends them in reverse order."""

    options: ServerOptions
    node: NodeInventory
    store: Store
    engine: Engine
    tokens: Tokens
    bridge: RuntimeBridge | None  # the runtime, attached; None: admission only (``--runtime none``)
    telemetry: TelemetryBridge
    app: FastAPI
    admin_token_path: Path
    lock: DataDirLock | None = None
    multikueue: MultiKueueController | None = None  # its thread starts with the ticking
    placement: PlacementCheckController | None = None  # OCM's placement add-on, the same
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _ticker: threading.Thread | None = field(default=None, init=False)

    def start_ticking(self) -> None:
        """Schedule every ``tick`` seconds on a thread; with a runtime, poll its pods between."""
        self._ticker = threading.Thread(target=self._tick_loop, name="gpuaas-tick", daemon=True)
        self._ticker.start()
        if self.multikueue is not None:
            self.multikueue.start(self.engine)
        if self.placement is not None:
            self.placement.start(self.engine)

    def close(self) -> None:
        """Stop ticking, stop every pod (graceful server stop), then telemetry, engine, store."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self.placement is not None:
            self.placement.close()
        if self.multikueue is not None:
            self.multikueue.close()
        if self.bridge is not None:
            self.bridge.shutdown()
        self.telemetry.close()
        self.engine.close()
        self.store.close()
        if self.lock is not None:
            self.lock.release()

    def _tick_loop(self) -> None:
        # A stopped victim frees its quota within POLL_INTERVAL; the full pass runs every tick.
        tick = self.options.tick
        interval = min(tick, POLL_INTERVAL) if self.bridge is not None else tick
        next_tick = time.monotonic() + tick
        while not self._stop.wait(interval):
            try:
                if time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + tick
                    self.engine.tick()
                else:
                    self.engine.poll_observers()
            except Exception:  # keep ticking: the next request or tick retries after a reload
                log.exception("scheduling tick failed")


def build(options: ServerOptions, say: Callable[[str], None] = print) -> Server:
    """Put a server together (nothing served yet); ``say`` gets the start-up lines.

    Raises ``ServerError``; whatever was opened before the failure is closed again.
    """
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ServerError("give both --tls-cert and --tls-key, or neither")
    # 1. The data dir (private, and locked: one server per data dir), this node (the runtime's
    #    GPUs, telemetry's, the dashboard's node) and the runtime chosen by name: a bad node or
    #    runtime is refused before the store is opened.
    data_dir = options.data_dir
    try:
        make_private(data_dir)
        lock = DataDirLock(data_dir).acquire()
    except (DataDirError, OSError) as exc:
        raise ServerError(str(exc)) from exc
    try:
        return _build(options, say, lock)
    except BaseException:
        lock.release()
        raise


def _build(options: ServerOptions, say: Callable[[str], None], lock: DataDirLock) -> Server:
    data_dir = options.data_dir
    config = read_kueue_config(options.kueue_config)
    try:
        node = detect_node(options.fake_gpus, options.node_config)
        runtime = registry.create(
            options.runtime,
            RuntimeOptions(data_dir / "runtime", node, options.ray_address, options.ray_nodes),
        )
    except (InventoryError, RuntimeRequestError) as exc:
        raise ServerError(str(exc)) from exc
    except OSError as exc:
        raise ServerError(f"runtime {options.runtime}: {exc}") from exc
    if runtime is not None:
        if node.gpu_source.startswith("none:"):
            gpus = node.gpu_source[5:].strip()
            log.warning("no GPUs (%s); use --fake-gpus N to declare some", gpus)
        models = ", ".join(sorted({g.model for g in node.gpus}))
        say(
            f"{options.runtime} runtime on node {node.name}: {len(node.gpus)} GPU(s) {models} "
            f"({node.gpu_source.split(':')[0]}); {runtime.describe()}"
        )
    # 2. The store, and the engine rebuilt from it, with the runtime attached (re-adoption).
    try:
        store = open_store(options.store_url)
    except StoreError as exc:
        raise ServerError(str(exc)) from exc
    # A runtime of many nodes (Ray) places pods by their flavors' labels itself: no one-node check.
    multi_node = bool(getattr(runtime, "multi_node", False))
    bridge = RuntimeBridge(runtime, None if multi_node else node) if runtime is not None else None
    try:
        engine = Engine(store, config=config, live_runtime=bridge is not None)
    except StoreError as exc:
        store.close()
        raise ServerError(str(exc)) from exc
    try:
        if bridge is not None:
            adopted = bridge.attach(engine)
            if adopted:
                say(f"re-adopted the pods of {len(adopted)} workload(s): {adopted}")
        for problem in engine.restore_problems:
            log.warning("%s", problem)
        # 3. Telemetry: GPU samples and usage, attributed through the runtime's GPU pinning. An
        #    idle Notebook is stopped as RHOAI's culler stops it (engine.notebook_stop).
        notebook_stop.register(IDLE_ACTIONS)
        telemetry = install_telemetry(
            engine,
            usage_db=options.usage_db,
            gpus=node.gpus,
            interval_seconds=options.telemetry_interval,
            owners=bridge.gpu_owners if bridge is not None else None,  # under the bridge's lock
            pod_cpu=bridge.pod_cpu if bridge is not None else None,  # GPU load without NVML
            simulated_gpus=node.gpu_source == "fake" or node.gpu_source.startswith("none:"),
        )
    except (StoreError, UsageStoreError) as exc:
        if bridge is not None:
            bridge.shutdown()
        engine.close()
        store.close()
        raise ServerError(str(exc)) from exc
    # 4. The namespaces a cluster with Kueue has from the start, the admin token, the HTTP app;
    #    from here on Workload creates are acknowledged once stored and scheduled in batches.
    ensure_namespaces(engine)
    engine.start_scheduler()
    tokens = Tokens(store, engine.committer)
    token_path = tokens.ensure_admin(data_dir)
    app = create_app(
        engine,
        tokens,
        max_body=options.max_body,
        node=node,
        runtime=bridge,
        telemetry=telemetry,
        watch_history=options.watch_history,
    )
    say(f"admin token: {token_path}")
    # 5. MultiKueue's admission check controller (its remote I/O runs on its own thread).
    multikueue = MultiKueueController(
        MultiKueueOptions(
            namespace=options.multikueue_namespace,
            worker_lost_timeout=options.worker_lost_timeout,
            dispatcher=options.multikueue_dispatcher,
            origin=options.multikueue_origin,
        )
    )
    # 6. OCM's placement add-on: Placements, live GPU scores, the MultiKueueConfigs they make.
    ns = options.multikueue_namespace
    placement = PlacementCheckController(ns, collector=ScoreCollector(ns))
    engine.add_observer(CheckDispatcher({MULTIKUEUE: multikueue, OCM_PLACEMENT: placement}))
    return Server(
        options,
        node,
        store,
        engine,
        tokens,
        bridge,
        telemetry,
        app,
        token_path,
        lock,
        multikueue,
        placement,
    )


def read_kueue_config(path: Path | None) -> SchedulerConfig:
    """Kueue's ``Configuration`` file (``--kueue-config``): the fields that change scheduling,
    as Kueue's controller manager reads them at start-up. Raises ``ServerError`` naming the file,
    the field and the reason."""
    if path is None:
        return SchedulerConfig()
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ServerError(f"--kueue-config {path}: {exc}") from exc
    try:
        return parse_configuration(doc if doc is not None else {})
    except ApplyError as exc:
        raise ServerError(f"--kueue-config {path}: {exc}") from exc


def ensure_namespaces(engine: Engine) -> None:
    """Create ``default``, ``kube-system`` and ``kueue-system`` when absent, as a Kubernetes
    cluster with Kueue installed has them (a LocalQueue in ``default`` applies at once)."""
    for name in DEFAULT_NAMESPACES:
        try:
            engine.get(NAMESPACE, None, name)
        except NotFound:
            doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            engine.create(NAMESPACE, None, doc)


def run(options: ServerOptions, say: Callable[[str], None] = print) -> None:
    """Build a server, serve it until SIGTERM or Ctrl-C, then close it. Raises ``ServerError``."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if options.cpus is not None:  # before build starts any thread: threads inherit it
        try:
            own = cpus.parse(options.cpus)
            policy = cpus.pin(own)
        except (cpus.CpuListError, OSError) as exc:
            raise ServerError(f"--cpus {exc}") from exc
        pods = cpus.describe(cpus.for_children() or frozenset())
        say(f"server threads on CPU {cpus.describe(own)} ({policy}); its pods on CPU {pods}")
    server = build(options, say)
    gc_policy.apply()  # after the store is loaded: the collector never walks it again
    scheme = "https" if options.tls_cert else "http"
    url = options.store_url.split("?")[0]
    say(f"serving on {scheme}://{options.host}:{options.port} (store {url})")
    server.start_ticking()
    # uvicorn re-raises SIGTERM once it has shut down; turn it into an exception so the
    # ``finally`` below still runs and stops the pods (the default action would just exit).
    signal.signal(signal.SIGTERM, _terminated)
    app = Draining(server.app)  # open watches and follows end at once on stop, without a trace
    config = uvicorn.Config(
        app,
        proxy_headers=False,  # applied below, behind the write fast paths (which never read them)
        host=options.host,
        port=options.port,
        log_level="warning",
        ssl_certfile=str(options.tls_cert) if options.tls_cert else None,
        ssl_keyfile=str(options.tls_key) if options.tls_key else None,
        timeout_graceful_shutdown=2,
        access_log=False,
        loop="uvloop",  # the C event loop and HTTP parser (dependencies), not asyncio/h11
        http=HttpProtocol,  # httptools', with one socket write per response
    )
    draining: Any = app  # uvicorn's ASGI types are narrower than what its middleware takes
    proxied: Any = ProxyHeadersMiddleware(draining, trusted_hosts=config.forwarded_allow_ips)
    config.app = fast_paths.outermost(server.app, proxied)
    try:
        DrainingServer(config, app).run()
    except _Terminated:
        pass
    finally:
        if server.bridge is not None:
            say("stopping every workload's pods (graceful server stop)")
        server.close()


def create_token(store_url: str, label: str, namespaces: tuple[str, ...], *, admin: bool) -> str:
    """A token written straight into the store (on the server's machine, no server needed).

    Returns the token, shown once: only its hash is kept. Raises ``ServerError``.
    """
    return _with_tokens(store_url, lambda t: t.create(label, namespaces, admin=admin)[0])


def list_tokens(store_url: str) -> list[TokenRecord]:
    """Every token in the store (hashes, names, namespaces). Raises ``ServerError``."""
    return _with_tokens(store_url, lambda t: t.records())


def revoke_token(store_url: str, ref: str) -> TokenRecord:
    """Delete the token with this id or name from the store; a running server stops accepting it
    within ``tokens.CACHE_SECONDS``. Raises ``ServerError``."""
    return _with_tokens(store_url, lambda t: t.revoke(ref))


def _with_tokens(store_url: str, act: Callable[[Tokens], _T]) -> _T:
    try:
        store = open_store(store_url)
        try:
            return act(Tokens(store))
        finally:
            store.close()
    except (StoreError, TokenError) as exc:
        raise ServerError(str(exc)) from exc


class _Terminated(Exception):
    """SIGTERM arrived: a graceful stop."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated
