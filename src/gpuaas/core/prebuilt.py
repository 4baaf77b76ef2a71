"""Whether a job and the prebuilt Workload it names still describe the same pods.

A job labelled (or annotated) ``kueue.x-k8s.io/prebuilt-workload-name`` takes an existing
Workload as its own, as a MultiKueue worker's Job takes the manager's copy. Kueue checks on each
reconcile that the two agree (``EquivalentToWorkload``: the maximum execution time, then each
podSet's count, minCount, tolerations unless admitted, init containers and containers) and
finishes the Workload with reason ``OutOfSync`` when they do not. The core holds a podSet's
summed requests, not its containers, so requests stand for the containers here: a change of
image or command alone goes unseen.
"""

from __future__ import annotations

from gpuaas.core.objects import Workload

OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"


def equivalent(job: Workload, wl: Workload, *, ignore_tolerations: bool) -> bool:
    """Kueue's ``EquivalentToWorkload`` on what the core holds of ``job`` and ``wl``."""
    if job.max_exec_seconds != wl.max_exec_seconds or len(job.pod_sets) != len(wl.pod_sets):
        return False
    for a, b in zip(job.pod_sets, wl.pod_sets, strict=True):
        if (a.count, a.min_count, a.requests) != (b.count, b.min_count, b.requests):
            return False
        if not ignore_tolerations and a.tolerations != b.tolerations:
            return False
    return True


__all__ = ["OUT_OF_SYNC", "OUT_OF_SYNC_MESSAGE", "equivalent"]
