"""Kubeflow's ``Notebook`` (a workbench) as the Workload Kueue admits for it.

On RHOAI a workbench is a ``kubeflow.org/v1`` Notebook; Kubeflow's notebook controller runs it as a
one-replica StatefulSet, and Kueue's StatefulSet integration admits that pod group as one Workload
with one podset built from the pod template (``spec.template.spec``), the Notebook's
``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` labels carried to it. gpuaas
keeps the Notebook's name for the Workload, as it does for a Job, and names the podset ``main``.

A Notebook carrying ``kubeflow-resource-stopped`` (the annotation Kubeflow's dashboard and RHOAI's
culler set) is scaled to zero replicas by the notebook controller; Kueue's StatefulSet pod group is
a *serving* group, never Finished, and with its pods gone its Workload goes away with them
(scaling up again makes a new one, queued from the back). ``notebook_stopped`` says so; the engine
and the scenario runner then remove the Workload instead of deriving one. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuaas.core.manifest_common import Ctx, opt_map
from gpuaas.core.manifest_pods import build_pod_set
from gpuaas.core.manifest_workloads import job_workload
from gpuaas.core.objects import Workload

NOTEBOOK_KIND = "Notebook"
NOTEBOOK_API_VERSIONS = ("kubeflow.org/v1", "kubeflow.org/v1beta1")
STOPPED_ANNOTATION = "kubeflow-resource-stopped"
POD_SET = "main"


def parse_notebook(ctx: Ctx, doc: dict[str, Any], meta: dict[str, Any]) -> Workload:
    """The Workload of a (running) Notebook: one pod from ``spec.template``."""
    spec = opt_map(ctx, doc, "spec", "spec")
    if spec is None:
        raise ctx.err("spec", "required value")
    template = spec.get("template")
    if template is None:
        raise ctx.err("spec.template", "required value")
    pod_set = build_pod_set(ctx, POD_SET, 1, None, template, "spec.template")
    return job_workload(ctx, meta, [pod_set], "spec")


def notebook_stopped(doc: Mapping[str, Any]) -> bool:
    """Whether a Notebook document asks to be stopped (its annotation is set, to any value)."""
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        return False
    annotations = meta.get("annotations")
    return isinstance(annotations, Mapping) and STOPPED_ANNOTATION in annotations


def is_notebook(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == NOTEBOOK_KIND and doc.get("apiVersion") in NOTEBOOK_API_VERSIONS
