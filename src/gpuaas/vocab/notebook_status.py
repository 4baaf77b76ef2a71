"""A Notebook's status as Kubeflow's notebook controller writes it, plus gpuaas's ``url``.

Kubeflow (``notebook-controller/api/v1/notebook_types.go``) publishes ``readyReplicas``, the
notebook container's ``containerState`` (a Kubernetes ``ContainerState``: ``running``,
``waiting`` or ``terminated``) and ``conditions`` copied from its pod's conditions. Under Kueue a
queued workbench's pod is scheduling-gated, so its pod reads ``PodScheduled=False`` with reason
``SchedulingGated``; gpuaas puts why the Workload waits (and its place in the queue) in that
condition's message. ``url`` is a gpuaas addition (Kubeflow's status has none): where the gpuaas
server serves the workbench, ``/workbenches/NS/NAME/``, relative to the server's address. A
stopped Notebook (``kubeflow-resource-stopped``) has no pod: zero replicas, an empty state.
Pure: the workload state and the live pod phases are passed in.
"""

from __future__ import annotations

from typing import Any

from gpuaas.core.state import Phase, WorkloadState
from gpuaas.vocab.render import rfc3339

JsonDoc = dict[str, Any]
SCHEDULING_GATED = "SchedulingGated"


def notebook_status(
    namespace: str,
    name: str,
    st: WorkloadState | None,
    live: JsonDoc | None,
    why_pending: str = "",
    stopped: bool = False,
) -> JsonDoc:
    url = f"/workbenches/{namespace}/{name}/"
    if stopped or st is None:
        return {"readyReplicas": 0, "containerState": {}, "conditions": []}
    pods = (live or {}).get("pods") or {}
    running = any(phase == "Running" for phase in pods.values())
    since = rfc3339(st.admitted_at) if st.admitted_at is not None else ""
    if st.phase in (Phase.PENDING, Phase.INACTIVE):
        return {
            "readyReplicas": 0,
            "containerState": {"waiting": {"reason": SCHEDULING_GATED, "message": why_pending}},
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": SCHEDULING_GATED,
                    "message": why_pending,
                }
            ],
        }
    if st.phase == Phase.FINISHED:
        finished = st.conditions.get("Finished")
        return {
            "readyReplicas": 0,
            "containerState": {
                "terminated": {
                    "reason": finished.reason if finished else "Completed",
                    "message": finished.message if finished else "",
                }
            },
            "conditions": [],
        }
    if running and st.phase == Phase.ADMITTED:
        return {
            "readyReplicas": 1,
            "containerState": {"running": {"startedAt": since}},
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
            "url": url,
        }
    reason = "Terminating" if st.phase == Phase.EVICTING else "ContainerCreating"
    return {
        "readyReplicas": 0,
        "containerState": {"waiting": {"reason": reason}},
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "url": url,
    }
