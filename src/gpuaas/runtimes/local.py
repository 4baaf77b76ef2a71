"""The local runtime: admitted workloads run as process groups on this machine, pinned to GPUs.

This module owns the life of local pods: start them with their GPUs, retry failures within the
Job's backoffLimit, stop them (SIGTERM to each process group, SIGKILL after the grace period) and
say ``Stopped`` only when every process is gone, because the engine releases quota only then, as
Kueue waits for pods to terminate. It decides nothing about admission.

Where pods run: on the host by default (``pod_init``, then the container's command and
args; busybox ``sleep 3600`` runs as ``sleep 3600``); through podman or docker only when created
with ``container_engine=...`` (see ``runtimes.container``, untested here).

Server stop versus crash: a graceful server stop calls ``shutdown()``, which stops every pod, so
nothing outlives the server and no GPU is held by a process nobody watches. A crash leaves pods
running (their work is not lost) with a state file each (kept in memory, ``/dev/shm``, unless
``records`` names a directory: ``podstate.volatile_records``); the next server calls ``adopt()``,
which re-attaches pods whose pid and start time still match and kills the leftovers of the
others, so no orphan holds a GPU the allocator thinks is free and no workload runs twice
(``start`` refuses a workload whose recorded pods are alive and not adopted). Calls come from one
thread.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuaas.inventory.gpus import GpuDevice
from gpuaas.runtimes import container, procs
from gpuaas.runtimes.base import (
    DEFAULT_BACKOFF_LIMIT,
    AlreadyRunning,
    EventKind,
    PodCpu,
    PodSpec,
    RuntimeEvent,
    RuntimeOptions,
    RuntimeRequestError,
    WorkloadRun,
    check_pods,
)
from gpuaas.runtimes.gpus import GpuAllocator
from gpuaas.runtimes.launcher import LauncherGone, PodLauncher
from gpuaas.runtimes.limits import Limits, create_pod_cgroup, detect_limits, remove_pod_cgroup
from gpuaas.runtimes.local_runs import Pod, Run, calm, status
from gpuaas.runtimes.logs import follow_logs, read_logs
from gpuaas.runtimes.podstate import PodRecord, RuntimeDir, WorkloadRecord, volatile_records
from gpuaas.runtimes.ray_rendezvous import read_dir

_SCRUBBED_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
KILLED_EXIT_CODE = 137  # a pod whose pod_init was killed while the server was down


class LocalRuntime:
    def __init__(
        self,
        root: str | Path,
        gpus: Sequence[GpuDevice] = (),
        *,
        container_engine: str | None = None,
        cgroup_parent: Path | None = None,
        enforce_limits: bool = True,
        clock: Callable[[], float] = time.time,
        launcher: bool = True,
        records: Path | None = None,
    ) -> None:
        root = Path(root)
        self._dir = RuntimeDir(root, volatile_records(root) if records is None else records)
        self._pod_init = procs.compiled_pod_init(self._dir.root)
        # Pods' leaders forked by one long-lived process (``runtimes.pod_launcher``) rather than a
        # Python started per pod; ``procs.spawn`` where it cannot run or once it is gone.
        self._launcher = PodLauncher.start(self._dir.root) if launcher else None
        self._launched: dict[int, tuple[Run, Pod]] = {}  # leaders it forked, not reported ended
        # Runs a poll must look at (``local_runs.calm``): a leader the launcher forked needs no
        # look until it reports its end, and looking at every pod at every poll was a tenth of a
        # MultiKueue worker's CPU with 600 pods running.
        self._watch: set[str] = set()
        self._base_env = {  # the server's environment, less ours and its GPUs, read once
            k: v
            for k, v in os.environ.items()
            if not k.startswith("GPUAAS_") and k not in _SCRUBBED_ENV
        }
        self._gpus = GpuAllocator(gpus)
        self._engine = container_engine
        if container_engine is not None:
            container.check_engine(container_engine)
        self.limits: Limits = (
            detect_limits(cgroup_parent)
            if enforce_limits
            else Limits(False, "limits not enforced: disabled by configuration")
        )
        self._clock = clock
        self._runs: dict[str, Run] = {}
        self._events: list[RuntimeEvent] = []
        # What ``running()`` answers, by key, each run's built again only after it changed
        # (``_stale``): the bridge, the API's pod list and job statuses ask many times a second;
        # a status per pod at each answer, then every run's after any change, was a tenth of a
        # MultiKueue worker's CPU with 600 pods running.
        self._shown: dict[str, WorkloadRun] = {}
        self._stale: set[str] = set()
        # The pods of each run that ended under this runtime, by workload: the names of its log
        # files, so that deleting it removes them by name instead of reading the namespace's
        # whole log directory (1.2 ms at 5,000 logs, for every deletion).
        self._ended: dict[str, list[str]] = {}

    # -- the Runtime protocol ------------------------------------------------------------------

    def start(
        self,
        key: str,
        pods: list[PodSpec],
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        restart_count: int | None = None,
    ) -> None:
        # 1. refuse what cannot run, before taking anything
        _check_request(key, pods)
        if key in self._runs:
            raise AlreadyRunning(f"Workload {key}: already running on this node")
        self._refuse_unadopted(key)
        # 2. GPUs for every pod, or none
        gpus = self._gpus.allocate(key, [(p.name, p.gpus) for p in pods])
        # 3. the workload record: a new start after a requeue counts one more restart
        previous = self._dir.read_workload(key)
        if restart_count is None:
            restart_count = 0 if previous is None else previous.restart_count + 1
        record = WorkloadRecord(key, restart_count, backoff_limit, pods=[p.name for p in pods])
        run = Run(record)
        self._dir.write_workload(record)
        self._dir.logs_dir(key).mkdir(parents=True, exist_ok=True, mode=0o700)
        # 4. one process group per pod; undo everything if one cannot be spawned
        try:
            for spec in pods:
                _private_empty(self._dir.log_path(key, spec.name))
                pod = Pod(PodRecord(spec, gpus[spec.name], secrets.token_hex(8)))
                run.pods[spec.name] = pod
                self._spawn(run, pod)
        except OSError as exc:
            self._abort(run)
            raise RuntimeRequestError(f"Workload {key}: cannot start its pods: {exc}") from None
        self._runs[key] = run
        self._watch.add(key)  # the next poll drops it once every leader is the launcher's
        self._stale.add(key)
        self._emit(EventKind.STARTED, key, message=f"{len(pods)} pod(s), restart {restart_count}")

    def stop(self, key: str, grace_seconds: float | None = None) -> bool:
        run = self._runs.get(key)
        if run is None:
            return False
        run.record.stopping = True
        self._stale.add(key)
        self._dir.write_workload(run.record)
        self._terminate(run, grace_seconds)
        return True

    def poll(self) -> list[RuntimeEvent]:
        now = self._clock()
        if self._launcher is not None:
            self._apply_exits(self._launcher.exits())
            if self._launcher.gone:
                self._launcher_lost()
        self._watch &= self._runs.keys()
        watched = [self._runs[key] for key in sorted(self._watch)]
        ended = [
            (run, pod)
            for run in watched
            for pod in run.pods.values()
            if not pod.gone and self._leader_gone(run, pod, now)
        ]
        if ended:  # one pass over /proc for every pod whose leader is gone, not one each
            table = procs.scan_leftovers(
                [pod.record.token for _, pod in ended],
                [p.record.pgid for _, p in ended if p.group_known and p.record.pgid is not None],
            )
            for run, pod in ended:
                self._sweep_pod(run, pod, table)
        for run in watched:
            if all(pod.gone for pod in run.pods.values()):
                self._finish(run)
            elif calm(run):
                self._watch.discard(run.key)
        events, self._events = self._events, []
        return events

    def running(self) -> Mapping[str, WorkloadRun]:
        # A new dict only after a change, never one changed after it was handed out: readers on
        # other threads (the API's pod list) keep a consistent one without a copy per call, which
        # was 4 % of a MultiKueue worker's time at 300 running workloads.
        if self._stale:
            shown, added = dict(self._shown), False
            for key in self._stale:
                run = self._runs.get(key)
                if run is None:
                    shown.pop(key, None)
                else:
                    added = added or key not in shown
                    shown[key] = status(run)
            self._stale.clear()
            self._shown = dict(sorted(shown.items())) if added else shown  # in key order
        return self._shown

    def run_of(self, key: str) -> WorkloadRun | None:
        # Read from the run itself where the snapshot is behind: rebuilding it (a copy of every
        # workload's entry, sorted when one was added) at each pod's start made a burst of N
        # pods cost N squared on a MultiKueue worker.
        if key not in self._stale:
            return self._shown.get(key)
        run = self._runs.get(key)
        return status(run) if run is not None else None

    def adopt(self) -> list[str]:
        adopted = []
        for key in self._dir.workload_keys():
            if key in self._runs:
                continue
            pods = self._dir.read_pods(key)
            workload = self._dir.read_workload(key)
            if not pods or workload is None:
                continue
            run = Run(workload)
            for record in pods:
                run.pods[record.spec.name] = self._adopt_pod(key, record)
            self._runs[key] = run
            self._watch.add(key)
            self._stale.add(key)
            adopted.append(key)
            alive = sum(not p.leader_done for p in run.pods.values())
            self._emit(EventKind.ADOPTED, key, message=f"{alive} of {len(pods)} pod(s) alive")
        return adopted

    def logs(self, key: str, pod: str | None = None, follow: bool = False) -> Iterator[str]:
        names = self._pod_names(key, pod)
        paths = {name: self._dir.log_path(key, name) for name in names}
        if not follow:
            return read_logs(paths)
        return follow_logs(paths, lambda: self._pods_alive(key, names))

    def shutdown(self, grace_seconds: float | None = None, timeout: float = 60.0) -> None:
        for key in list(self._runs):
            self.stop(key, grace_seconds)
        deadline = time.monotonic() + timeout
        while self._runs and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.02)
        for run in self._runs.values():  # past the timeout: nothing may survive the server
            self._terminate(run, 0.0)
        self.poll()
        if self._launcher is not None:
            self._launcher.close()
            self._launcher_lost()
        if not self._runs:
            self._dir.close()

    def describe(self) -> str:
        where = f"with {self._engine}" if self._engine else "as host processes"
        return f"pods run {where}, pinned to {len(self._gpus.devices)} GPU(s); {self.limits.note}"

    def gpu_owners(self) -> dict[int, tuple[str, str]]:
        return self._gpus.owners()

    def pod_cpu(self) -> dict[tuple[str, str], PodCpu]:
        """CPU time of each running pod's process tree (its leader and every descendant, the
        leader being a subreaper). Pods run by a container engine are left out: their processes
        belong to the engine's daemon, not to this tree, so their reading would say nothing."""
        if self._engine is not None:
            return {}
        out: dict[tuple[str, str], PodCpu] = {}
        for run in self._runs.values():
            for pod in run.pods.values():
                rec = pod.record
                if pod.gone or pod.leader_done or rec.pid is None or rec.kill_at is not None:
                    continue
                tree = procs.tree_cpu(rec.pid, rec.start_time)
                if tree is not None:
                    out[(run.key, pod.name)] = PodCpu(
                        tree.cpu_seconds,
                        tree.rss_bytes,
                        rec.start_time,
                        tree.read_at,
                        tree.processes,
                    )
        return out

    def workload_dir(self, key: str) -> Path:
        """The workload's directory here; its pods may share files under it (Ray's address)."""
        return self._dir.workload_dir(key)

    def ray_records(self, key: str) -> dict[str, dict[str, Any]]:
        """Every pod here shares the workload's directory: the records are its files."""
        return read_dir(self._dir.workload_dir(key) / "ray")

    def forget(self, key: str) -> None:
        """Delete a finished workload's records and logs (the engine deleted the workload)."""
        if key in self._runs:
            raise AlreadyRunning(f"Workload {key}: still has pods; stop it first")
        self._dir.remove_workload(key, self._ended.pop(key, None))

    # -- internals -----------------------------------------------------------------------------

    def _spawn(self, run: Run, pod: Pod) -> None:
        rec, key = pod.record, run.key
        self._dir.write_pod(key, rec)  # token first: a crash right after spawning leaves a trace
        cuda, nvidia = self._gpus.visible_devices(rec.gpus)
        env = dict(self._base_env)
        env.update(rec.spec.env)
        env.update(
            CUDA_VISIBLE_DEVICES=cuda,
            NVIDIA_VISIBLE_DEVICES=nvidia,
            GPUAAS_WORKLOAD=key,
            GPUAAS_POD=rec.spec.name,
            GPUAAS_RESTART_COUNT=str(run.record.restart_count),
            GPUAAS_POD_RETRY=str(rec.restarts),
        )
        env[procs.POD_UID_ENV] = rec.token
        argv, workdir = rec.spec.argv, rec.spec.working_dir
        if self._engine is not None:
            uuids = [self._gpus.visible_devices([i])[1] for i in rec.gpus]
            argv, workdir = container.run_argv(self._engine, key, rec.spec, env, uuids), None
        pod.exit_path = self._dir.exit_path(key, rec.spec.name)
        cgroup = create_pod_cgroup(
            self.limits,
            f"{key.replace('/', '.')}.{rec.spec.name}.{rec.token}",
            rec.spec.cpu_millis,
            rec.spec.memory_bytes,
        )
        spawned = self._start_leader(
            run, pod, argv, env, self._dir.log_path(key, rec.spec.name), workdir, cgroup
        )
        rec.pid, rec.pgid, rec.start_time = spawned.pid, spawned.pgid, spawned.start_time
        rec.cgroup, rec.kill_at = (str(cgroup) if cgroup else None), None
        pod.leader_done, pod.exit_code, pod.gone, pod.group_known = False, None, False, True
        self._stale.add(key)
        self._dir.write_pod(key, rec)

    def _start_leader(
        self, run: Run, pod: Pod, argv: list[str], env: dict[str, str], log: Path,
        workdir: str | None, cgroup: Path | None,
    ) -> procs.Spawned:  # fmt: skip
        """The pod's leader, forked by the launcher (``procs.spawn`` where there is none)."""
        assert pod.exit_path is not None
        pod.reported = None
        pod.launched = self._launcher is not None and not self._launcher.gone
        if self._launcher is None or not pod.launched:
            return procs.spawn(argv, env, log, pod.exit_path, workdir, cgroup, self._pod_init)
        procs.forget_exit(pod.exit_path)
        init_argv = procs.init_args(argv, pod.exit_path, workdir, cgroup)
        try:
            got = self._launcher.spawn(procs.leader_name(pod.record.token), log, env, init_argv)
        except LauncherGone:
            self._launcher_lost()
            return self._start_leader(run, pod, argv, env, log, workdir, cgroup)
        self._apply_exits(got.exits_before)  # before a reused pid is this pod's
        self._launched[got.pid] = (run, pod)
        return procs.Spawned(got.pid, got.pid, got.start_time)

    def _apply_exits(self, exits: list[tuple[int, int]]) -> None:
        for pid, code in exits:
            entry = self._launched.pop(pid, None)
            if entry is not None:
                entry[1].reported = code
                self._watch.add(entry[0].key)

    def _launcher_lost(self) -> None:
        """The launcher is gone: its pods are followed as re-adopted ones are (pid and start time,
        exit file) and new pods start by ``procs.spawn``."""
        for run, pod in self._launched.values():
            pod.launched = False
            self._watch.add(run.key)
        self._launched.clear()
        self._launcher = None

    def _leader_gone(self, run: Run, pod: Pod, now: float) -> bool:
        """Whether the pod's leader has exited (reaped, or gone while no server watched); SIGKILL
        it once its grace period is over."""
        rec = pod.record
        if not pod.leader_done:
            if rec.pid is None:
                pod.leader_done, pod.group_known = True, False
            else:
                if pod.exit_path is None:
                    pod.exit_path = self._dir.exit_path(run.key, pod.name)
                if pod.launched:
                    done, code = pod.reported is not None, pod.reported
                else:
                    done, code = procs.wait_leader(rec.pid, rec.start_time, pod.exit_path)
                if not done:
                    if rec.kill_at is not None and now >= rec.kill_at:
                        self._kill(run, pod)
                    elif pod.term_waits:
                        self._sigterm(pod)
                    return False
                pod.leader_done, pod.exit_code = True, code
            self._stale.add(run.key)
        return True

    def _sweep_pod(self, run: Run, pod: Pod, table: procs.Leftovers) -> None:
        """The leader is gone: as when a container's main process exits, the rest is killed;
        once nothing is left the pod is drained."""
        leftovers = self._leftovers(pod, table)
        if leftovers:
            procs.kill_pids(leftovers)
            return
        self._drained(run, pod)

    def _drained(self, run: Run, pod: Pod) -> None:
        """Every process of this pod is gone: release it, or retry it within the backoffLimit."""
        rec, wl = pod.record, run.record
        remove_pod_cgroup(Path(rec.cgroup) if rec.cgroup else None)
        if self._engine is not None:
            _quiet_run(container.remove_argv(self._engine, run.key, pod.name))
        failed = pod.exit_code != 0
        if failed and not (wl.stopping or wl.failing):
            wl.failures += 1
            code = pod.exit_code if pod.exit_code is not None else KILLED_EXIT_CODE
            if wl.failures <= wl.backoff_limit:
                self._emit(EventKind.POD_FAILED, run.key, pod.name, code, f"exit code {code}")
                rec.restarts += 1
                self._dir.write_workload(wl)
                self._spawn(run, pod)
                self._emit(
                    EventKind.POD_RESTARTED,
                    run.key,
                    pod.name,
                    message=f"retry {wl.failures} of backoffLimit {wl.backoff_limit}",
                )
                return
            wl.failing = True
            self._dir.write_workload(wl)
            self._emit(EventKind.POD_FAILED, run.key, pod.name, code, "backoffLimit exceeded")
            self._terminate(run, None)
        pod.gone = True
        self._stale.add(run.key)
        self._gpus.release(run.key, pod.name)
        self._dir.remove_pod(run.key, pod.name)

    def _finish(self, run: Run) -> None:
        wl = run.record
        codes = [p.exit_code for p in run.pods.values()]
        if wl.stopping:
            wl.outcome, kind = "Stopped", EventKind.STOPPED
        elif wl.failing:
            wl.outcome, kind = "Failed", EventKind.FAILED
        else:
            wl.outcome, kind = "Succeeded", EventKind.SUCCEEDED
        if wl.stopping:  # started again once readmitted: its restart count is read then
            self._dir.write_workload(wl)
        else:  # finished for good: nothing reads its record again, and it would hold memory
            self._dir.remove_records(run.key)
        del self._runs[run.key]
        self._ended[run.key] = list(wl.pods)
        self._stale.add(run.key)
        self._emit(kind, run.key, message=f"exit codes {codes}, {wl.failures} failure(s)")

    def _terminate(self, run: Run, grace_seconds: float | None) -> None:
        now = self._clock()
        for pod in run.pods.values():
            rec = pod.record
            if pod.gone or pod.leader_done or rec.pgid is None:
                continue
            grace = rec.spec.termination_grace_seconds if grace_seconds is None else grace_seconds
            kill_at = now + max(0.0, grace)
            if rec.kill_at is not None and rec.kill_at <= kill_at:
                continue  # already terminating with an earlier deadline
            rec.kill_at = kill_at
            self._watch.add(run.key)
            self._stale.add(run.key)
            self._dir.write_pod(run.key, rec)
            if grace <= 0:
                self._kill(run, pod)
            else:
                self._sigterm(pod)

    def _sigterm(self, pod: Pod) -> None:
        """SIGTERM to the pod's group once its leader has created the command; until then the
        pod waits (``term_waits``), looked at by each poll, since its leader, which takes SIGTERM
        over to pass it on before creating the command, would take it for no one and the command
        would run until the SIGKILL at the end of its grace period. Never a second SIGTERM: one
        sent while the command exists reaches it (``procs.command_started``)."""
        rec = pod.record
        pod.term_waits = rec.pid is not None and not procs.command_started(rec.pid)
        if not pod.term_waits and rec.pgid is not None:
            procs.signal_group(rec.pgid, signal.SIGTERM)

    def _kill(self, run: Run, pod: Pod) -> None:
        rec = pod.record
        if rec.pid is not None:
            procs.kill_tree(rec.pid, rec.start_time, rec.pgid)
        elif rec.pgid is not None:
            procs.signal_group(rec.pgid, signal.SIGKILL)
        procs.kill_cgroup(Path(rec.cgroup) if rec.cgroup else None)
        if self._engine is not None:
            _quiet_run(container.remove_argv(self._engine, run.key, pod.name))

    def _leftovers(self, pod: Pod, table: procs.Leftovers) -> list[int]:
        """Processes of this pod still alive: its leader's descendants (the leader is a subreaper,
        so ``setsid``, ``env -i`` or a double fork cannot leave that tree), its group, and
        anything that still carries the pod's token (found even when the leader is gone), the
        last two from ``table`` (one pass over /proc for all the pods a poll sweeps)."""
        found = set(table.by_token.get(pod.record.token, ()))
        if pod.group_known and pod.record.pgid is not None:
            found.update(table.by_group.get(pod.record.pgid, ()))
        if pod.record.pid is not None:
            found.update(procs.descendants(pod.record.pid, pod.record.start_time))
        found.update(procs.cgroup_members(Path(pod.record.cgroup) if pod.record.cgroup else None))
        return sorted(found)

    def _adopt_pod(self, key: str, record: PodRecord) -> Pod:
        pod = Pod(record)
        self._gpus.claim(key, record.spec.name, record.gpus)
        if record.pid is not None and procs.leader_alive(record.pid, record.start_time):
            return pod
        # The leader died while no server watched: its pgid may be reused, so find leftovers
        # by the pod's token, and take the exit code pod_init wrote (none if it was killed).
        pod.leader_done, pod.group_known = True, False
        pod.exit_code = procs.read_exit_code(self._dir.exit_path(key, record.spec.name))
        procs.kill_pids(procs.processes_with_token(record.token))
        return pod

    def _refuse_unadopted(self, key: str) -> None:
        for record in self._dir.read_pods(key):
            alive = record.pid is not None and procs.leader_alive(record.pid, record.start_time)
            if alive or procs.processes_with_token(record.token):
                raise AlreadyRunning(
                    f"Workload {key}: pod {record.spec.name} from an earlier server is still "
                    "running; call adopt() first"
                )
            self._dir.remove_pod(key, record.spec.name)

    def _abort(self, run: Run) -> None:
        for pod in run.pods.values():
            if pod.record.pgid is not None:
                procs.kill_tree(pod.record.pid or 0, pod.record.start_time, pod.record.pgid)
                procs.wait_leader(
                    pod.record.pid or pod.record.pgid, 0.0, self._dir.exit_path(run.key, pod.name)
                )
            self._gpus.release(run.key, pod.name)
            self._dir.remove_pod(run.key, pod.name)
        for name in run.record.pods:
            self._gpus.release(run.key, name)

    def _pod_names(self, key: str, pod: str | None) -> list[str]:
        run = self._runs.get(key)
        names = list(run.pods) if run else self._dir.logged_pods(key)
        if not names:
            raise RuntimeRequestError(f"Workload {key}: no pods and no logs on this node")
        if pod is not None:
            if pod not in names:
                raise RuntimeRequestError(f"Workload {key}: no pod {pod!r} (pods: {names})")
            return [pod]
        return names

    def _pods_alive(self, key: str, names: list[str]) -> bool:
        """For ``logs -f``: read from disk, so following works from another thread."""
        records = {r.spec.name: r for r in self._dir.read_pods(key)}
        return any(
            name in records
            and records[name].pid is not None
            and procs.leader_alive(records[name].pid or 0, records[name].start_time)
            for name in names
        )

    def _emit(
        self,
        kind: EventKind,
        key: str,
        pod: str | None = None,
        code: int | None = None,
        message: str = "",
    ) -> None:
        self._events.append(RuntimeEvent(kind, key, self._clock(), pod, code, message))


def create(options: RuntimeOptions) -> LocalRuntime:
    """The registry's factory: pods on this node, pinned to its GPUs, state in ``state_dir``."""
    return LocalRuntime(options.state_dir, options.node.gpus)


def _check_request(key: str, pods: list[PodSpec]) -> None:
    check_pods(key, pods)
    for pod in pods:  # this node's directories: a local pod's workingDir must exist here
        if pod.working_dir and not Path(pod.working_dir).is_dir():
            raise RuntimeRequestError(
                f"Workload {key}: pod {pod.name} workingDir {pod.working_dir}: no such directory"
            )


def _quiet_run(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, timeout=30, check=False)


def _private_empty(path: Path) -> None:
    """An empty log only its owner can read (a pod's output is its tenant's business)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    os.close(fd)
