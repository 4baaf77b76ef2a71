"""One pod on a Ray node: a detached actor that runs the pod's process group and answers for it.

``PodProcess`` is the class the Ray runtime turns into an actor (``ray.remote``), one per pod
attempt, named after the pod and placed in its bundle of the workload's placement group, with the
pod's CPUs, memory and GPUs as its own resources, so Ray picks the node and the GPUs and no GPU
is given to two pods. On its node it starts ``ray_podproc`` (the pod's group leader) with the
container's command, args, env and workingDir, ``CUDA_VISIBLE_DEVICES`` set to the GPU ids Ray
assigned and ``GPUAAS_NODE`` to the node's name; stdout and stderr go to a log on the node that
the runtime reads through ``read_log``. ``terminate`` sends SIGTERM to the group and SIGKILL after
the grace period; a pod is ``gone`` only when no process of its group (nor any process carrying its
``GPUAAS_POD_UID``) is left. ``watch`` blocks until the state changes, so the runtime learns of an
exit at once without polling every actor. It decides nothing about admission or retries.
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

NODE_NAME_LABEL = "kubernetes.io/hostname"
_SWEEP_TIMEOUT = 10.0
_DROPPED_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def node_name(labels: dict[str, str], node_id: str) -> str:
    """A Ray node's name: its ``kubernetes.io/hostname`` label, else the start of its id."""
    return labels.get(NODE_NAME_LABEL) or f"ray-{node_id[:12]}"


class PodProcess:
    """Runs in a Ray worker (``ray.remote(PodProcess)``); every method is called through Ray."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        working_dir: str | None,
        token: str,
    ) -> None:
        import ray  # in the Ray worker: the extra is installed wherever this runs

        ctx = ray.get_runtime_context()
        labels = {str(k): str(v) for k, v in ctx.get_node_labels().items()}
        self.node = node_name(labels, ctx.get_node_id())
        self.gpus = [str(g) for g in ray.get_gpu_ids()]
        self.token = token
        self.log_path = Path(tempfile.gettempdir()) / "gpuaas-ray-pods" / f"{token}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.code: int | None = None
        self.gone = False
        self.pid: int | None = None
        self._changed = threading.Condition()
        full = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        for name in _DROPPED_ENV:
            full.pop(name, None)
        full.update(env)
        visible = ",".join(self.gpus)
        full.update(
            CUDA_VISIBLE_DEVICES=visible,
            NVIDIA_VISIBLE_DEVICES=visible or "void",
            GPUAAS_NODE=self.node,
        )
        full[procs.POD_UID_ENV] = token
        argv = [sys.executable, "-m", "gpuaas.runtimes.ray_podproc", "--", *argv]
        with self.log_path.open("ab") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    env=full,
                    cwd=working_dir or None,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                log.write(f"gpuaas: cannot start the pod on {self.node}: {exc}\n".encode())
                self.code, self.gone = 127 if isinstance(exc, FileNotFoundError) else 126, True
                return
        self.pid = proc.pid
        threading.Thread(target=self._wait, args=(proc,), daemon=True).start()

    # -- called by the runtime --------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        phase = "Running" if not self.gone else ("Succeeded" if self.code == 0 else "Failed")
        return {
            "phase": phase,
            "pid": self.pid,
            "node": self.node,
            "gpus": self.gpus,
            "code": self.code,
        }

    def watch(self, known: str, timeout: float = 5.0) -> dict[str, Any]:
        """The state, once its phase differs from ``known`` or after ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self.state()["phase"] != known, timeout)
        state = self.state()
        if self.gone:  # the last answer carries the log: no second round trip to keep it
            state["log"] = self.read_log(0, remove=True)[0]
        return state

    def terminate(self, grace: float) -> None:
        """SIGTERM to the pod's group now, SIGKILL after ``grace`` seconds (at once for 0)."""
        if self.pid is None or self.gone:
            return
        if grace <= 0:
            procs.kill_tree(self.pid, 0.0, self.pid)  # descendants first: none is orphaned
            return
        procs.signal_group(self.pid, signal.SIGTERM)
        timer = threading.Timer(grace, procs.kill_tree, (self.pid, 0.0, self.pid))
        timer.daemon = True
        timer.start()

    def read_log(self, offset: int = 0, remove: bool = False) -> tuple[bytes, int]:
        """The pod's log from ``offset`` on, and the offset after it; ``remove``: the runtime
        keeps it from now on, so it is removed from the node."""
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

    # -- internals --------------------------------------------------------------------------------
    def _wait(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        code = 128 - code if code < 0 else code
        # The leader is gone: as when a container's main process exits, the rest is killed.
        deadline = time.monotonic() + _SWEEP_TIMEOUT
        while time.monotonic() < deadline:
            left = sorted(
                set(procs.group_members(proc.pid)) | set(procs.processes_with_token(self.token))
            )
            if not left:
                break
            procs.kill_pids(left)
            time.sleep(0.02)
        with self._changed:
            self.code, self.gone = code, True
            self._changed.notify_all()
