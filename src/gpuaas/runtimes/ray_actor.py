"""Pods on a Ray node: one long-lived launcher actor per node runs the pods Ray placed there.

Ray gives each actor a Ray worker process of its own (Python and Ray imported anew, 0.5-2 s on a
busy node), which was most of a pod's start when every pod attempt was an actor. So the work is
split in two, each done by what Ray offers for it:

- ``lease``, a Ray *task* run in the pod's bundle of the workload's placement group with the
  pod's CPUs, memory and GPUs, answers the node Ray placed the bundle on and the GPU ids Ray
  assigned it (``ray.get_gpu_ids()``). A bundle's GPUs are fixed when the group is placed and
  stay reserved until the group is removed, which the runtime does only when every process of
  the workload is gone: so no GPU is given to two pods. Tasks run on Ray's pool of idle workers,
  reused from one task to the next, so a lease takes milliseconds once a node has run one.
- ``NodeLauncher``, one *detached, named actor per node* (``gpuaas-node-<node id>``), started
  once and kept, runs every pod placed on its node: it starts ``ray_podproc`` (the pod's group
  leader, a child subreaper) in a session of its own with the container's command, args, env and
  workingDir, ``CUDA_VISIBLE_DEVICES`` = ``NVIDIA_VISIBLE_DEVICES`` = the lease's GPU ids and
  ``GPUAAS_NODE``; stdout and stderr go to a log on the node. ``terminate`` sends SIGTERM to the
  pod's group (once its command exists) and SIGKILL after the grace period; a pod is gone only
  when no process of its group (nor any carrying its ``GPUAAS_POD_UID``) is left. ``watch`` returns when anything on the node
  changed (a version number), so the runtime keeps one outstanding call per node, not per pod.
  A RayCluster's pods also get a record directory that the launcher relays to the cluster's
  other pods through the outer Ray (``ray_rendezvous``), and the node's IP to listen on.
  The pods' leaders are the launcher's children and kill their pod when it dies (its node or
  raylet died), so no pod outlives the Ray worker that answers for it.

It decides nothing about admission, placement or retries (``ray_runtime`` does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gpuaas.runtimes import procs
from gpuaas.runtimes.ray_rendezvous import NODE_IP_ENV, STATE_DIR_ENV, Relay

NODE_NAME_LABEL = "kubernetes.io/hostname"
LAUNCHER_PREFIX = "gpuaas-node-"
_SWEEP_TIMEOUT = 10.0
_START_CHECK = 0.005  # seconds between looks at a stopped pod's leader that has no command yet
_DROPPED_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def node_name(labels: dict[str, str], node_id: str) -> str:
    """A Ray node's name: its ``kubernetes.io/hostname`` label, else the start of its id."""
    return labels.get(NODE_NAME_LABEL) or f"ray-{node_id[:12]}"


def launcher_name(node_id: str) -> str:
    return f"{LAUNCHER_PREFIX}{node_id}"


def lease() -> dict[str, Any]:
    """Run as a Ray task in a pod's bundle: where Ray placed it, and the GPU ids it assigned."""
    import ray

    ctx = ray.get_runtime_context()
    return {"nodeId": ctx.get_node_id(), "gpus": [str(g) for g in ray.get_gpu_ids()]}


class RunningPod:
    """One pod attempt's process group on this node (held by the launcher, not an actor)."""

    def __init__(
        self,
        token: str,
        argv: list[str],
        env: dict[str, str],
        working_dir: str | None,
        gpus: list[str],
        node: str,
        changed: threading.Condition,
        on_change: Any,
    ) -> None:
        self.token, self.node, self.gpus = token, node, gpus
        self.log_path = Path(tempfile.gettempdir()) / "gpuaas-ray-pods" / f"{token}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.code: int | None = None
        self.gone = False
        self.pid: int | None = None
        self._changed, self._on_change = changed, on_change
        full = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        for name in _DROPPED_ENV:
            full.pop(name, None)
        full.update(env)
        visible = ",".join(gpus)
        full.update(
            CUDA_VISIBLE_DEVICES=visible, NVIDIA_VISIBLE_DEVICES=visible or "void", GPUAAS_NODE=node
        )
        full[procs.POD_UID_ENV] = env.get(procs.POD_UID_ENV, token)
        self.uid = full[procs.POD_UID_ENV]
        leader = Path(__file__).with_name("ray_podproc.py")  # by path: no package import first
        with self.log_path.open("ab") as log:
            try:
                proc = subprocess.Popen(
                    [sys.executable, str(leader), "--", *argv],
                    env=full,
                    cwd=working_dir or None,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                log.write(f"gpuaas: cannot start the pod on {node}: {exc}\n".encode())
                self.code, self.gone = 127 if isinstance(exc, FileNotFoundError) else 126, True
                return
        self.pid = proc.pid
        threading.Thread(target=self._wait, args=(proc,), daemon=True).start()

    def state(self) -> dict[str, Any]:
        phase = "Running" if not self.gone else ("Succeeded" if self.code == 0 else "Failed")
        return {"phase": phase, "pid": self.pid, "node": self.node, "gpus": self.gpus,
                "code": self.code}  # fmt: skip

    def terminate(self, grace: float) -> None:
        """SIGTERM to the pod's group now, SIGKILL after ``grace`` seconds (at once for 0)."""
        if self.pid is None or self.gone:
            return
        if grace <= 0:
            procs.kill_tree(self.pid, 0.0, self.pid)  # descendants first: none is orphaned
            return
        if procs.command_started(self.pid):
            procs.signal_group(self.pid, signal.SIGTERM)
        else:  # the leader would take it for no one (``procs.command_started``): wait for it
            deadline = time.monotonic() + grace
            threading.Thread(
                target=self._sigterm_once_started, args=(deadline,), daemon=True
            ).start()
        timer = threading.Timer(grace, procs.kill_tree, (self.pid, 0.0, self.pid))
        timer.daemon = True
        timer.start()

    def _sigterm_once_started(self, deadline: float) -> None:
        """SIGTERM to the pod's group once its leader has created the command, unless the pod
        ended first or its grace period is over (the SIGKILL then comes from ``terminate``'s
        timer)."""
        pid = self.pid
        assert pid is not None
        while not self.gone and time.monotonic() < deadline:
            if procs.command_started(pid):
                procs.signal_group(pid, signal.SIGTERM)
                return
            time.sleep(_START_CHECK)

    def read_log(self, offset: int = 0, remove: bool = False) -> tuple[bytes, int]:
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return b"", offset
        if remove:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        return data, offset + len(data)

    def _wait(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        code = 128 - code if code < 0 else code
        # The leader is gone: as when a container's main process exits, the rest is killed.
        deadline = time.monotonic() + _SWEEP_TIMEOUT
        while time.monotonic() < deadline:
            left = sorted(
                set(procs.group_members(proc.pid)) | set(procs.processes_with_token(self.uid))
            )
            if not left:
                break
            procs.kill_pids(left)
            time.sleep(0.02)
        with self._changed:
            self.code, self.gone = code, True
            self._on_change()


class NodeLauncher:
    """Runs in a Ray worker (``ray.remote(NodeLauncher)``), one per node; called through Ray.

    Pods are keyed by their attempt's name (``<GPUAAS_POD_UID>-<retry>``), so a start that is
    sent twice (a retried call) starts the pod once."""

    def __init__(self) -> None:
        import ray  # in the Ray worker: the extra is installed wherever this runs

        ctx = ray.get_runtime_context()
        labels = {str(k): str(v) for k, v in ctx.get_node_labels().items()}
        self.node_id = ctx.get_node_id()
        self.node = node_name(labels, self.node_id)
        self.ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
        self.relay = Relay(ray, ctx.namespace)
        self.pods: dict[str, RunningPod] = {}
        self.doomed: set[str] = set()  # stopped before they started: never start them
        self.version = 0
        self._changed = threading.Condition()

    def start(
        self,
        attempt: str,
        argv: list[str],
        env: dict[str, str],
        working_dir: str | None,
        gpus: list[str],
        rendezvous: str | None = None,
    ) -> dict[str, Any]:
        """Start the pod; ``rendezvous`` (its workload's key) for a RayCluster's pod: it gets a
        record directory of its own, relayed to its cluster's other pods (``ray_rendezvous``),
        and this node's IP to listen on."""
        with self._changed:
            if attempt in self.doomed:
                return {"phase": "Failed", "pid": None, "node": self.node, "gpus": gpus,
                        "code": 128 + signal.SIGKILL, "log": b""}  # fmt: skip
            if attempt not in self.pods:
                if rendezvous is not None:
                    records = Path(tempfile.gettempdir()) / "gpuaas-ray-pods" / f"{attempt}.ray"
                    records.mkdir(parents=True, exist_ok=True)
                    env = {**env, STATE_DIR_ENV: str(records), NODE_IP_ENV: self.ip}
                    self.relay.add(attempt, rendezvous, records)
                self.pods[attempt] = RunningPod(
                    attempt, argv, env, working_dir, gpus, self.node, self._changed, self._bump
                )
                self._bump()
            return self._answer(attempt)

    def watch(self, version: int, timeout: float = 5.0) -> tuple[int, dict[str, dict[str, Any]]]:
        """Every pod's state (a gone pod's with its log), once the node's version differs from
        ``version`` or after ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != version, timeout)
            return self.version, {a: self._answer(a) for a in self.pods}

    def state(self, attempt: str) -> dict[str, Any] | None:
        with self._changed:
            return self._answer(attempt) if attempt in self.pods else None

    def terminate(self, attempt: str, grace: float) -> None:
        """Stop the pod (SIGTERM, SIGKILL after ``grace``); one not started yet never starts
        (calls to a threaded actor may run out of order)."""
        with self._changed:
            pod = self.pods.get(attempt)
            if pod is None:
                self.doomed.add(attempt)
        if pod is not None:
            pod.terminate(grace)

    def release(self, attempt: str) -> None:
        """The runtime has the pod's end and its log: forget it (only once it is gone)."""
        with self._changed:
            pod = self.pods.get(attempt)
            if pod is not None and pod.gone:
                del self.pods[attempt]
                with contextlib.suppress(OSError):
                    pod.log_path.unlink()
        if pod is not None and pod.gone:
            self.relay.remove(attempt)

    def attempts(self) -> list[str]:
        with self._changed:
            return sorted(self.pods)

    def read_log(self, attempt: str, offset: int = 0) -> tuple[bytes, int]:
        with self._changed:
            pod = self.pods.get(attempt)
        return (b"", offset) if pod is None else pod.read_log(offset)

    def _answer(self, attempt: str) -> dict[str, Any]:
        pod = self.pods[attempt]
        state = pod.state()
        if pod.gone:  # the last answer carries the log: no second round trip to keep it
            state["log"] = pod.read_log(0)[0]
        return state

    def _bump(self) -> None:
        """Called with ``_changed`` held."""
        self.version += 1
        self._changed.notify_all()
