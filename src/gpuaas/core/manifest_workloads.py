"""Workloads from manifests: Kueue's Workload, and the job kinds Kueue turns into one Workload.

A batch/v1 Job, a ray.io RayCluster or RayJob becomes exactly the Workload Kueue's job integrations
build (``pkg/controller/jobs/job``, ``raycluster``, ``rayjob``): same podsets, names, counts, queue
and priority-class labels, and the checks their webhooks make. The Workload keeps the object's name,
kind, labels and annotations. Pod arithmetic lives in ``manifest_pods``; this module does no I/O and
does not resolve priority classes or queues (the cluster does).
"""

from __future__ import annotations

import re
from typing import Any

from gpuaas.core.manifest_common import (
    INT32_MAX,
    Ctx,
    check_dns_label,
    check_dns_subdomain,
    item_map,
    non_negative_seconds,
    opt_bool,
    opt_int,
    opt_list,
    opt_map,
    opt_str,
    string_map,
)
from gpuaas.core.manifest_pods import ExtraContainer, build_pod_set, first_container
from gpuaas.core.objects import MAX_EXEC_LABEL, SOURCE_POD, SOURCE_WPC, PodSet, Workload
from gpuaas.core.quantity import QuantityError, parse_quantity_exact

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
RUNTIME_ANNOTATION = "gpuaas.dev/runtime-seconds"
WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
RAY_FT_ANNOTATION = "ray.io/ft-enabled"

_GO_INT = re.compile(r"[+-]?[0-9]+")
MAX_POD_SETS = 18  # Workload spec.podSets MaxItems and jobframework.MaxPodSets
# KubeRay's RayCluster CRD defaults an omitted workerGroupSpecs[].replicas to 0 before Kueue reads
# the object (Kueue's own fallback for a nil pointer, 1, is therefore never reached via the API).
RAY_DEFAULT_REPLICAS = 0
# Requests Kueue adds for what KubeRay injects: the Redis cleanup job's needs folded into the head
# container when GCS fault tolerance is on, and the submitter (its own podset in K8sJobMode, a
# sidecar container of the head in SidecarMode).
_REDIS_CLEANUP = {"cpu": "200m", "memory": "256Mi"}
_SUBMITTER: ExtraContainer = {
    "requests": {"cpu": "500m", "memory": "200Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
_GOOD_QUEUES: set[str] = set()  # queue names already checked
_ATOI = re.compile(r"^[+-]?[0-9]+\Z")  # what Go's strconv.Atoi accepts
_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")


def _metadata_maps(ctx: Ctx, meta: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    labels = string_map(ctx, meta, "labels", "metadata.labels") if meta.get("labels") else {}
    annotations = (
        string_map(ctx, meta, "annotations", "metadata.annotations")
        if meta.get("annotations")
        else {}
    )
    return labels, annotations


def _workload(
    ctx: Ctx,
    pod_sets: list[PodSet],
    labels: dict[str, str],
    annotations: dict[str, str],
    queue_name: str,
    priority: int | None = None,
    priority_class: str | None = None,
    active: bool = True,
) -> Workload:
    runtime = (
        non_negative_seconds(ctx, annotations, RUNTIME_ANNOTATION)
        if RUNTIME_ANNOTATION in annotations
        else None
    )
    assert ctx.name is not None and ctx.namespace is not None
    # Positional: this runs once per workload, and keyword calls cost measurably more.
    return Workload(
        ctx.namespace,
        ctx.name,
        queue_name,
        pod_sets,
        priority,
        priority_class,
        active,
        ctx.kind,
        runtime,
        labels,
        annotations,
    )


def _check_unique_names(ctx: Ctx, pod_sets: list[PodSet], path: str) -> None:
    if len(pod_sets) == 1:
        return
    if len(pod_sets) > MAX_POD_SETS:
        raise ctx.err(path, f"must have at most {MAX_POD_SETS} podSets, got {len(pod_sets)}")
    seen: set[str] = set()
    for i, ps in enumerate(pod_sets):
        if ps.name in seen:
            raise ctx.err(f"{path}[{i}].name", f"Duplicate value: {ps.name!r}")
        seen.add(ps.name)


def _priority_class(ctx: Ctx, spec: dict[str, Any], priority: int | None) -> tuple[str | None, str]:
    """The WorkloadPriorityClass a Workload names, in its v1beta1 or v1beta2 spelling, and
    where its priority comes from (``Workload.priority_source``)."""
    ref = opt_map(ctx, spec, "priorityClassRef", "spec.priorityClassRef")
    if ref is not None:
        p = "spec.priorityClassRef"
        group = opt_str(ctx, ref, "group", f"{p}.group")
        kind = opt_str(ctx, ref, "kind", f"{p}.kind")
        name = opt_str(ctx, ref, "name", f"{p}.name")
        if not name:
            raise ctx.err(f"{p}.name", "required value")
        if (group, kind) == ("kueue.x-k8s.io", "WorkloadPriorityClass"):
            return name, SOURCE_WPC
        if (group, kind) == ("scheduling.k8s.io", "PriorityClass"):
            if priority is None:
                raise ctx.err(
                    "spec.priority", "priority should not be nil when priorityClassRef is set"
                )
            return None, SOURCE_POD + name
        raise ctx.err(
            p,
            f"unsupported group/kind {group!r}/{kind!r}: expected kueue.x-k8s.io/"
            "WorkloadPriorityClass or scheduling.k8s.io/PriorityClass",
        )
    name = opt_str(ctx, spec, "priorityClassName", "spec.priorityClassName")
    if not name:
        return None, ""
    source = opt_str(ctx, spec, "priorityClassSource", "spec.priorityClassSource")
    if source == WPC_SOURCE:
        return name, SOURCE_WPC
    # A pod PriorityClass: gpuaas has no such objects, so the value must be given (as the CRD asks).
    if priority is None:
        raise ctx.err("spec.priority", "priority should not be nil when priorityClassName is set")
    return None, SOURCE_POD + name


def parse_workload(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Workload:
    spec = opt_map(ctx, doc, "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    labels, annotations = _metadata_maps(ctx, meta)
    raw_sets = spec.get("podSets")
    if type(raw_sets) is not list or not raw_sets:
        raise ctx.err(
            "spec.podSets",
            "must have at least 1 item" if raw_sets in (None, []) else "must be a list",
        )
    pod_sets = []
    with_min = 0
    over: list[str] = []  # requests above limits: accepted, as Kueue's webhook does
    for i, raw in enumerate(raw_sets):
        p = f"spec.podSets[{i}]"
        ps = item_map(ctx, raw, p)
        name = ps.get("name", "main")
        if type(name) is not str or not name:
            raise ctx.err(f"{p}.name", f"must be a non-empty string, got {name!r}")
        check_dns_label(ctx, name, f"{p}.name")
        count = opt_int(ctx, ps, "count", f"{p}.count", minimum=0)
        count = 1 if count is None else count
        min_count = opt_int(ctx, ps, "minCount", f"{p}.minCount", minimum=1)
        if min_count is not None:
            with_min += 1
            if min_count > count:
                raise ctx.err(
                    f"{p}.minCount", "minCount should be positive and less or equal to count"
                )
        if ps.get("template") is None:
            raise ctx.err(f"{p}.template", "required value")
        pod_sets.append(
            build_pod_set(ctx, name, count, min_count, ps["template"], f"{p}.template", None, over)
        )
    _check_unique_names(ctx, pod_sets, "spec.podSets")
    if with_min > 1:
        raise ctx.err("spec.podSets", "at most one podSet can use minCount")
    queue = opt_str(ctx, spec, "queueName", "spec.queueName")
    queue_path = "spec.queueName"
    if not queue:
        queue = labels.get(QUEUE_LABEL, "")
        queue_path = f"metadata.labels[{QUEUE_LABEL}]"
    if queue and queue not in _GOOD_QUEUES:
        check_dns_subdomain(ctx, queue, queue_path)
        if len(_GOOD_QUEUES) < 10000:
            _GOOD_QUEUES.add(queue)
    priority = opt_int(ctx, spec, "priority", "spec.priority")
    priority_class, source = _priority_class(ctx, spec, priority)
    wl = _workload(
        ctx,
        pod_sets,
        labels,
        annotations,
        queue,
        priority=priority,
        priority_class=priority_class,
        active=opt_bool(ctx, spec, "active", "spec.active", True),
    )
    wl.priority_source = source
    wl.active_given = spec.get("active") is not None
    wl.max_exec_seconds = opt_int(
        ctx, spec, "maximumExecutionTimeSeconds", "spec.maximumExecutionTimeSeconds", minimum=1
    )
    wl.uid = _uid(ctx, meta)
    wl.job_uid = labels.get(JOB_UID_LABEL, "")
    if over:
        body = over[0] if len(over) == 1 else f"[{', '.join(over)}]"  # Go's ToAggregate
        wl.invalid_resources = f"resources validation failed: {body}"
    return wl


def job_workload(ctx: Ctx, meta: dict[str, Any], pod_sets: list[PodSet], path: str) -> Workload:
    """The Workload Kueue's job integrations build: queue and priority-class labels carried."""
    labels, annotations = _metadata_maps(ctx, meta)
    _check_unique_names(ctx, pod_sets, path)
    queue = labels.get(QUEUE_LABEL, "")
    if queue:
        check_dns_subdomain(ctx, queue, f"metadata.labels[{QUEUE_LABEL}]")
    wpc = labels.get(PRIORITY_CLASS_LABEL) or None
    if wpc is not None:
        check_dns_subdomain(ctx, wpc, f"metadata.labels[{PRIORITY_CLASS_LABEL}]")
    wl = _workload(ctx, pod_sets, labels, annotations, queue, priority_class=wpc)
    wl.job_uid = _uid(ctx, meta)  # the job's own; the Workload made from it has another
    if MAX_EXEC_LABEL in labels:
        wl.max_exec_seconds = _max_exec_label(ctx, labels[MAX_EXEC_LABEL])
    return wl


def _max_exec_label(ctx: Ctx, raw: str) -> int | None:
    """A job's ``kueue.x-k8s.io/max-exec-time-seconds``: refused unless a positive integer
    (Kueue's job webhook); one past int32 is no limit, as Kueue's parse of it gives none."""
    path = f"metadata.labels[{MAX_EXEC_LABEL}]"
    if not _GO_INT.fullmatch(raw):  # strconv.Atoi's syntax (no spaces, no underscores)
        raise ctx.err(path, f"must be an integer number of seconds, got {raw!r}")
    value = int(raw)
    if value <= 0:
        raise ctx.err(path, f"should be greater than 0, got {value}")
    return value if value <= INT32_MAX else None


def _uid(ctx: Ctx, meta: dict[str, Any]) -> str:
    uid = meta.get("uid")
    if uid is None:
        return ""
    if type(uid) is not str:
        raise ctx.err("metadata.uid", f"must be a string, got {uid!r}")
    return uid


def parse_job(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Workload:
    spec = opt_map(ctx, doc, "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    parallelism = opt_int(ctx, spec, "parallelism", "spec.parallelism", minimum=0)
    completions = opt_int(ctx, spec, "completions", "spec.completions", minimum=0)
    # Kueue's podsCount: parallelism (defaulted to 1) capped by completions when set.
    count = 1 if parallelism is None else parallelism
    if completions is not None and completions < count:
        count = completions
    min_count = None
    annotations = opt_map(ctx, meta, "annotations", "metadata.annotations") or {}
    raw_min = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if raw_min is not None:
        p = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
        if type(raw_min) is not str or not _ATOI.fullmatch(raw_min):
            raise ctx.err(p, f"must be an integer, got {raw_min!r}")
        min_count = int(raw_min)
        if not 0 < min_count < count:
            raise ctx.err(p, f"{min_count} should be between 0 and {count - 1}")
    if spec.get("template") is None:
        raise ctx.err("spec.template", "required value")
    pod_set = build_pod_set(ctx, "main", count, min_count, spec["template"], "spec.template")
    return job_workload(ctx, meta, [pod_set], "spec")


def _with_redis_cleanup(ctx: Ctx, template: Any, path: str) -> Any:
    """The head template with the Redis cleanup job's requests folded into container 0 (keep max)."""
    first = first_container(ctx, template, path)
    if first is None:
        raise ctx.err(
            f"{path}.spec.containers",
            "cannot account for Redis cleanup resources: head "
            "pod template must include the Ray container",
        )
    resources = opt_map(ctx, first, "resources", f"{path}.spec.containers[0].resources") or {}
    requests = dict(
        opt_map(ctx, resources, "requests", f"{path}.spec.containers[0].resources.requests") or {}
    )
    for name, extra in _REDIS_CLEANUP.items():
        have = requests.get(name)
        try:
            if have is None or parse_quantity_exact(have) < parse_quantity_exact(extra):
                requests[name] = extra
        except QuantityError as exc:
            raise ctx.err(
                f"{path}.spec.containers[0].resources.requests[{name}]", str(exc)
            ) from None
    spec = dict(template["spec"])
    spec["containers"] = [
        {**first, "resources": {**resources, "requests": requests}},
        *spec["containers"][1:],
    ]
    return {**template, "spec": spec}


def _ray_pod_sets(
    ctx: Ctx,
    cluster: dict[str, Any],
    path: str,
    annotations: dict[str, Any],
    head_extra: list[ExtraContainer],
    submitter: bool = False,
) -> list[PodSet]:
    """Kueue's ``raycluster.BuildPodSets``: "head" (1 pod), then one podset per worker group.

    ``submitter``: a "submitter" podset will follow, so no worker group may take that name.
    """
    if opt_bool(ctx, cluster, "enableInTreeAutoscaling", f"{path}.enableInTreeAutoscaling", False):
        raise ctx.err(
            f"{path}.enableInTreeAutoscaling",
            "a kueue-managed RayCluster can use "
            "autoscaling only as an elastic job, which gpuaas does not support",
        )
    head = opt_map(ctx, cluster, "headGroupSpec", f"{path}.headGroupSpec")
    if head is None or head.get("template") is None:
        raise ctx.err(f"{path}.headGroupSpec.template", "required value")
    head_path = f"{path}.headGroupSpec.template"
    template = head["template"]
    ft = annotations.get(RAY_FT_ANNOTATION)
    if cluster.get("gcsFaultToleranceOptions") is not None or (
        type(ft) is str and ft.lower() == "true"
    ):
        template = _with_redis_cleanup(ctx, template, head_path)
    pod_sets = [build_pod_set(ctx, "head", 1, None, template, head_path, head_extra)]
    wp = f"{path}.workerGroupSpecs"
    for i, raw in enumerate(opt_list(ctx, cluster, "workerGroupSpecs", wp)):
        p = f"{wp}[{i}]"
        group = item_map(ctx, raw, p)
        name = opt_str(ctx, group, "groupName", f"{p}.groupName")
        if not name:
            raise ctx.err(f"{p}.groupName", "required value")
        if name == "head":
            raise ctx.err(f"{p}.groupName", '"head" is reserved for the head group')
        if submitter and name == "submitter":
            raise ctx.err(
                f"{p}.groupName",
                '"submitter" is the podset Kueue adds for the submitter Job in K8sJobMode',
            )
        if any(ps.name == name for ps in pod_sets):
            raise ctx.err(f"{p}.groupName", f"Duplicate value: {name!r}")
        replicas = opt_int(ctx, group, "replicas", f"{p}.replicas", minimum=0)
        count = RAY_DEFAULT_REPLICAS if replicas is None else replicas
        hosts = opt_int(ctx, group, "numOfHosts", f"{p}.numOfHosts", minimum=1)
        if hosts is not None and hosts > 1:
            count *= hosts
        if group.get("template") is None:
            raise ctx.err(f"{p}.template", "required value")
        pod_sets.append(build_pod_set(ctx, name, count, None, group["template"], f"{p}.template"))
    if len(pod_sets) > MAX_POD_SETS:
        raise ctx.err(
            wp,
            f"must have at most {MAX_POD_SETS - 1} worker groups (Kueue's podset "
            f"limit is {MAX_POD_SETS}), got {len(pod_sets) - 1}",
        )
    return pod_sets


def parse_ray_cluster(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Workload:
    spec = opt_map(ctx, doc, "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    annotations = opt_map(ctx, meta, "annotations", "metadata.annotations") or {}
    pod_sets = _ray_pod_sets(ctx, spec, "spec", annotations, [])
    return job_workload(ctx, meta, pod_sets, "spec.workerGroupSpecs")


def parse_ray_job(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Workload:
    spec = opt_map(ctx, doc, "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    selector = opt_map(ctx, spec, "clusterSelector", "spec.clusterSelector")
    cluster = opt_map(ctx, spec, "rayClusterSpec", "spec.rayClusterSpec")
    if selector and cluster is not None:
        raise ctx.err(
            "spec.clusterSelector", "a kueue managed job should not use an existing cluster"
        )
    if selector:
        raise ctx.err(
            "spec.clusterSelector",
            "a RayJob that runs on an existing cluster is not managed by Kueue and has no Workload",
        )
    if cluster is None:
        raise ctx.err(
            "spec.rayClusterSpec",
            "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
        )
    if not opt_bool(ctx, spec, "shutdownAfterJobFinishes", "spec.shutdownAfterJobFinishes", False):
        raise ctx.err(
            "spec.shutdownAfterJobFinishes",
            "a kueue managed job should delete the cluster after finishing",
        )
    # KubeRay: "value must be positive integer" (the RayJob fails, DeadlineExceeded, past it)
    opt_int(ctx, spec, "activeDeadlineSeconds", "spec.activeDeadlineSeconds", minimum=1)
    mode = opt_str(ctx, spec, "submissionMode", "spec.submissionMode", "K8sJobMode")
    if mode not in _SUBMISSION_MODES:
        choices = ", ".join(f'"{m}"' for m in _SUBMISSION_MODES)
        raise ctx.err(
            "spec.submissionMode", f'unsupported value "{mode}": supported values: {choices}'
        )
    annotations = opt_map(ctx, meta, "annotations", "metadata.annotations") or {}
    head_extra = [_SUBMITTER] if mode == "SidecarMode" else []
    pod_sets = _ray_pod_sets(
        ctx, cluster, "spec.rayClusterSpec", annotations, head_extra, mode == "K8sJobMode"
    )
    if mode == "K8sJobMode":
        raw = spec.get("submitterPodTemplate")
        if raw is not None:
            pod_sets.append(
                build_pod_set(ctx, "submitter", 1, None, raw, "spec.submitterPodTemplate")
            )
        else:
            default = {
                "spec": {"containers": [{"name": "ray-job-submitter", "resources": _SUBMITTER}]}
            }
            pod_sets.append(
                build_pod_set(ctx, "submitter", 1, None, default, "spec.submitterPodTemplate")
            )
    return job_workload(ctx, meta, pod_sets, "spec.rayClusterSpec.workerGroupSpecs")
