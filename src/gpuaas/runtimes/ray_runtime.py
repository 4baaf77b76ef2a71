"""The Ray runtime: admitted workloads' pods run on the nodes of a Ray cluster.

This module owns the life of pods on Ray (``gpuaas server --runtime ray [--ray-address A]``): a
workload's pods are placed all or nothing with one detached placement group (a bundle per pod with
its CPUs, memory and GPUs, and a label selector from its flavor's ``nodeLabels`` and the taints it
cannot tolerate, ``ray_nodes``), and each pod runs inside a detached actor named after it
(``ray_actor.PodProcess``), so Ray picks the node and the GPUs, and a restarted server finds the
actors again by name (``adopt``). Pods stay Pending until the group is placed, as a Kubernetes pod
waits for a node; ``Started`` comes when every pod runs. Stops are SIGTERM, then SIGKILL after the
grace period, done by each pod's actor on its node; a pod counts as gone only when its actor says
no process of it is left, or when its actor is dead (its node died: the pod's group leader kills
the group when its actor goes). A pod that fails, or whose node died, is retried within the
backoffLimit by a new actor in the same bundle, which Ray places anew if the node is gone; if no
node can take it, it stays Pending. It decides nothing about admission; calls come from one thread
(the bridge's lock), reads of logs may come from another.

Without the ``ray`` extra this module still imports (``create`` says what to install).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaas.core.objects import Taint
from gpuaas.runtimes import ray_nodes
from gpuaas.runtimes.base import (
    DEFAULT_BACKOFF_LIMIT,
    AlreadyRunning,
    EventKind,
    PodCpu,
    PodSpec,
    PodStatus,
    RuntimeEvent,
    RuntimeOptions,
    RuntimeRequestError,
    WorkloadRun,
    check_pods,
)
from gpuaas.runtimes.ray_records import (
    RayPod,
    RayRun,
    RunDir,
    bundle,
    from_record,
    lines,
)

if TYPE_CHECKING:
    from gpuaas.runtimes.ray_driver import RayDriver

NAMESPACE = "gpuaas"
LOST_EXIT_CODE = 137  # a pod whose actor (or node) died: killed, as Kubernetes reports it
_WATCH_TIMEOUT = 5.0


class RayRuntime:
    multi_node = True  # the server skips its one-node check: Ray places pods by label

    def __init__(
        self,
        root: Path,
        address: str | None = None,
        taints: dict[str, tuple[Taint, ...]] | None = None,
        clock: Callable[[], float] = time.time,
        *,
        local_gpus: int | None = None,
        local_labels: dict[str, str] | None = None,
    ) -> None:
        """Join the Ray cluster at ``address``, or start a one-node Ray in this process with
        ``local_gpus`` GPUs and ``local_labels`` (this node's, so flavors match as locally)."""
        import ray

        self._ray = ray
        self._dir = RunDir(root)
        self._taints = taints or {}
        self._clock = clock
        self._runs: dict[str, RayRun] = {}
        self._events: list[RuntimeEvent] = []
        self._lock = threading.RLock()
        self.address = address
        if not ray.is_initialized():
            here: dict[str, Any] = {}
            if address is None:
                # Ray's ray.init() of a new local cluster writes ~/.ray/auth_token, which every
                # later `ray start` of this user then requires: the one `ray start` gives, unless
                # the user chose (RAY_AUTH_MODE=token)
                os.environ.setdefault("RAY_AUTH_MODE", "disabled")
                labels = {k: v for k, v in (local_labels or {}).items()
                          if not k.startswith("ray.io/")}  # fmt: skip
                here = {"num_gpus": local_gpus, "labels": labels, "include_dashboard": False}
            ray.init(
                address=address,
                namespace=NAMESPACE,
                logging_level=logging.ERROR,
                log_to_driver=False,
                configure_logging=False,
                **here,
            )
        from gpuaas.runtimes.ray_actor import PodProcess

        self._actor_class = ray.remote(PodProcess)

    # -- the Runtime protocol ----------------------------------------------------------------------
    def start(
        self,
        key: str,
        pods: list[PodSpec],
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        restart_count: int | None = None,
    ) -> None:
        with self._lock:
            check_pods(key, pods)
            if key in self._runs:
                raise AlreadyRunning(f"Workload {key}: already has pods on the Ray cluster")
            previous = self._dir.read(key)
            if restart_count is None:
                restart_count = 0 if previous is None else int(previous["restartCount"]) + 1
            run = RayRun(
                key,
                restart_count,
                backoff_limit,
                {p.name: RayPod(p, i, secrets.token_hex(8)) for i, p in enumerate(pods)},
            )
            # 1. one placement group: every pod is placed, or none (Ray places bundles atomically)
            # the nodes are asked for (a GCS round trip per start) only when taints are set
            nodes = self.nodes() if self._taints else []
            selectors = [
                ray_nodes.label_selector(p.node_selector, p.tolerations, nodes) for p in pods
            ]
            from ray.util.placement_group import placement_group

            try:
                run.pg = placement_group(
                    [bundle(p) for p in pods],
                    strategy="PACK",
                    name=run.pg_name,
                    lifetime="detached",
                    bundle_label_selector=selectors,
                )
                # 2. one actor per pod in its bundle; it starts the pod once the group is placed
                self._dir.write(run)
                for pod in run.pods.values():
                    self._spawn(run, pod)
            except Exception as exc:  # Ray refused (a bad selector, the cluster unreachable)
                for pod in run.pods.values():
                    self._kill_actor(pod)
                self._remove_pg(run)
                raise RuntimeRequestError(f"Workload {key}: Ray refused its pods: {exc}") from None
            self._runs[key] = run
            self._dir.write(run)

    def stop(self, key: str, grace_seconds: float | None = None) -> bool:
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                return False
            run.stopping = True
            self._dir.write(run)
            for pod in run.pods.values():
                self._terminate(pod, grace_seconds)
            return True

    def poll(self) -> list[RuntimeEvent]:
        with self._lock:
            self._collect()
            for run in list(self._runs.values()):
                if not run.started and all(p.phase == "Running" for p in run.pods.values()):
                    run.started = True
                    where = "; ".join(
                        f"{p.spec.name} on {p.node}"
                        + (f" GPU {','.join(p.gpus)}" if p.gpus else "")
                        for p in run.pods.values()
                    )
                    self._emit(
                        EventKind.STARTED,
                        run.key,
                        message=f"{len(run.pods)} pod(s), restart {run.restart_count}: {where}",
                    )
                if all(p.gone for p in run.pods.values()):
                    self._finish(run)
            events, self._events = self._events, []
            return events

    def running(self) -> dict[str, WorkloadRun]:
        with self._lock:
            return {key: self._status(run) for key, run in sorted(self._runs.items())}

    def adopt(self) -> list[str]:
        with self._lock:
            adopted = []
            known: set[str] = set()
            for record in self._dir.records():
                key = record["key"]
                if key in self._runs or record.get("outcome"):
                    continue
                run = self._adopt_run(from_record(record))
                known.update(p.actor_name for p in run.pods.values())
                self._runs[key] = run
                adopted.append(key)
                alive = sum(p.actor is not None for p in run.pods.values())
                self._emit(
                    EventKind.ADOPTED, key, message=f"{alive} of {len(run.pods)} pod(s) alive"
                )
            self._remove_strays(known)
            return adopted

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        with self._lock:
            run = self._runs.get(key)
            names = list(run.pods) if run else self._dir.logged_pods(key)
        if not names:
            raise RuntimeRequestError(f"Workload {key}: no pods and no logs on the Ray cluster")
        if pod is not None:
            if pod not in names:
                raise RuntimeRequestError(f"Workload {key}: no pod {pod!r} (pods: {names})")
            names = [pod]
        return self._log_lines(key, names, follow)

    def shutdown(self, grace_seconds: float | None = None, timeout: float = 60.0) -> None:
        with self._lock:
            for key in list(self._runs):
                self.stop(key, grace_seconds)
        deadline = time.monotonic() + timeout
        while self._runs and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.02)
        with self._lock:
            for run in list(self._runs.values()):  # past the timeout: nothing may survive us
                for pod in run.pods.values():
                    self._kill_actor(pod)
                self._remove_pg(run)
            self._runs.clear()
        self._ray.shutdown()

    def forget(self, key: str) -> None:
        with self._lock:
            if key in self._runs:
                raise AlreadyRunning(f"Workload {key}: still has pods; stop it first")
            shutil.rmtree(self.workload_dir(key), ignore_errors=True)

    def workload_dir(self, key: str) -> Path:
        return self._dir.workload_dir(key)

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        """Empty: GPU indices are per Ray node here; ``nodes()`` says who holds which GPU."""
        return {}

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """Empty: a Ray pod's processes run under its actor on whichever Ray node holds it, and
        no actor reports their CPU time yet (nor does ``gpu_owners`` attribute GPUs here)."""
        return {}

    def describe(self) -> str:
        nodes = [n for n in self.nodes() if n.alive]
        gpus = sum(n.gpus for n in nodes)
        where = f"at {self.address}" if self.address else "this server started"
        return f"pods run on the Ray cluster {where}: {len(nodes)} node(s), {gpus} GPU(s)"

    # -- nodes --------------------------------------------------------------------------------------
    def nodes(self) -> list[ray_nodes.RayNode]:
        """The Ray cluster's nodes, each with the pods that hold its GPUs now."""
        found = ray_nodes.from_ray(self._ray.nodes(), self._taints)  # type: ignore[no-untyped-call]
        with self._lock:
            used: dict[str, dict[str, tuple[str, ...]]] = {}
            for run in self._runs.values():
                for pod in run.pods.values():
                    if pod.gpus and pod.node and not pod.gone:
                        used.setdefault(pod.node, {})[f"{run.key}/{pod.spec.name}"] = pod.gpus
        out = []
        for node in found:
            if node.name in used and node.alive:
                node = replace(node, used_by=used[node.name])
            out.append(node)
        return out

    # -- internals ----------------------------------------------------------------------------------
    def _spawn(self, run: RayRun, pod: RayPod) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        spec = pod.spec
        env = dict(spec.env)
        env.update(
            GPUAAS_WORKLOAD=run.key,
            GPUAAS_POD=spec.name,
            GPUAAS_RESTART_COUNT=str(run.restart_count),
            GPUAAS_POD_RETRY=str(pod.restarts),
        )
        resources = bundle(spec)
        pod.phase, pod.pid, pod.node, pod.gpus = "Pending", None, "", ()
        pod.exit_code, pod.gone = None, False
        pod.actor = self._actor_class.options(
            name=pod.actor_name,
            namespace=NAMESPACE,
            lifetime="detached",
            max_restarts=0,
            max_concurrency=8,
            num_cpus=resources.get("CPU", 0),
            num_gpus=resources.get("GPU", 0),
            memory=resources.get("memory"),
            scheduling_strategy=PlacementGroupSchedulingStrategy(run.pg, pod.bundle),
        ).remote(spec.argv, env, spec.working_dir, pod.token)
        pod.watch = pod.actor.watch.remote("", _WATCH_TIMEOUT)

    def _collect(self) -> None:
        """Read every watch call that has answered; issue the next one."""
        refs = {p.watch: (r, p) for r in self._runs.values() for p in r.pods.values() if p.watch}
        if not refs:
            return
        ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=0)
        for ref in ready:
            run, pod = refs[ref]
            pod.watch = None
            try:
                state = self._ray.get(ref)
            except self._ray.exceptions.ActorUnavailableError:
                # unreachable for a moment (a busy or restarting raylet): not dead, ask again
                known = "" if pod.phase == "Pending" else "Running"
                pod.watch = pod.actor.watch.remote(known, _WATCH_TIMEOUT)
                continue
            except self._ray.exceptions.RayError as exc:
                self._lost(run, pod, exc)
                continue
            pod.pid, pod.node = state["pid"], state["node"]
            pod.gpus = tuple(state["gpus"])
            if state["phase"] == "Running":
                if pod.phase == "Pending":
                    pod.phase = "Running"
                pod.watch = pod.actor.watch.remote("Running", _WATCH_TIMEOUT)
            else:
                self._exited(run, pod, int(state["code"]), state.get("log"))

    def _lost(self, run: RayRun, pod: RayPod, exc: Exception) -> None:
        pod.actor = None
        if run.stopping:
            self._exited(run, pod, LOST_EXIT_CODE)
            return
        where = f" on {pod.node}" if pod.node else ""
        why = f"its actor or node died ({type(exc).__name__})"
        with contextlib.suppress(OSError):
            line = f"gpuaas: pod {pod.spec.name}{where} lost: {why}\n"
            self._dir.append_log(run.key, pod.spec.name, line.encode())
        self._exited(run, pod, LOST_EXIT_CODE)

    def _exited(self, run: RayRun, pod: RayPod, code: int, log: bytes | None = None) -> None:
        """Every process of this pod is gone: keep its log (sent with the pod's last state, else
        read from its actor), retry it, or let it rest."""
        if log is not None:
            with contextlib.suppress(OSError):
                self._dir.append_log(run.key, pod.spec.name, log)
        else:
            self._save_log(run, pod)
        self._kill_actor(pod)
        pod.exit_code = code
        if code != 0 and not (run.stopping or run.failing):
            run.failures += 1
            if run.failures <= run.backoff_limit:
                self._emit(EventKind.POD_FAILED, run.key, pod.spec.name, code, f"exit code {code}")
                pod.restarts += 1
                self._spawn(run, pod)  # same bundle: Ray places it anew if its node is gone
                self._dir.write(run)
                self._emit(
                    EventKind.POD_RESTARTED,
                    run.key,
                    pod.spec.name,
                    message=f"retry {run.failures} of backoffLimit {run.backoff_limit}",
                )
                return
            run.failing = True
            self._emit(EventKind.POD_FAILED, run.key, pod.spec.name, code, "backoffLimit exceeded")
            for other in run.pods.values():
                if other is not pod:
                    self._terminate(other, None)
        pod.gone = True
        pod.phase = "Succeeded" if code == 0 else "Failed"
        self._dir.write(run)

    def _terminate(self, pod: RayPod, grace_seconds: float | None) -> None:
        if pod.gone:
            return
        grace = pod.spec.termination_grace_seconds if grace_seconds is None else grace_seconds
        if pod.phase == "Pending" or pod.actor is None:
            # not running yet: no process to drain; killing the actor frees its bundle
            self._kill_actor(pod, keep_handle=True)
            return
        pod.phase = "Terminating"
        pod.actor.terminate.remote(max(0.0, grace))

    def _finish(self, run: RayRun) -> None:
        codes = [p.exit_code for p in run.pods.values()]
        if run.stopping:
            outcome, kind = "Stopped", EventKind.STOPPED
        elif run.failing:
            outcome, kind = "Failed", EventKind.FAILED
        else:
            outcome, kind = "Succeeded", EventKind.SUCCEEDED
        self._remove_pg(run)
        run.outcome = outcome
        self._dir.write(run)
        del self._runs[run.key]
        self._emit(kind, run.key, message=f"exit codes {codes}, {run.failures} failure(s)")

    def _kill_actor(self, pod: RayPod, keep_handle: bool = False) -> None:
        if pod.actor is None:
            return
        with contextlib.suppress(Exception):
            self._ray.kill(pod.actor, no_restart=True)
        if not keep_handle:
            pod.actor = None

    def _remove_pg(self, run: RayRun) -> None:
        if run.pg is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(run.pg)
            run.pg = None

    def _save_log(self, run: RayRun, pod: RayPod) -> None:
        """Copy what the pod wrote on its node into this server's log of the pod."""
        if pod.actor is None:
            return
        with contextlib.suppress(self._ray.exceptions.RayError, TimeoutError):
            data, _ = self._ray.get(pod.actor.read_log.remote(0, True), timeout=10)
            self._dir.append_log(run.key, pod.spec.name, data)

    def _adopt_run(self, run: RayRun) -> RayRun:
        """Find the recorded run's placement group and actors by name; a missing actor is a
        pod lost while the server was down (retried within the backoffLimit). A missing group
        (the Ray head was lost and this is a new cluster) loses the run whole: it ends as
        ``Stopped``, so the engine, which still holds it admitted, starts it anew."""
        from ray.util import get_placement_group

        with contextlib.suppress(ValueError):
            run.pg = get_placement_group(run.pg_name)
        if run.pg is None:
            for pod in run.pods.values():
                with contextlib.suppress(ValueError):
                    pod.actor = self._ray.get_actor(pod.actor_name, namespace=NAMESPACE)
                self._kill_actor(pod)
                pod.gone, pod.phase = True, "Failed"
                pod.exit_code = pod.exit_code if pod.exit_code is not None else LOST_EXIT_CODE
            run.stopping = True
            return run
        for pod in run.pods.values():
            if pod.gone:
                continue
            try:
                pod.actor = self._ray.get_actor(pod.actor_name, namespace=NAMESPACE)
            except ValueError:
                self._lost(run, pod, RuntimeError("not found after the server restarted"))
                continue
            pod.watch = pod.actor.watch.remote("", _WATCH_TIMEOUT)
        return run

    def _remove_strays(self, known: set[str]) -> None:
        """Actors and placement groups of gpuaas pods that no record names: stop them."""
        from ray.util.placement_group import placement_group_table

        for name in self._ray.util.list_named_actors():
            if name not in known:
                with contextlib.suppress(Exception):
                    self._ray.kill(self._ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        names = {r.pg_name for r in self._runs.values()}
        for info in placement_group_table().values():
            name = info.get("name", "")
            if name.startswith("gpuaas:") and name not in names and info.get("state") != "REMOVED":
                from ray.util import get_placement_group
                from ray.util.placement_group import remove_placement_group

                with contextlib.suppress(Exception):
                    remove_placement_group(get_placement_group(name))

    def _log_lines(self, key: str, names: list[str], follow: bool) -> Iterator[str]:
        offsets = dict.fromkeys(names, 0)
        saved = dict.fromkeys(names, b"")
        while True:
            with self._lock:
                run = self._runs.get(key)
                actors = {n: run.pods[n].actor for n in names if run and n in run.pods}
            for name in names:
                path = self._dir.log_path(key, name)
                with contextlib.suppress(OSError):
                    data = path.read_bytes()
                    if len(data) > len(saved[name]):
                        yield from lines(data[len(saved[name]) :], name, len(names))
                        saved[name] = data
                actor = actors.get(name)
                if actor is not None:
                    with contextlib.suppress(self._ray.exceptions.RayError, TimeoutError):
                        data, offsets[name] = self._ray.get(
                            actor.read_log.remote(offsets[name]), timeout=10
                        )
                        yield from lines(data, name, len(names))
            if not follow or run is None:
                return
            time.sleep(0.5)

    def _status(self, run: RayRun) -> WorkloadRun:
        pods = tuple(
            PodStatus(
                p.spec.name,
                p.pid,
                tuple(int(g) for g in p.gpus if g.isdigit()),
                p.restarts,
                p.phase,
                p.exit_code,
                pod_set=p.spec.pod_set,
                node=p.node,
            )
            for p in run.pods.values()
        )
        return WorkloadRun(run.key, run.restart_count, run.stopping, pods)

    def _emit(
        self,
        kind: EventKind,
        key: str,
        pod: str | None = None,
        code: int | None = None,
        message: str = "",
    ) -> None:
        self._events.append(RuntimeEvent(kind, key, self._clock(), pod, code, message))


def create(options: RuntimeOptions) -> RayDriver:
    """The registry's factory: join the Ray cluster at ``--ray-address`` (or start one here),
    through a driver in a child process (``ray_driver``), so the server outlives the head."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise RuntimeRequestError(
            "Ray is not installed here: install the extra, pip install 'gpuaas[ray]'"
        ) from None
    from gpuaas.runtimes.ray_driver import RayDriver

    taints = ray_nodes.load_taints(options.ray_nodes)
    return RayDriver(
        options.state_dir,
        options.ray_address,
        taints,
        local_gpus=len(options.node.gpus),
        local_labels=dict(options.node.labels),
    )
