"""Running a pod in podman or docker instead of on the host, when configured.

This module owns the command lines only: ``<engine> run`` for a pod (image, command, env,
workingDir, GPUs, CPU and memory) and ``<engine> rm -f`` to remove it after SIGKILL, since killing
the ``run`` client does not kill the container. The local runtime uses it only when created with
``container_engine="podman"`` or ``"docker"``; by default pods run on the host. These argv builders
are tested, but no container engine runs on the machines this was written on, so running pods
through one is untested.
"""

from __future__ import annotations

import re
import shutil

from gpuaas.runtimes.base import PodSpec, RuntimeRequestError

ENGINES = ("podman", "docker")


def container_name(key: str, pod: str) -> str:
    return "gpuaas-" + re.sub(r"[^a-zA-Z0-9_.-]", "-", f"{key}-{pod}")


def check_engine(engine: str) -> str:
    """The engine's path, or an error saying why it cannot be used."""
    if engine not in ENGINES:
        raise RuntimeRequestError(f"container_engine: {engine!r} is not one of {list(ENGINES)}")
    path = shutil.which(engine)
    if path is None:
        raise RuntimeRequestError(f"container_engine: {engine} is not on PATH")
    return path


def run_argv(
    engine: str,
    key: str,
    pod: PodSpec,
    env: dict[str, str],
    gpu_uuids: list[str],
) -> list[str]:
    """``<engine> run`` for one pod; signals sent to this client are proxied to the container."""
    if not pod.image:
        raise RuntimeRequestError(f"Workload {key}: pod {pod.name} has no image for {engine}")
    argv = [
        engine,
        "run",
        "--rm",
        "--init",
        "--sig-proxy=true",
        "--name",
        container_name(key, pod.name),
    ]
    for name, value in sorted(env.items()):
        argv += ["--env", f"{name}={value}"]
    if pod.working_dir:
        argv += ["--workdir", pod.working_dir]
    if pod.cpu_millis > 0:
        argv += ["--cpus", f"{pod.cpu_millis / 1000:g}"]
    if pod.memory_bytes > 0:
        argv += ["--memory", str(pod.memory_bytes)]
    if gpu_uuids:
        if engine == "podman":  # CDI device names from nvidia-ctk
            argv += [arg for uuid in gpu_uuids for arg in ("--device", f"nvidia.com/gpu={uuid}")]
        else:
            argv += ["--gpus", f'"device={",".join(gpu_uuids)}"']
    argv += ["--entrypoint", pod.command[0], pod.image, *pod.command[1:], *pod.args]
    return argv


def remove_argv(engine: str, key: str, pod: str) -> list[str]:
    return [engine, "rm", "-f", container_name(key, pod)]
