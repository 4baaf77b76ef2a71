"""The command KubeRay would give a Ray pod, for a RayCluster pod template that has none.

Real RayCluster manifests name an image (``rayproject/ray``) and no command: KubeRay injects
``ray start``. On the host there is no image, so this module writes that command: the head runs
``ray start --head --block`` with a dashboard on its node's IP (127.0.0.1 here; the launcher
puts the node's IP when it starts, ``ray_pod``), workers run
``ray start --block --address=<head>``, each with exactly the CPUs, GPUs and memory Kueue admitted
for its pod. The pod's GPUs are pinned by ``CUDA_VISIBLE_DEVICES``, which Ray honours, so
``--num-gpus`` is the pod's GPU count. Ports are not chosen here (that would be I/O in a pure
plan): the command runs ``gpuaas.runtimes.ray_pod``, which picks free ports at spawn time, records
them in the workload's Ray directory, and then runs ``ray start``. ``headGroupSpec.rayStartParams``
and each worker group's ``rayStartParams`` are honoured where they make sense on one host; the
ones gpuaas must own (ports, addresses, ``block``) are replaced, CPUs and GPUs may only be lowered.
A RayJob's cluster gets the same commands, and its submitter pod ``submitter_command``: the
launcher waits for the head's dashboard, then ``ray job submit`` runs the RayJob's entrypoint.
Pure: no processes, no sockets; errors name the object, the field and the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RAY_KINDS = frozenset({"RayCluster", "RayJob"})
HEAD = "head"
SUBMITTER = "submitter"  # the RayJob's submitter podset (K8sJobMode), as Kueue names it
# RayJob fields passed to `ray job submit`, as KubeRay's submitter passes them
_SUBMIT_FLAGS = (
    ("runtimeEnvYAML", "--runtime-env-json"),
    ("entrypointNumCpus", "--entrypoint-num-cpus"),
    ("entrypointNumGpus", "--entrypoint-num-gpus"),
    ("entrypointResources", "--entrypoint-resources"),
    ("metadata", "--metadata-json"),
)
NODE_IP = "127.0.0.1"  # the launcher sets the node's own IP when the pod starts (ray_pod)
LAUNCHER = "gpuaas.runtimes.ray_pod"  # a pod whose argv runs it needs a rendezvous (Ray runtime)
# Ray refuses socket paths longer than this (AF_UNIX); its own part of the path is about this long:
_SOCKET_PATH_MAX = 107
_RAY_SOCKET_SUFFIX = len("/session_2024-01-01_00-00-00_000000_1234567/sockets/plasma_store")
_OBJECT_STORE_MIN = 80 * 1024 * 1024  # Ray's floor is 75 MiB
_OBJECT_STORE_SHARE = 0.3  # Ray's default share of a pod's memory

# rayStartParams that gpuaas owns on the host: replaced, as KubeRay replaces some of them too.
OWNED_PARAMS = frozenset(
    {
        "address", "block", "dashboard-agent-listen-port", "dashboard-host", "dashboard-port",
        "head", "node-ip-address", "node-manager-port", "port", "ray-client-server-port",
        "temp-dir",
    }
)  # fmt: skip
# Flags that take no value: "true" adds the flag, "false" leaves it out.
_FLAGS = frozenset(
    {"disable-usage-stats", "enable-object-reconstruction", "no-monitor", "ray-debugger-external"}
)
# Passed through as --key=value.
_VALUES = frozenset(
    {
        "include-dashboard", "labels", "log-color", "log-style", "max-worker-port",
        "metrics-export-port", "min-worker-port", "node-name", "object-spilling-directory",
        "plasma-directory", "resources", "system-config",
    }
)  # fmt: skip
_LIMITED = frozenset({"num-cpus", "num-gpus", "memory", "object-store-memory"})
SUPPORTED_PARAMS = OWNED_PARAMS | _FLAGS | _VALUES | _LIMITED
# Env defaults for every Ray pod; the container's own env wins.
RAY_ENV = (
    ("RAY_USAGE_STATS_ENABLED", "0"),  # no phoning home from a scheduler's pods
    ("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0"),  # preemption: stop now, the grace is ours
)


class RayPlanError(ValueError):
    """A Ray pod cannot be planned; the message names the object, the field and why."""


@dataclass(slots=True, frozen=True)
class RayPod:
    """What ``podspecs`` needs to know to plan one Ray pod."""

    where: str  # "RayCluster team-b/raycluster-dev"
    pod_set: str  # "head" or the worker group name
    pod: str  # the pod's name
    cpu_millis: int
    memory_bytes: int
    gpus: int
    grace_seconds: float
    params: Mapping[str, object]  # the group's rayStartParams
    params_field: str  # "spec.headGroupSpec.rayStartParams"


def temp_dir(state_dir: Path, pod: str | None = None) -> Path:
    """Ray's ``--temp-dir`` for one RayCluster (``pod`` None: the head's), or for one worker
    node inside it. Short, as Ray's sockets live in it; the cluster's own, so two clusters never
    share a session; one per node, as two raylets that start at once in one session dir race for
    the same socket name and one dies ("bind: Address already in use")."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:10]
    base = Path(tempfile.gettempdir()) / f"gpuaas-ray-{os.getuid()}" / digest
    return base if pod is None else base / hashlib.sha256(pod.encode()).hexdigest()[:4]


def ray_executable() -> Path:
    """The ``ray`` of this interpreter's environment (the ``gpuaas[ray]`` extra)."""
    return Path(sys.executable).parent / "ray"


def command(
    pod: RayPod, state_dir: Path, run_id: str, ray_bin: Path, python: str = sys.executable
) -> tuple[str, ...]:
    """The pod's argv: the ``ray_pod`` launcher, then ``ray start`` without its ports."""
    role = "head" if pod.pod_set == HEAD else "worker"
    params = _params(pod)
    cpus = _limited_int(pod, params, "num-cpus", max(1, pod.cpu_millis // 1000), "CPUs")
    gpus = _limited_int(pod, params, "num-gpus", pod.gpus, "GPUs")
    ray = [str(ray_bin), "start", "--block", f"--node-ip-address={NODE_IP}"]
    ray += [f"--num-cpus={cpus}", f"--num-gpus={gpus}"]
    if pod.memory_bytes > 0 or "memory" in params:
        ray.append(f"--memory={_limited_int(pod, params, 'memory', pod.memory_bytes, 'memory')}")
    store = params.get("object-store-memory")
    if store is not None:
        ray.append(f"--object-store-memory={_int(pod, 'object-store-memory', store)}")
    elif pod.memory_bytes > 0:
        share = int(pod.memory_bytes * _OBJECT_STORE_SHARE)
        ray.append(f"--object-store-memory={max(_OBJECT_STORE_MIN, share)}")
    tmp = temp_dir(state_dir, None if role == "head" else pod.pod)
    if len(str(tmp)) + _RAY_SOCKET_SUFFIX > _SOCKET_PATH_MAX:
        raise RayPlanError(
            f"{pod.where}: Ray's temp dir {tmp} is too long for its sockets "
            f"({_SOCKET_PATH_MAX} bytes at most); set TMPDIR to a shorter directory"
        )
    ray.append(f"--temp-dir={tmp}")
    dashboard = False
    if role == "head":
        dashboard = str(params.get("include-dashboard", "true")).lower() != "false"
        ray += ["--head", f"--include-dashboard={str(dashboard).lower()}"]
        if dashboard:
            ray.append(f"--dashboard-host={NODE_IP}")
    if "disable-usage-stats" not in params:
        ray.append("--disable-usage-stats")
    for key, value in sorted(params.items()):
        if key in _FLAGS and str(value).lower() == "true":
            ray.append(f"--{key}")
        elif key in _VALUES and key != "include-dashboard":
            ray.append(f"--{key}={value}")
    launcher = [python, "-m", LAUNCHER, role]
    launcher += ["--state-dir", str(state_dir), "--run", run_id, "--pod", pod.pod]
    launcher += ["--stop-after", f"{max(0.5, pod.grace_seconds - 1.0):g}"]
    if dashboard:
        launcher.append("--dashboard")
    launcher += ["--temp-dir", str(tmp)]
    return (*launcher, "--", *ray)


def submitter_command(
    where: str,
    job: Mapping[str, object],
    pod: str,
    state_dir: Path,
    run_id: str,
    ray_bin: Path,
    python: str = sys.executable,
) -> tuple[str, ...]:
    """A RayJob's submitter pod (K8sJobMode, a container with no command): ``ray_pod
    submitter`` waits for its cluster's head and dashboard, then runs ``ray job submit`` with the
    RayJob's ``entrypoint`` there, following it to its end, as KubeRay's submitter Job does.
    ``job`` is the RayJob's ``spec``."""
    entrypoint = job.get("entrypoint")
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise RayPlanError(f"{where}: spec.entrypoint: required, a command line (a string)")
    mode = job.get("submissionMode", "K8sJobMode")
    if mode != "K8sJobMode":
        raise RayPlanError(
            f"{where}: spec.submissionMode: {mode} is not run here yet (only K8sJobMode: "
            "a submitter pod)"
        )
    submit = [str(ray_bin), "job", "submit"]
    for field, flag in _SUBMIT_FLAGS:
        value = job.get(field)
        if value is None:
            continue
        if field == "runtimeEnvYAML":
            value = json.dumps(_yaml_mapping(where, field, value))
        elif isinstance(value, Mapping):
            value = json.dumps(dict(value))
        submit.append(f"{flag}={value}")
    try:  # words, as the shell of KubeRay's submitter splits it (Ray quotes each word it gets)
        words = shlex.split(entrypoint)
    except ValueError as exc:
        raise RayPlanError(f"{where}: spec.entrypoint: {exc}") from None
    launcher = [python, "-m", LAUNCHER, "submitter"]
    launcher += ["--state-dir", str(state_dir), "--run", run_id, "--pod", pod]
    return (*launcher, "--", *submit, "--", *words)


def _yaml_mapping(where: str, field: str, value: object) -> dict[str, object]:
    import yaml

    try:
        loaded = yaml.safe_load(str(value)) if isinstance(value, str) else value
    except yaml.YAMLError as exc:
        raise RayPlanError(f"{where}: spec.{field}: not YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise RayPlanError(f"{where}: spec.{field}: must be a YAML mapping")
    return loaded


def _params(pod: RayPod) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in pod.params.items():
        key = str(key)
        if key not in SUPPORTED_PARAMS:
            raise RayPlanError(
                f"{pod.where}: {pod.params_field}.{key}: not supported on the local runtime "
                f"(supported: {', '.join(sorted(SUPPORTED_PARAMS))})"
            )
        if key in OWNED_PARAMS:
            continue  # gpuaas sets these for the host, as KubeRay sets them for its pods
        if isinstance(value, bool):
            value = str(value).lower()
        if not isinstance(value, str | int | float):
            raise RayPlanError(
                f"{pod.where}: {pod.params_field}.{key}: must be a string, "
                f"got {type(value).__name__}"
            )
        out[key] = str(value)
    return out


def _limited_int(pod: RayPod, params: Mapping[str, str], key: str, admitted: int, what: str) -> int:
    """``rayStartParams[key]`` if given (never above what Kueue admitted), else ``admitted``."""
    if key not in params:
        return admitted
    value = _int(pod, key, params[key])
    if value > admitted and not (key == "memory" and admitted == 0):  # no request: no limit
        raise RayPlanError(
            f"{pod.where}: {pod.params_field}.{key}: {value} is more than the {admitted} "
            f"{what} admitted for podSet {pod.pod_set}"
        )
    return value


def _int(pod: RayPod, key: str, value: object) -> int:
    try:
        number = int(str(value))
    except ValueError:
        number = -1
    if number < 0:
        raise RayPlanError(
            f"{pod.where}: {pod.params_field}.{key}: must be a whole number >= 0, got {value!r}"
        )
    return number
