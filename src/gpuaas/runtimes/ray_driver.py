"""The Ray runtime as the server uses it: its Ray driver in a child process, so the server
outlives the Ray head.

A Ray driver cannot outlive its cluster's head: once the GCS is gone, Ray's core worker ends the
process it runs in (when its raylet exits, or after ``RAY_gcs_rpc_server_reconnect_timeout_s``),
and calls made meanwhile can block for a minute. So ``RayDriver`` runs ``ray_runtime.RayRuntime``
in a child process (``python -m gpuaas.runtimes.ray_driver``) and forwards every ``Runtime`` call
to it over a socket pair. When the head is lost (its GCS port refuses connections, the child died or stopped
answering), the runtime is **degraded**: the server stays up, the child is ended, pods are shown
as last seen, starts wait (``RuntimeUnavailable``, a pending reason, retried), stops are kept for
later, and ``nodes()`` lists the last known nodes as not alive. Every ``RETRY_SECONDS`` a new
child tries to join again; once the head answers, it re-adopts every recorded run
(``RayRuntime.adopt``): with a new cluster the placement groups are gone, so each run ends as
``Stopped`` and the engine, which still holds the workload admitted, starts it anew there; with a
head restarted with GCS fault tolerance the launchers are found and the pods go on. It decides
nothing about admission and holds no pod itself.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gpuaas import cpus
from gpuaas.core.objects import Taint
from gpuaas.runtimes.base import (
    DEFAULT_BACKOFF_LIMIT,
    PodCpu,
    PodSpec,
    RuntimeEvent,
    RuntimeRequestError,
    RuntimeUnavailable,
    WorkloadRun,
)
from gpuaas.runtimes.pod_init import take_back
from gpuaas.runtimes.ray_nodes import RayNode
from gpuaas.runtimes.ray_records import RunDir

log = logging.getLogger(__name__)

CALL_TIMEOUT = 20.0  # seconds a call may take before the child counts as stuck (head lost)
START_TIMEOUT = 120.0  # joining the cluster and re-adopting its pods
RETRY_SECONDS = 2.0  # between tries to join again while degraded
_PROBE_SECONDS = 0.5  # how often the head's GCS port is probed
_LOG_FOLLOW_SECONDS = 0.5
_NODES_REFRESH_SECONDS = 2.0  # how often a poll also reads the nodes (shown while degraded)
RAY_RUNTIME = "gpuaas.runtimes.ray_runtime:RayRuntime"  # what the child runs


class RayDriver:
    """The ``Runtime`` the server gets for ``--runtime ray``; see the module docstring."""

    multi_node = True  # the server skips its one-node check: Ray places pods by label

    def __init__(
        self,
        root: Path,
        address: str | None = None,
        taints: dict[str, tuple[Taint, ...]] | None = None,
        *,
        local_gpus: int | None = None,
        local_labels: dict[str, str] | None = None,
        runtime: str = RAY_RUNTIME,
    ) -> None:
        """``runtime``: ``module:callable`` the child builds its runtime with, called as
        ``RayRuntime`` is (tests of the degraded mode pass a fake, ``testing.fake_runtime``)."""
        self.address = address
        self._args = (runtime, root, address, taints or {}, local_gpus, local_labels)
        self._dir = RunDir(root)
        self._lock = threading.RLock()
        self._conn: Connection | None = None
        self._proc: Any = None
        self._runs: dict[str, WorkloadRun] = {}  # as last seen
        self._nodes: list[RayNode] = []  # as last seen
        self._stops: dict[str, float | None] = {}  # asked while degraded
        self._events: list[RuntimeEvent] = []  # from the re-adoption after a reconnect
        self.degraded_since: float | None = None
        self.degraded_reason = ""
        self._next_try = 0.0
        self._probed_at = 0.0
        self._description = ""
        self._joining: threading.Thread | None = None
        self._joined: tuple[Connection, Any, str] | None = None
        self._join_error = ""
        self._nodes_at = 0.0  # when the nodes were last asked for (monotonic)
        self._spawn()  # raises RuntimeRequestError: a server that cannot join does not start
        self._refresh_nodes(force=True)

    # -- the Runtime protocol ---------------------------------------------------------------------
    def start(
        self,
        key: str,
        pods: list[PodSpec],
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        restart_count: int | None = None,
    ) -> None:
        with self._lock:
            if not self._usable():
                raise RuntimeUnavailable(f"the Ray head is unreachable ({self.degraded_reason})")
            self._call("start", key, pods, backoff_limit=backoff_limit, restart_count=restart_count)
            self._runs = self._call("running")  # stoppable at once, before the next poll

    def stop(self, key: str, grace_seconds: float | None = None) -> bool:
        with self._lock:
            if key not in self._runs:
                return False
            if self._usable():
                with contextlib.suppress(RuntimeUnavailable):
                    stopping: bool = self._call("stop", key, grace_seconds)
                    self._runs[key] = replace(self._runs[key], stopping=True)
                    return stopping
            self._stops[key] = grace_seconds  # carried out once the head answers again
            self._runs[key] = replace(self._runs[key], stopping=True)
            return True

    def poll(self) -> list[RuntimeEvent]:
        with self._lock:
            events, self._events = self._events, []
            if not self._usable():
                return events
            with contextlib.suppress(RuntimeUnavailable):
                events += self._call("poll")
                self._runs = self._call("running")
                self._refresh_nodes()
            return events

    def _refresh_nodes(self, *, force: bool = False) -> None:
        """Keep the last known nodes fresh, so that losing the head still shows what was there."""
        now = time.monotonic()
        if force or now - self._nodes_at >= _NODES_REFRESH_SECONDS:
            self._nodes_at = now
            with contextlib.suppress(RuntimeUnavailable, RuntimeRequestError):
                self._nodes = self._call("nodes")

    def running(self) -> dict[str, WorkloadRun]:
        with self._lock:
            return dict(self._runs)

    def run_of(self, key: str) -> WorkloadRun | None:
        with self._lock:
            return self._runs.get(key)

    def adopt(self) -> list[str]:
        with self._lock:
            adopted: list[str] = self._call("adopt")
            self._events += self._call("poll")
            self._runs = self._call("running")
            return adopted

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        first: list[str] = self._call("logs_list", key, pod)
        return self._follow(key, pod, first) if follow else iter(first)

    def shutdown(self, grace_seconds: float | None = None) -> None:
        with self._lock:
            if self._conn is not None and self._proc is not None and self._proc.poll() is None:
                with contextlib.suppress(RuntimeUnavailable, RuntimeRequestError):
                    self._call("shutdown", grace_seconds, timeout=120.0)
            self._end_child()
            self._runs.clear()

    def forget(self, key: str) -> None:
        self._call("forget", key)

    def workload_dir(self, key: str) -> Path:
        return self._dir.workload_dir(key)

    def ray_records(self, key: str) -> dict[str, dict[str, Any]]:
        """From the rendezvous on the cluster; none while degraded (the head is lost)."""
        with contextlib.suppress(RuntimeUnavailable):
            found: dict[str, dict[str, Any]] = self._call("ray_records", key)
            return found
        return {}

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        """Empty: GPU indices are per Ray node here; ``nodes()`` says who holds which GPU."""
        return {}

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """Empty, as ``RayRuntime.pod_cpu``: no Ray pod's CPU time is read yet."""
        return {}

    def describe(self) -> str:
        return self._description

    def nodes(self) -> list[RayNode]:
        """The Ray cluster's nodes; while degraded, the last known ones, none of them alive."""
        with self._lock:
            if self._usable():
                with contextlib.suppress(RuntimeUnavailable):
                    self._nodes = self._call("nodes")
                    return list(self._nodes)
            return [replace(n, alive=False, used_by={}) for n in self._nodes]

    # -- the child --------------------------------------------------------------------------------
    def _spawn(self) -> None:
        """Start a child that joins the cluster; raises ``RuntimeRequestError`` if it cannot."""
        self._conn, self._proc, self._description = _launch(self._args)

    def _join_in_background(self) -> None:
        """While degraded: a new child joins in a thread, so the engine never waits on Ray."""

        def join() -> None:
            try:
                self._joined = _launch(self._args)
            except RuntimeRequestError as exc:
                self._join_error = str(exc)

        self._joined, self._join_error = None, ""
        self._joining = threading.Thread(target=join, name="gpuaas-ray-join", daemon=True)
        self._joining.start()

    def _usable(self) -> bool:
        """Whether calls may go to the child now; joins again, in the background, once the head
        answers after it was lost."""
        if self.degraded_since is None:
            now = time.monotonic()
            if now - self._probed_at >= _PROBE_SECONDS:
                self._probed_at = now
                if not self._head_answers():
                    self._degrade("the Ray head's GCS refuses connections")
                    return False
            return True
        if self._joining is not None:
            if self._joining.is_alive():
                return False
            self._joining = None
            if self._joined is None:
                self.degraded_reason = f"cannot join the Ray cluster again: {self._join_error}"
                return False
            self._conn, self._proc, self._description = self._joined
            self._joined = None
            self._rejoined()
            return self.degraded_since is None
        if time.monotonic() < self._next_try:
            return False
        self._next_try = time.monotonic() + RETRY_SECONDS
        if self._head_answers():
            self._join_in_background()
        return False

    def _head_answers(self) -> bool:
        if not self.address:
            return self._proc is not None and self._proc.poll() is None
        host, _, port = self.address.rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
                return True
        except (OSError, ValueError):
            return False

    def _degrade(self, why: str) -> None:
        if self.degraded_since is None:
            log.warning("Ray runtime degraded: %s; pods shown as last seen, starts wait", why)
            self.degraded_since = time.time()
            self.degraded_reason = why
            self._next_try = time.monotonic() + RETRY_SECONDS
        self._end_child()

    def _rejoined(self) -> None:
        """A new child joined the cluster: re-adopt every recorded run, do the stops asked
        meanwhile."""
        self.degraded_since, self.degraded_reason = None, ""
        try:
            self.adopt()
            for key, grace in sorted(self._stops.items()):
                with contextlib.suppress(RuntimeRequestError):
                    self._call("stop", key, grace)
            self._stops.clear()
            log.warning("Ray runtime: joined the Ray cluster again (%s)", self._description)
        except RuntimeRequestError as exc:
            self._degrade(f"cannot re-adopt the pods: {exc}")

    def _end_child(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            _end(self._proc)
        self._conn, self._proc = None, None

    def _call(self, name: str, *args: Any, timeout: float = CALL_TIMEOUT, **kwargs: Any) -> Any:
        with self._lock:
            if self.degraded_since is not None or self._conn is None:
                raise RuntimeUnavailable(f"the Ray head is unreachable ({self.degraded_reason})")
            try:
                self._conn.send((name, args, kwargs))
                if not self._conn.poll(timeout):
                    raise TimeoutError(f"{name} took more than {timeout:g}s")
                ok, value = self._conn.recv()
            except (OSError, EOFError, TimeoutError) as exc:
                self._degrade(f"the Ray driver stopped answering ({type(exc).__name__}: {exc})")
                raise RuntimeUnavailable(f"the Ray head is unreachable ({exc})") from None
            if not ok:
                raise value
            return value

    def _follow(self, key: str, pod: str | None, first: list[str]) -> Iterator[str]:
        yield from first
        seen = len(first)
        while True:
            with self._lock:
                live = key in self._runs
            if not live:
                return
            time.sleep(_LOG_FOLLOW_SECONDS)
            try:
                lines: list[str] = self._call("logs_list", key, pod)
            except (RuntimeUnavailable, RuntimeRequestError):
                return
            yield from lines[seen:]
            seen = max(seen, len(lines))


def _launch(args: tuple[Any, ...]) -> tuple[Connection, Any, str]:
    """A child process that joins the cluster: its connection, the process and its description.

    A plain subprocess (``python -m gpuaas.runtimes.ray_driver FD``) on one end of a socket pair,
    rather than ``multiprocessing``: no helper process outlives it, and the server's main module
    is not imported again in the child."""
    ours_sock, theirs_sock = socket.socketpair()
    try:
        proc = subprocess.Popen(
            # The CPUs the server had before ``--cpus`` bound its own threads: the driver (and
            # a Ray cluster it starts) is the workloads', not the server's (``gpuaas.cpus``).
            [sys.executable, "-m", __name__, str(theirs_sock.fileno()), cpus.child_arg()],
            pass_fds=(theirs_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            # Its own session: a stop signal to the server's group is the server's to handle (it
            # stops the pods through this child); the child ends when its connection closes.
            start_new_session=True,
        )
    finally:
        theirs_sock.close()
    ours = Connection(ours_sock.detach())
    try:
        ours.send(args)
        ours.send(("describe", (), {}))
        if not ours.poll(START_TIMEOUT):
            raise TimeoutError(f"no answer in {START_TIMEOUT:g}s")
        ok, value = ours.recv()
    except (OSError, EOFError, TimeoutError) as exc:
        ok, value = False, RuntimeRequestError(f"{type(exc).__name__}: {exc}")
    if not ok:
        ours.close()
        _end(proc)
        raise RuntimeRequestError(f"cannot join the Ray cluster: {value}")
    return ours, proc, str(value)


def _end(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=1)  # it ends when its connection closes, unless stuck in Ray
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _serve(
    conn: Connection,
    factory: str,
    root: Path,
    address: str | None,
    taints: dict[str, tuple[Taint, ...]],
    local_gpus: int | None,
    local_labels: dict[str, str] | None,
) -> None:
    """The child: join Ray, then answer calls until the server closes the pipe (or dies)."""
    # A stop signal to the server's process group (Ctrl-C, systemd, kill -TERM -PGID) is the
    # server's to handle: it stops the pods through this child, then closes the pipe.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module, _, name = factory.partition(":")
    try:
        build = getattr(importlib.import_module(module), name)
        runtime = build(root, address, taints, local_gpus=local_gpus, local_labels=local_labels)
        # ray.init installs Ray's own SIGTERM handler (it would end this child mid-shutdown)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except Exception as exc:  # answer the first call with why, then end
        with contextlib.suppress(EOFError, OSError):
            conn.recv()
            conn.send((False, RuntimeRequestError(f"{type(exc).__name__}: {exc}")))
        return
    calls: dict[str, Callable[..., Any]] = {
        "start": runtime.start,
        "stop": runtime.stop,
        "poll": runtime.poll,
        "running": runtime.running,
        "adopt": runtime.adopt,
        "logs_list": lambda key, pod: list(runtime.logs(key, pod, follow=False)),
        "shutdown": runtime.shutdown,
        "forget": runtime.forget,
        "ray_records": runtime.ray_records,
        "describe": runtime.describe,
        "nodes": getattr(runtime, "nodes", list),
    }
    while True:
        try:
            name, args, kwargs = conn.recv()
        except (EOFError, OSError):  # the server is gone: nobody drives these pods from here
            return
        try:
            reply: tuple[bool, Any] = (True, calls[name](*args, **kwargs))
        except RuntimeRequestError as exc:
            reply = (False, exc)
        except Exception as exc:  # a Ray error: the server sees it as a refused request
            reply = (False, RuntimeRequestError(f"{type(exc).__name__}: {exc}"))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return
        if name == "shutdown":
            return


def _child(fd: int) -> None:
    conn = Connection(fd)
    try:
        args = conn.recv()
    except (EOFError, OSError):
        return
    _serve(conn, *args)


if __name__ == "__main__":
    # before anything starts a thread: the server's CPUs and policy are not the workload's
    problem = take_back(sys.argv[2] if len(sys.argv) > 2 else "")
    if problem:
        raise SystemExit(f"ray_driver: {problem}")
    _child(int(sys.argv[1]))


__all__ = ["CALL_TIMEOUT", "RAY_RUNTIME", "RETRY_SECONDS", "RayDriver"]
