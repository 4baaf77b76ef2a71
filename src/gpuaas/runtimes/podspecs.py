"""From an admitted workload to the pods a runtime starts: a pure translation.

The core ``Workload`` keeps per-pod requests and counts but not the container commands, so this
module also reads the raw manifest (batch/v1 Job, RayCluster, RayJob, kueue Workload) for each pod
template's first container: command, args, env, workingDir, and the pod's
``terminationGracePeriodSeconds``. Counts come from the admission, as Kueue may admit fewer pods
than requested (partial admission). A RayCluster container with no command (as in real
manifests: KubeRay injects ``ray start``) gets the command ``ray_plan`` writes, when the caller
gives the workload's Ray directory and Ray is installed. No processes here, and no I/O beyond
looking for the ``ray`` executable; errors name the object, the field and the reason.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaas.core.objects import PodSet, Workload
from gpuaas.core.state import Admission
from gpuaas.runtimes import ray_plan
from gpuaas.runtimes.base import (
    DEFAULT_BACKOFF_LIMIT,
    DEFAULT_GRACE_SECONDS,
    PodSpec,
    RuntimeRequestError,
)
from gpuaas.runtimes.workbench import Workbench, jupyter_command

GPU = "nvidia.com/gpu"
# Images whose entrypoint is known, so their containers run on the host with args alone: Kueue's
# samples (and seed 002's Jobs) use the Kubernetes perf-tests sleep image, args ["30s"]; its
# entrypoint sleeps for a Go duration, which GNU sleep reads for the seconds the samples give.
KNOWN_ENTRYPOINTS: dict[str, tuple[str, ...]] = {"gcr.io/k8s-staging-perf-tests/sleep": ("sleep",)}
RayCommand = Callable[[str, PodSet, float], tuple[str, ...]]  # (pod name, podSet, grace) -> argv
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
# KubeRay's default submitter pod: one container, its image's `ray job submit` (here: ray_plan's)
_DEFAULT_SUBMITTER = {"containers": [{"name": "ray-job-submitter", "image": "rayproject/ray"}]}


class PodSpecError(ValueError):
    """A manifest cannot be run; the message names kind/namespace/name, the field and why."""


@dataclass(slots=True, frozen=True)
class RunPlan:
    pods: list[PodSpec]
    backoff_limit: int


def build_run_plan(
    workload: Workload,
    admission: Admission | None,
    manifest: Mapping[str, Any],
    *,
    ray_dir: Path | None = None,
    ray_bin: Path | None = None,
    workbench: tuple[Workbench, Path] | None = None,
) -> RunPlan:
    """The pods of ``workload`` as admitted, with commands taken from ``manifest``.

    ``workbench``: for a Notebook, its port and base URL and JupyterLab's root directory
    (``runtimes.workbench``); a Notebook container with no command runs JupyterLab there.

    ``ray_dir``: where this workload's Ray pods record their ports (the runtime's directory for
    the workload); without it, a RayCluster container must have its own command. ``ray_bin``:
    the ``ray`` executable, by default the one next to this Python.
    """
    kind = str(manifest.get("kind") or workload.kind)
    where = f"{kind} {workload.namespace}/{workload.name}"
    templates = pod_templates(manifest, where)
    ray_cmd = (
        _ray_command(manifest, where, ray_dir, ray_bin) if kind in ray_plan.RAY_KINDS else None
    )
    counts = {ps.name: ps.count for ps in admission.pod_sets} if admission else {}
    pods: list[PodSpec] = []
    single = len(workload.pod_sets) == 1
    for position, pod_set in enumerate(workload.pod_sets):
        template = templates.get(pod_set.name)
        if template is None and len(templates) == len(workload.pod_sets):
            template = list(templates.values())[position]
        if template is None:
            raise PodSpecError(
                f"{where}: no pod template for podSet {pod_set.name!r} "
                f"(templates: {sorted(templates)})"
            )
        count = counts.get(pod_set.name, pod_set.count)
        for index in range(count):
            pod_name = (
                f"{workload.name}-{index}" if single else f"{workload.name}-{pod_set.name}-{index}"
            )
            pods.append(_pod(pod_name, pod_set, template, workload, where, ray_cmd, workbench))
    return RunPlan(pods, _backoff_limit(manifest, where))


def pod_templates(manifest: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    """podSet name -> pod template spec, for each kind gpuaas runs."""
    kind = manifest.get("kind")
    spec = _mapping(manifest.get("spec", {}), f"{where}: spec")
    if kind in ("Job", "Notebook"):
        return {"main": _template_spec(spec, f"{where}: spec.template")}
    if kind == "RayCluster":
        return _ray_templates(spec, where, "spec")
    if kind == "RayJob":
        cluster = _mapping(spec.get("rayClusterSpec"), f"{where}: spec.rayClusterSpec")
        templates = _ray_templates(cluster, where, "spec.rayClusterSpec")
        if spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":  # Kueue's submitter podset
            raw = spec.get("submitterPodTemplate") or {"spec": _DEFAULT_SUBMITTER}
            field = f"{where}: spec.submitterPodTemplate"
            submitter = _mapping(_mapping(raw, field).get("spec"), f"{field}.spec")
            templates[ray_plan.SUBMITTER] = submitter
        return templates
    if kind == "Workload":
        out: dict[str, Mapping[str, Any]] = {}
        for i, ps in enumerate(_list(spec.get("podSets"), f"{where}: spec.podSets")):
            ps = _mapping(ps, f"{where}: spec.podSets[{i}]")
            out[str(ps.get("name", "main"))] = _template_spec(
                ps, f"{where}: spec.podSets[{i}].template"
            )
        return out
    raise PodSpecError(
        f"{where}: kind {kind!r} cannot be run (Job, RayCluster, RayJob, Notebook, Workload)"
    )


def _ray_templates(spec: Mapping[str, Any], where: str, path: str) -> dict[str, Mapping[str, Any]]:
    head = _mapping(spec.get("headGroupSpec"), f"{where}: {path}.headGroupSpec")
    out = {"head": _template_spec(head, f"{where}: {path}.headGroupSpec.template")}
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        group = _mapping(group, f"{where}: {path}.workerGroupSpecs[{i}]")
        name = str(group.get("groupName") or f"workers-{i}")
        out[name] = _template_spec(group, f"{where}: {path}.workerGroupSpecs[{i}].template")
    return out


def _ray_command(
    manifest: Mapping[str, Any], where: str, ray_dir: Path | None, ray_bin: Path | None
) -> RayCommand:
    """A maker of ``ray start`` commands for this RayCluster's pods (one run id for all)."""
    job = _mapping(manifest.get("spec", {}), f"{where}: spec")
    path = "spec.rayClusterSpec" if manifest.get("kind") == "RayJob" else "spec"
    spec = _mapping(job.get("rayClusterSpec"), f"{where}: {path}") if path != "spec" else job
    mode = job.get("submissionMode", "K8sJobMode")
    if path != "spec" and mode != "K8sJobMode":  # no submitter pod: nothing would submit
        raise PodSpecError(
            f"{where}: spec.submissionMode: {mode} is not run here yet (only K8sJobMode: "
            "a submitter pod)"
        )
    params: dict[str, tuple[Mapping[str, Any], str]] = {}
    head = _mapping(spec.get("headGroupSpec"), f"{where}: {path}.headGroupSpec")
    field = f"{path}.headGroupSpec.rayStartParams"
    params[ray_plan.HEAD] = (_mapping(head.get("rayStartParams") or {}, f"{where}: {field}"), field)
    if path != "spec" and str(params[ray_plan.HEAD][0].get("include-dashboard")).lower() == "false":
        raise PodSpecError(
            f"{where}: {field}.include-dashboard: false, but the RayJob's submitter submits "
            "through the head's dashboard"
        )
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        group = _mapping(group, f"{where}: {path}.workerGroupSpecs[{i}]")
        field = f"{path}.workerGroupSpecs[{i}].rayStartParams"
        raw = _mapping(group.get("rayStartParams") or {}, f"{where}: {field}")
        params[str(group.get("groupName") or f"workers-{i}")] = (raw, field)
    run_id = secrets.token_hex(4)
    binary = ray_bin or ray_plan.ray_executable()

    def make(pod: str, pod_set: PodSet, grace: float) -> tuple[str, ...]:
        if ray_dir is None:
            raise PodSpecError(
                f"{where}: podSet {pod_set.name}: no command, and no Ray directory to run "
                "`ray start` in (only the local runtime starts Ray)"
            )
        if not binary.exists():
            raise PodSpecError(
                f"{where}: podSet {pod_set.name}: no command, and Ray is not installed here "
                f"({binary} is missing): install the extra, pip install 'gpuaas[ray]'"
            )
        if path != "spec" and pod_set.name == ray_plan.SUBMITTER:  # the RayJob's submitter
            try:
                return ray_plan.submitter_command(where, job, pod, ray_dir, run_id, binary)
            except ray_plan.RayPlanError as exc:
                raise PodSpecError(str(exc)) from None
        group, field = params.get(pod_set.name, ({}, f"podSet {pod_set.name} rayStartParams"))
        request = ray_plan.RayPod(
            where=where,
            pod_set=pod_set.name,
            pod=pod,
            cpu_millis=pod_set.requests.get("cpu", 0),
            memory_bytes=pod_set.requests.get("memory", 0),
            gpus=pod_set.requests.get(GPU, 0),
            grace_seconds=grace,
            params=group,
            params_field=field,
        )
        try:
            return ray_plan.command(request, ray_dir, run_id, binary)
        except ray_plan.RayPlanError as exc:
            raise PodSpecError(str(exc)) from None

    return make


def _pod(
    name: str,
    pod_set: PodSet,
    template: Mapping[str, Any],
    workload: Workload,
    where: str,
    ray_cmd: RayCommand | None = None,
    workbench: tuple[Workbench, Path] | None = None,
) -> PodSpec:
    containers = _list(template.get("containers"), f"{where}: podSet {pod_set.name} containers")
    if not containers:
        raise PodSpecError(f"{where}: podSet {pod_set.name}: containers is empty")
    container = _mapping(containers[0], f"{where}: podSet {pod_set.name} containers[0]")
    cname = container.get("name", "0")
    field = f"{where}: podSet {pod_set.name} container {cname}"
    env = _env(container.get("env") or [], field, workload, name)
    if workbench is not None:
        env = (*workbench[0].env, *env)
    env_map = dict(env)
    command = tuple(_expand(str(a), env_map) for a in container.get("command") or [])
    args = tuple(_expand(str(a), env_map) for a in container.get("args") or [])
    grace = template.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    if not isinstance(grace, int | float) or isinstance(grace, bool) or grace < 0:
        raise PodSpecError(f"{where}: terminationGracePeriodSeconds must be >= 0, got {grace!r}")
    if not command and not args and ray_cmd is not None:  # KubeRay's injected `ray start`
        command = ray_cmd(name, pod_set, float(grace))
        env = (*((k, v) for k, v in ray_plan.RAY_ENV if k not in env_map), *env)
    if not command and not args and workbench is not None:  # the image's JupyterLab
        try:
            command = jupyter_command(*workbench)
        except RuntimeRequestError as exc:
            raise PodSpecError(f"{field}: {exc}") from None
    image = str(container.get("image") or "")
    if not command and image.rpartition(":")[0] in KNOWN_ENTRYPOINTS:
        command = KNOWN_ENTRYPOINTS[image.rpartition(":")[0]]
    if not command and not args:
        raise PodSpecError(
            f"{field}: no command or args; on the host the image's entrypoint is unknown, "
            "so give the container a command"
        )
    if not command:  # args alone: run them, as the image's entrypoint is not available here
        command, args = args, ()
    workdir = container.get("workingDir")
    return PodSpec(
        name=name,
        command=command,
        args=args,
        env=env,
        working_dir=str(workdir) if workdir else None,
        cpu_millis=pod_set.requests.get("cpu", 0),
        memory_bytes=pod_set.requests.get("memory", 0),
        gpus=pod_set.requests.get(GPU, 0),
        termination_grace_seconds=float(grace),
        image=str(container["image"]) if container.get("image") else None,
        pod_set=pod_set.name,
    )


def _env(items: object, field: str, workload: Workload, pod: str) -> tuple[tuple[str, str], ...]:
    fields = {"metadata.name": pod, "metadata.namespace": workload.namespace}
    out: list[tuple[str, str]] = []
    for i, item in enumerate(_list(items, f"{field} env")):
        item = _mapping(item, f"{field} env[{i}]")
        name = item.get("name")
        if not name:
            raise PodSpecError(f"{field} env[{i}]: name is required")
        if "valueFrom" in item:
            ref = (item.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
            if ref not in fields:
                raise PodSpecError(
                    f"{field} env[{i}] ({name}): valueFrom is supported only as fieldRef "
                    f"{sorted(fields)} on the local runtime"
                )
            out.append((str(name), fields[ref]))
        else:
            out.append((str(name), _expand(str(item.get("value", "")), dict(out))))
    return tuple(out)


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` references; unknown ones stay as written, ``$$`` is a dollar."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR_REF.sub(sub, text)


def _backoff_limit(manifest: Mapping[str, Any], where: str) -> int:
    if manifest.get("kind") != "Job":
        return DEFAULT_BACKOFF_LIMIT
    value = (manifest.get("spec") or {}).get("backoffLimit", DEFAULT_BACKOFF_LIMIT)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise PodSpecError(f"{where}: spec.backoffLimit must be an integer >= 0, got {value!r}")
    return value


def _template_spec(holder: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    template = _mapping(holder.get("template"), field)
    return _mapping(template.get("spec"), f"{field}.spec")


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        got = "nothing" if value is None else type(value).__name__
        raise PodSpecError(f"{field}: must be a mapping, got {got}")
    return value


def _list(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        got = "nothing" if value is None else type(value).__name__
        raise PodSpecError(f"{field}: must be a list, got {got}")
    return value
