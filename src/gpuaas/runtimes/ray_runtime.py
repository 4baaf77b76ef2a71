"""The Ray runtime: admitted workloads' pods run on the nodes of a Ray cluster.

This module owns the life of pods on Ray (``gpuaas server --runtime ray [--ray-address A]``): a
workload's pods are placed all or nothing with one detached placement group (a bundle per pod with
its CPUs, memory and GPUs, and a label selector from its flavor's ``nodeLabels`` and the taints it
cannot tolerate, ``ray_nodes``). A small Ray task in each bundle (``ray_actor.lease``) answers the
node Ray placed it on and the GPU ids Ray assigned it, and that node's long-lived launcher actor
(``ray_actor.NodeLauncher``, one per node, ``ray_launchers``) runs the pod's processes there, so a
pod start costs no new Ray worker process; a RayCluster's pods meet through the outer Ray
(``ray_rendezvous``), wherever they run. A restarted server finds its pods again on the
launchers (``adopt``). Pods stay Pending until the group is placed, as a Kubernetes pod waits for
a node; ``Started`` comes when every pod runs. Stops are SIGTERM, then SIGKILL after the grace
period, done by the launcher on the pod's node; a pod counts as gone only when its launcher says
no process of it is left, or when its launcher is dead (its node died: the pod's group leader
kills the group when its launcher goes). The group is removed only then, and the run is reported
ended once Ray's view shows its resources free again (``ray_launchers.Release``), so the next
group is placed at once. A pod that fails, or whose node died, is retried within the backoffLimit
by a new lease in the same bundle, which Ray places anew if the node is gone; if no node can take
it, it stays Pending. It decides nothing about admission; calls come from one thread (the
bridge's lock), reads of logs may come from another.

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
from gpuaas.runtimes import ray_nodes, ray_plan, ray_recovery, ray_rendezvous
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
from gpuaas.runtimes.ray_launchers import Launchers, Release, free_per_node
from gpuaas.runtimes.ray_records import (
    LOST_EXIT_CODE,
    NAMESPACE,
    RayPod,
    RayRun,
    RunDir,
    bundle,
    from_record,
)

if TYPE_CHECKING:
    from gpuaas.runtimes.ray_driver import RayDriver


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
        self._releasing: dict[str, Release] = {}
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
        from gpuaas.runtimes.ray_actor import lease

        self._lease = ray.remote(lease)
        self._launchers = Launchers(ray, NAMESPACE)
        self._rendezvous = ray_rendezvous.ensure(ray, NAMESPACE)  # where RayCluster pods meet
        # every node's launcher starts now, in the background: no pod waits for one
        alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        self._launchers.warm(alive)

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
                # 2. one lease per pod in its bundle: it answers once the group is placed
                self._dir.write(run)
                for pod in run.pods.values():
                    self._spawn(run, pod)
            except Exception as exc:  # Ray refused (a bad selector, the cluster unreachable)
                for pod in run.pods.values():
                    self._cancel_lease(pod)
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
            for pod in list(run.pods.values()):
                self._terminate(run, pod, grace_seconds)
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
            self._released()
            events, self._events = self._events, []
            return events

    def running(self) -> dict[str, WorkloadRun]:
        with self._lock:
            # a run whose group is being released is still shown (its pods are gone) until its
            # end is reported: the bridge must not think its pods lost meanwhile
            out = {key: r.status for key, r in self._releasing.items() if r.status is not None}
            out.update((key, self._status(run)) for key, run in self._runs.items())
            return dict(sorted(out.items()))

    def run_of(self, key: str) -> WorkloadRun | None:
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                return self._status(run)
            releasing = self._releasing.get(key)
            return releasing.status if releasing is not None else None

    def adopt(self) -> list[str]:
        with self._lock:
            adopted = []
            known: set[str] = set()
            for record in self._dir.records():
                key = record["key"]
                if key in self._runs or record.get("outcome"):
                    continue
                run = ray_recovery.adopt_run(self, from_record(record))
                known.update(p.attempt for p in run.pods.values())
                self._runs[key] = run
                adopted.append(key)
                alive = sum(p.phase == "Running" and not p.gone for p in run.pods.values())
                self._emit(
                    EventKind.ADOPTED, key, message=f"{alive} of {len(run.pods)} pod(s) alive"
                )
            ray_recovery.remove_strays(self, known)
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
        return ray_recovery.log_lines(self, key, names, follow)

    def shutdown(self, grace_seconds: float | None = None, timeout: float = 60.0) -> None:
        with self._lock:
            for key in list(self._runs):
                self.stop(key, grace_seconds)
        deadline = time.monotonic() + timeout
        while (self._runs or self._releasing) and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.02)
        with self._lock:
            for run in list(self._runs.values()):  # past the timeout: nothing may survive us
                for pod in run.pods.values():
                    self._cancel_lease(pod)
                self._remove_pg(run)
            self._runs.clear()
            # the launchers (and so, past the timeout, any pod left) go with the server
            self._launchers.stop_all()
        self._ray.shutdown()

    def forget(self, key: str) -> None:
        with self._lock:
            if key in self._runs or key in self._releasing:
                raise AlreadyRunning(f"Workload {key}: still has pods; stop it first")
            shutil.rmtree(self.workload_dir(key), ignore_errors=True)
        with contextlib.suppress(Exception):
            self._rendezvous.clear.remote(key)

    def ray_records(self, key: str) -> dict[str, dict[str, Any]]:
        """The records of ``key``'s RayCluster pods, from the rendezvous (``ray_rendezvous``)."""
        found = ray_rendezvous.read(self._ray, self._rendezvous, key)
        if found is None:  # the actor did not answer: find (or start) it again for next time
            with contextlib.suppress(Exception):
                self._rendezvous = ray_rendezvous.ensure(self._ray, NAMESPACE)
        return found or {}

    def workload_dir(self, key: str) -> Path:
        return self._dir.workload_dir(key)

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        """Empty: GPU indices are per Ray node here; ``nodes()`` says who holds which GPU."""
        return {}

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """Empty: a Ray pod's processes run under its node's launcher, and no launcher reports their CPU time yet (nor does ``gpu_owners`` attribute GPUs here)."""
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
        """Ask Ray to place this attempt (a lease in the pod's bundle); it starts on its answer."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        resources = bundle(pod.spec)
        pod.phase, pod.pid, pod.node, pod.gpus, pod.node_id = "Pending", None, "", (), ""
        pod.exit_code, pod.gone, pod.start = None, False, None
        if not pod.spec.gpus and pod.restarts == 0:
            # No GPU ids to learn: its node is read from the group's table once it is placed,
            # with no Ray worker needed (a lease per pod needs one, and many pods started at
            # once made Ray start new workers for them). A retry takes a lease: after a node
            # died the table may still name it for a moment, where Ray schedules a task right.
            pod.lease, pod.placing = None, True
            return
        pod.placing = False
        pod.lease = self._lease.options(
            num_cpus=resources.get("CPU", 0),
            num_gpus=resources.get("GPU", 0),
            memory=resources.get("memory"),
            max_retries=3,  # system failures only (its node died while it ran): placed anew
            scheduling_strategy=PlacementGroupSchedulingStrategy(run.pg, pod.bundle),
        ).remote()

    def _launch(self, run: RayRun, pod: RayPod, node_id: str, gpus: list[str]) -> None:
        """The attempt's lease answered: its node's launcher runs the pod there, on its GPUs."""
        spec = pod.spec
        env = dict(spec.env)
        env.update(
            GPUAAS_WORKLOAD=run.key,
            GPUAAS_POD=spec.name,
            GPUAAS_RESTART_COUNT=str(run.restart_count),
            GPUAAS_POD_RETRY=str(pod.restarts),
            GPUAAS_POD_UID=pod.token,
        )
        pod.node_id, pod.gpus = node_id, tuple(gpus)
        self._dir.write(run)  # before the start: a restarted server must look for it there
        launcher = self._launchers.get(node_id)
        meet = run.key if ray_plan.LAUNCHER in spec.argv else None  # a RayCluster's pod
        pod.start = launcher.start.remote(
            pod.attempt, list(spec.argv), env, spec.working_dir, list(gpus), meet
        )

    def _pods_by_attempt(self) -> dict[str, tuple[RayRun, RayPod]]:
        return {p.attempt: (r, p) for r in self._runs.values() for p in r.pods.values()}

    def _collect(self) -> None:
        """Read every lease, start and launcher watch that has answered (never waits)."""
        pods = [(r, p) for r in self._runs.values() for p in r.pods.values()]
        refs = {p.lease: (r, p) for r, p in pods if p.lease is not None}
        refs.update({p.start: (r, p) for r, p in pods if p.start is not None})
        if refs:
            ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=0)
            for ref in ready:
                run, pod = refs[ref]
                if ref is pod.lease:
                    self._leased(run, pod, ref)
                else:
                    self._started(run, pod, ref)
        self._placed()
        answers, dead = self._launchers.answers()
        if not answers and not dead:
            return
        by_attempt = self._pods_by_attempt()
        for _, states in answers:
            for attempt, state in states.items():
                found = by_attempt.get(attempt)
                if found is not None and found[1].start is None:
                    self._apply(found[0], found[1], state)
        for node_id in dead:  # its node or raylet died: every pod it ran is lost
            for run, pod in by_attempt.values():
                if pod.node_id == node_id and not pod.gone and pod.lease is None:
                    pod.start = None
                    self._lost(run, pod, f"the launcher of node {pod.node or node_id} died")

    def _placed(self) -> None:
        """Launch the GPU-less pods whose group Ray has placed (one GCS call for all groups)."""
        waiting = [(r, p) for r in self._runs.values() for p in r.pods.values() if p.placing]
        if not waiting:
            return
        from ray.util.placement_group import placement_group_table

        table = placement_group_table()
        for run, pod in waiting:
            info = table.get(run.pg.id.hex()) if run.pg is not None else None
            if info is None or info.get("state") != "CREATED":
                continue
            node_id = info.get("bundles_to_node_id", {}).get(pod.bundle)
            if node_id:
                pod.placing = False
                self._launch(run, pod, str(node_id), [])

    def _leased(self, run: RayRun, pod: RayPod, ref: Any) -> None:
        pod.lease = None
        try:
            answer = self._ray.get(ref)
        except self._ray.exceptions.RayError as exc:  # cancelled (a stop), or Ray gave up
            if not pod.gone:
                self._lost(run, pod, f"Ray could not place it ({type(exc).__name__})")
            return
        if run.stopping or run.failing or pod.gone:
            if not pod.gone:  # stopped while Ray placed it: no process was started
                self._exited(run, pod, LOST_EXIT_CODE)
            return
        self._launch(run, pod, str(answer["nodeId"]), [str(g) for g in answer["gpus"]])

    def _started(self, run: RayRun, pod: RayPod, ref: Any) -> None:
        pod.start = None
        try:
            state = self._ray.get(ref)
        except self._ray.exceptions.RayError as exc:  # the launcher died: its node went
            self._launchers.forget(pod.node_id)
            self._lost(run, pod, f"its node's launcher died ({type(exc).__name__})")
            return
        self._apply(run, pod, state)

    def _apply(self, run: RayRun, pod: RayPod, state: dict[str, Any]) -> None:
        """A state of the pod's current attempt, as its launcher answered it."""
        if pod.gone:
            return
        pod.pid, pod.node = state["pid"], state["node"]
        pod.gpus = tuple(state["gpus"])
        if state["phase"] == "Running":
            if pod.phase == "Pending":
                pod.phase = "Running"
            return
        attempt, node_id = pod.attempt, pod.node_id
        self._exited(run, pod, int(state["code"]), state.get("log", b""))
        launcher = self._launchers.known(node_id)
        if launcher is not None:
            with contextlib.suppress(Exception):
                launcher.release.remote(attempt)

    def _lost(self, run: RayRun, pod: RayPod, why: str) -> None:
        if not run.stopping:
            where = f" on {pod.node}" if pod.node else ""
            with contextlib.suppress(OSError):
                line = f"gpuaas: pod {pod.spec.name}{where} lost: {why}\n"
                self._dir.append_log(run.key, pod.spec.name, line.encode())
        self._exited(run, pod, LOST_EXIT_CODE)

    def _exited(self, run: RayRun, pod: RayPod, code: int, log: bytes | None = None) -> None:
        """Every process of this pod is gone: keep its log (sent with the pod's last state),
        retry it, or let it rest."""
        if log:
            with contextlib.suppress(OSError):
                self._dir.append_log(run.key, pod.spec.name, log)
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
                    self._terminate(run, other, None)
        pod.gone = True
        pod.phase = "Succeeded" if code == 0 else "Failed"
        self._dir.write(run)

    def _terminate(self, run: RayRun, pod: RayPod, grace_seconds: float | None) -> None:
        if pod.gone:
            return
        grace = pod.spec.termination_grace_seconds if grace_seconds is None else grace_seconds
        if pod.lease is not None or pod.placing:  # not placed yet: no process to drain
            self._cancel_lease(pod)
            pod.placing = False
            self._exited(run, pod, LOST_EXIT_CODE)
            return
        pod.phase = "Terminating"
        # the launcher stops it, or never starts it if this comes first
        launcher = self._launchers.get(pod.node_id)
        launcher.terminate.remote(pod.attempt, max(0.0, grace))

    def _cancel_lease(self, pod: RayPod) -> None:
        if pod.lease is not None:
            with contextlib.suppress(Exception):
                self._ray.cancel(pod.lease)
            pod.lease = None

    def _finish(self, run: RayRun) -> None:
        codes = [p.exit_code for p in run.pods.values()]
        if run.stopping:
            outcome, kind = "Stopped", EventKind.STOPPED
        elif run.failing:
            outcome, kind = "Failed", EventKind.FAILED
        else:
            outcome, kind = "Succeeded", EventKind.SUCCEEDED
        placed = [p for p in run.pods.values() if p.node_id]
        free = free_per_node(self._ray) if placed and run.pg is not None else None
        wanted: dict[str, dict[str, float]] = {}
        if free is not None:
            for pod in placed:  # what this group holds on each node, back in Ray's view
                need = wanted.setdefault(pod.node_id, {})
                for name, amount in bundle(pod.spec).items():
                    before = free.get(pod.node_id, {}).get(name, 0.0)
                    need[name] = need.get(name, before) + amount
        self._remove_pg(run)
        run.outcome = outcome
        self._dir.write(run)
        del self._runs[run.key]
        message = f"exit codes {codes}, {run.failures} failure(s)"
        event = RuntimeEvent(kind, run.key, self._clock(), None, None, message)
        self._releasing[run.key] = Release(event, wanted, self._status(run))
        self._released()

    def _released(self) -> None:
        """Report ended the runs whose resources Ray shows free again (or waited long enough)."""
        if not self._releasing:
            return
        waiting = any(r.wanted for r in self._releasing.values())
        free = free_per_node(self._ray) if waiting else {}
        for key, release in list(self._releasing.items()):
            if not release.wanted or release.done(free):
                del self._releasing[key]
                self._events.append(replace(release.event, time=self._clock()))

    def _remove_pg(self, run: RayRun) -> None:
        if run.pg is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(run.pg)
            run.pg = None

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
