"""A small multi-node Ray cluster on this machine, for tests and benchmarks of the Ray runtime.

``LocalRayCluster`` starts a head and workers with ``ray start --block``, each its own process
session, its own ports and its own ``--labels`` and ``--num-gpus`` (fake GPUs are plain Ray
resources), with Ray's health checks shortened so a dead node is seen in a few seconds. Every
process it starts carries a marker in its environment (``GPUAAS_TEST_RAY=<token>``), so ``stop``
finds and kills exactly its own Ray processes (and the pods Ray started), never another user's
Ray: it never runs ``ray stop``. It decides nothing and imports nothing of gpuaas's layers.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gpuaas.testing.ports import answers

MARKER_ENV = "GPUAAS_TEST_RAY"
HEALTH_ENV = {
    # a dead raylet is declared dead after about 3 s instead of 30 s (not less: on a busy
    # 2-core machine a live raylet can miss a few checks)
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "5",
    # workers give up on a lost head after 10 s instead of 60 s
    "RAY_gcs_rpc_server_reconnect_timeout_s": "10",
    # a node's start waits up to 3 min (not 1) for its raylet to register: on a busy 2-core
    # machine the head's Python helpers alone take that long
    "RAY_raylet_start_wait_time_s": "180",
}


_NODE_ATTEMPTS = 2


class NodeExited(RuntimeError):
    """A node's ``ray start`` exited while the cluster started."""


@dataclass(slots=True)
class RayNodeSpec:
    name: str  # becomes the label kubernetes.io/hostname
    labels: dict[str, str] = field(default_factory=dict)
    num_gpus: int = 0
    num_cpus: int = 4
    node_ip: str | None = None  # --node-ip-address (a loopback alias stands for another machine)


@dataclass(slots=True)
class _Started:
    spec: RayNodeSpec
    proc: subprocess.Popen[bytes]
    log: Path


class LocalRayCluster:
    def __init__(
        self,
        root: Path,
        nodes: list[RayNodeSpec],
        object_store_mb: int = 80,
        gcs_port: int = 0,
    ) -> None:
        """``gcs_port``: the head's port (0: a free one); a head started again at the port of
        a lost one is how a Ray cluster comes back at the address its clients know."""
        if not nodes:
            raise ValueError("a Ray cluster needs at least a head node")
        self.root = root
        self.specs = nodes
        self.object_store_bytes = object_store_mb * 1024 * 1024
        self.token = secrets.token_hex(6)
        self.gcs_port = gcs_port
        self.nodes: dict[str, _Started] = {}
        # every node's session (its `ray start`'s pid), kept after the node goes: Ray's agents
        # overwrite their environment with their process title, so the marker alone misses
        # them once their raylet is gone and they are orphans
        self._sessions: set[int] = set()
        # short: Ray's socket paths under it must stay within AF_UNIX's 107 bytes
        self.temp_dir = Path(tempfile.gettempdir()) / f"gpuaas-test-ray-{self.token}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def start(self, timeout: float = 240.0) -> LocalRayCluster:
        """Start the head, then every worker; return once all nodes are registered."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            head, *workers = self.specs
            self.gcs_port = self.gcs_port or _free_ports(1)[0]
            self._start_node(head, head=True)
            _wait_port(self.gcs_port, timeout, self.nodes[head.name])
            self._wait_nodes(1, timeout)
            for count, spec in enumerate(workers, start=2):
                # one at a time: nodes that start together in one session dir pick the same
                # socket names and one of them dies
                for attempt in range(_NODE_ATTEMPTS):
                    self._start_node(spec, head=False)
                    try:
                        self._wait_nodes(count, timeout)
                        break
                    except NodeExited:
                        # "timed out during startup": on a busy 2-core machine the GCS misses
                        # the node's registration deadline at times; a second start succeeds
                        if attempt + 1 == _NODE_ATTEMPTS:
                            raise
                        self._kill_session(self.nodes.pop(spec.name))
        except BaseException:
            self.stop()
            raise
        return self

    def kill_raylet(self, name: str) -> None:
        """SIGKILL the raylet of node ``name``, as when its machine dies; the rest stays up."""
        started = self.nodes[name]
        for proc in psutil.Process(started.proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if proc.name() == "raylet":
                    proc.kill()

    def kill_node(self, name: str) -> None:
        """SIGKILL every Ray process of node ``name`` (the head: the cluster's GCS goes too)."""
        started = self.nodes[name]
        procs = [psutil.Process(started.proc.pid)]
        with contextlib.suppress(psutil.Error):
            procs += procs[0].children(recursive=True)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()

    def stop(self) -> None:
        """Stop every node and kill whatever of this cluster is still alive (pods included)."""
        for started in reversed(list(self.nodes.values())):
            with contextlib.suppress(ProcessLookupError):
                started.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for started in self.nodes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                started.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for _ in range(50):
            left = self.processes()
            if not left:
                break
            for proc in left:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            time.sleep(0.1)
        for started in self.nodes.values():
            if started.proc.poll() is None:
                started.proc.kill()
            started.proc.wait()
        self.nodes.clear()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def restart_node(self, name: str, timeout: float = 240.0) -> None:
        """Start node ``name`` anew (after ``kill_raylet``): a new Ray node, same labels."""
        self._kill_session(self.nodes.pop(name))
        spec = next(s for s in self.specs if s.name == name)
        self._start_node(spec, head=False)
        self._wait_nodes(len(self.nodes), timeout)

    def _kill_session(self, started: _Started) -> None:
        """Kill what a node's ``ray start`` left (a failed start's raylet may still register)."""
        with contextlib.suppress(ProcessLookupError):
            started.proc.kill()
        started.proc.wait()
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if os.getsid(proc.pid) == started.proc.pid:
                    proc.kill()

    def processes(self) -> list[psutil.Process]:
        """Live processes of this cluster: in a node's session, or carrying the cluster's marker
        (Ray's and the pods')."""
        needle = f"{MARKER_ENV}={self.token}"
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                if (
                    os.getsid(proc.pid) in self._sessions
                    or proc.environ().get(MARKER_ENV) == self.token
                    or needle in proc.cmdline()
                ):
                    found.append(proc)
        return found

    def _start_node(self, spec: RayNodeSpec, *, head: bool) -> None:
        node_port, obj_port, agent, agent_grpc, env_port, metrics, client, dash = _free_ports(8)
        labels = {"kubernetes.io/hostname": spec.name, **spec.labels}
        argv = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--block",
            f"--num-cpus={spec.num_cpus}",
            f"--num-gpus={spec.num_gpus}",
            f"--object-store-memory={self.object_store_bytes}",
            "--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()),
            f"--node-manager-port={node_port}",
            f"--object-manager-port={obj_port}",
            f"--dashboard-agent-listen-port={agent}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={env_port}",
            f"--metrics-export-port={metrics}",
            "--disable-usage-stats",
            # one Python process fewer per node (logs are read through the pods' actors): on a
            # busy 2-core machine every node's start is slow enough already
            "--include-log-monitor=false",
        ]
        if spec.node_ip:
            argv.append(f"--node-ip-address={spec.node_ip}")
        if head:
            argv += [
                "--head",
                f"--port={self.gcs_port}",
                f"--ray-client-server-port={client}",
                "--include-dashboard=false",
                "--no-monitor",  # no autoscaler: the test cluster's nodes are fixed
                f"--dashboard-port={dash}",
                f"--temp-dir={self.temp_dir}",
            ]
        else:
            argv += [f"--address={self.address}"]
        # explicit: a head would otherwise turn token auth on if ~/.ray/auth_token exists
        env = {"RAY_AUTH_MODE": "disabled", **os.environ, **HEALTH_ENV, MARKER_ENV: self.token}
        env.pop("RAY_ADDRESS", None)
        log = self.root / f"{spec.name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.nodes[spec.name] = _Started(spec, proc, log)
        self._sessions.add(proc.pid)

    def _wait_nodes(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for started in self.nodes.values():
                if started.proc.poll() is not None:
                    raise NodeExited(
                        f"ray node {started.spec.name} exited: {started.log.read_text()[-2000:]}"
                    )
            up = sum(b"will now block forever" in s.log.read_bytes() for s in self.nodes.values())
            if up == count:
                return
            time.sleep(0.2)
        raise TimeoutError(f"Ray cluster: {count} nodes not up after {timeout}s")


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
    return ports


def _wait_port(port: int, timeout: float, node: _Started) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.proc.poll() is not None:
            raise RuntimeError(f"ray head exited: {node.log.read_text()[-2000:]}")
        if answers(port, timeout=0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"port {port} did not open in {timeout}s")
