"""Admission checks as Kueue keeps them: which apply, their states, and what a state change does.

Kueue reserves quota first; a workload is Admitted only once every AdmissionCheck that applies to
it is Ready (``pkg/workload/admissionchecks.go``, ``SyncAdmittedCondition``). Which checks apply
follows the ClusterQueue's ``admissionChecks`` (every flavor) or ``admissionChecksStrategy``
(``onFlavors``: a check applies when the admission uses one of them). A check's controller sets
its state: Retry evicts the workload (reason AdmissionCheck), releases its quota, resets the
checks to Pending (``retryCount`` + 1) and keeps it out of its queue until the Retry's
``requeueAfterSeconds`` ran out; Rejected deactivates it (the workload controller's
``reconcileCheckBasedEviction``). A ClusterQueue whose check is missing or not Active is inactive
(``pkg/cache/scheduler/clusterqueue.go``). This module holds the states and the rules; the check
controllers themselves live outside the core (the engine's check-controller registry, the
scenario runner's ``admissionChecks`` steps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuaas.core.decisions import CheckState
from gpuaas.core.errors import ApplyError
from gpuaas.core.objects import AdmissionCheck, ClusterQueue
from gpuaas.core.state import (
    Admission,
    AdmissionCheckStatus,
    CheckStateValue,
    Phase,
    WorkloadState,
)

if TYPE_CHECKING:
    from gpuaas.core.cluster import Cluster

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
EVICTED_BY_CHECK = "AdmissionCheck"  # Kueue's WorkloadEvictedByAdmissionCheck
DEACTIVATED_BY_CHECK = "DeactivatedDueToAdmissionCheck"

_PENDING, _READY = CheckStateValue.PENDING, CheckStateValue.READY
_RETRY, _REJECTED = CheckStateValue.RETRY, CheckStateValue.REJECTED


def applicable(spec: ClusterQueue, admission: Admission) -> list[str]:
    """The checks that apply to an admission, in the ClusterQueue's order."""
    if not spec.admission_checks:
        return []
    used = {f for ps in admission.pod_sets for f in ps.flavors.values()}
    return [
        r.name for r in spec.admission_checks if not r.on_flavors or used.intersection(r.on_flavors)
    ]


def inactive_reasons(
    spec: ClusterQueue, checks: Mapping[str, AdmissionCheck], is_active: Mapping[str, bool]
) -> list[tuple[str, str]]:
    """Every way the ClusterQueue's checks keep it inactive, each Kueue's reason and message
    part, in Kueue's order (``clusterQueue.inactiveReason``): missing, inactive, more than one
    MultiKueue check, a MultiKueue check per flavor. Names sorted, joined with ","."""
    names = [r.name for r in spec.admission_checks]
    out: list[tuple[str, str]] = []
    missing = sorted(n for n in names if n not in checks)
    if missing:
        out.append(
            ("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {','.join(missing)}")
        )
    inactive = sorted(n for n in names if n in checks and not is_active.get(n, False))
    if inactive:
        out.append(
            (
                "AdmissionCheckInactive",
                f"references inactive AdmissionCheck(s): {','.join(inactive)}",
            )
        )
    multi = sorted(
        n for n in names if n in checks and checks[n].controller_name == MULTIKUEUE_CONTROLLER
    )
    if len(multi) > 1:
        out.append(
            (
                "MultipleMultiKueueAdmissionChecks",
                "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
                f"found: {','.join(multi)}",
            )
        )
    per_flavor = sorted(r.name for r in spec.admission_checks if r.on_flavors and r.name in multi)
    if per_flavor:
        out.append(
            (
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {','.join(per_flavor)}",
            )
        )
    return out


def states_message(checks: Iterable[AdmissionCheckStatus], state: CheckStateValue) -> str:
    """Kueue's ``buildAdmissionChecksMessage``: the checks in ``state``, by name."""
    found = sorted((c for c in checks if c.state == state), key=lambda c: c.name)
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in found]
    noun = "AdmissionChecks" if len(found) > 1 else "AdmissionCheck"
    return f"{noun} in {state.value} state: {'; '.join(parts)}"


class CheckGate:
    """The admission-check part of one ``Cluster``'s lifecycle; the cluster owns the state."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster

    def on_reserve(self, wl: WorkloadState, spec: ClusterQueue, now: float) -> bool:
        """Quota was just reserved: list the checks that apply (kept states stay, new ones are
        Pending). True when every one is already Ready (or none applies)."""
        if not spec.admission_checks:  # the common case: nothing to wait for
            if wl.admission_checks:
                wl.admission_checks = {}
            return True
        assert wl.admission is not None
        names = applicable(spec, wl.admission)
        old = wl.admission_checks
        wl.admission_checks = {
            n: old.get(n) or AdmissionCheckStatus(n, _PENDING, "", now) for n in names
        }
        return all(c.state == _READY for c in wl.admission_checks.values())

    def reset_on_eviction(self, wl: WorkloadState, now: float) -> None:
        """Kueue's resetChecksOnEviction: every check back to Pending; a Retry counts. The
        MultiKueue nomination goes too (``resetClusterNomination``)."""
        wl.nominated_cluster_names, wl.cluster_name = (), None
        for c in wl.admission_checks.values():
            if c.state == _PENDING:
                continue
            if c.state == _RETRY:
                c.retry_count = (c.retry_count or 0) + 1
            c.message = f"Reset to Pending after eviction. Previously: {c.state.value}"
            c.state = _PENDING
            c.last_transition_time = now

    def set_state(
        self,
        key: str,
        check: str,
        state_name: str,
        message: str,
        now: float,
        requeue_after_seconds: int | None = None,
    ) -> None:
        """A check's controller (or a client, through the Workload's status) sets a state.

        Raises ``ApplyError`` when the workload holds no quota or the check does not apply to
        it: Kueue lists a workload's checks only once its quota is reserved.
        """
        c, life = self.c, self.c.life
        wl = c.workloads.get(key)
        obj = f"Workload {key}"
        field = f"status.admissionChecks[{check}]"
        try:
            state = CheckStateValue(state_name)
        except ValueError:
            raise ApplyError(
                obj,
                f"{field}.state",
                f"must be one of Pending, Ready, Retry, Rejected, got {state_name!r}",
            ) from None
        if wl is None:
            raise ApplyError(obj, field, "the workload doesn't exist")
        if wl.phase != Phase.ADMITTED or wl.admission is None:
            raise ApplyError(
                obj,
                field,
                f"the workload holds no quota ({wl.phase.value}); admission check states are "
                "set only while quota is reserved",
            )
        st = wl.admission_checks.get(check)
        if st is None:
            applies = ", ".join(wl.admission_checks) or "none"
            raise ApplyError(
                obj, field, f"admission check {check} does not apply to it (applies: {applies})"
            )
        if requeue_after_seconds is not None and requeue_after_seconds < 0:
            raise ApplyError(obj, f"{field}.requeueAfterSeconds", "must be 0 or more")
        if st.state != state:
            st.state, st.last_transition_time = state, now
        elif st.message == message and (
            requeue_after_seconds is None or requeue_after_seconds == st.requeue_after_seconds
        ):
            return  # nothing changed
        st.message = message
        if requeue_after_seconds is not None:
            st.requeue_after_seconds = requeue_after_seconds
        c.dirty.add(key)
        c.version += 1
        life.emit(wl, CheckState(key, now, check, state.value, message))
        self._follow(wl, now)

    def set_cluster_nomination(
        self, key: str, nominated: tuple[str, ...], cluster_name: str | None
    ) -> None:
        """MultiKueue's ``status.nominatedClusterNames`` and ``status.clusterName``.

        Raises ``ApplyError`` when the workload holds no quota, or when ``clusterName``, once
        set, would change: Kueue keeps it immutable until the workload is evicted.
        """
        c = self.c
        wl = c.workloads.get(key)
        obj = f"Workload {key}"
        if wl is None:
            raise ApplyError(obj, "status.clusterName", "the workload doesn't exist")
        if wl.phase != Phase.ADMITTED or wl.admission is None:
            raise ApplyError(
                obj,
                "status.nominatedClusterNames",
                f"the workload holds no quota ({wl.phase.value}); clusters are nominated only "
                "while quota is reserved",
            )
        if wl.cluster_name is not None and cluster_name != wl.cluster_name:
            raise ApplyError(
                obj,
                "status.clusterName",
                f"field is immutable once set (is {wl.cluster_name!r}, not {cluster_name!r})",
            )
        if (wl.nominated_cluster_names, wl.cluster_name) == (nominated, cluster_name):
            return
        wl.nominated_cluster_names, wl.cluster_name = nominated, cluster_name
        c.dirty.add(key)
        c.version += 1

    def _follow(self, wl: WorkloadState, now: float) -> None:
        """What the workload controller does after a state change."""
        checks = wl.admission_checks.values()
        if any(ch.state == _REJECTED for ch in checks):
            message = f"Deactivated due to {states_message(checks, _REJECTED)}"
            wl.deactivated_by_check = True
            wl.workload = replace(wl.workload, active=False)  # Kueue writes spec.active=false
            self.c.life.evict(wl, DEACTIVATED_BY_CHECK, message, now)
            return
        retry = [ch for ch in checks if ch.state == _RETRY]
        if retry:
            dues = [
                ch.last_transition_time + ch.requeue_after_seconds
                for ch in retry
                if ch.requeue_after_seconds
            ]
            due = max(dues) if dues else now
            wl.requeue_at = due if due > now else None
            wl.queued_at = now  # Kueue orders a check-evicted workload by its eviction time
            message = f"Evicted due to {states_message(checks, _RETRY)}"
            self.c.life.evict(wl, EVICTED_BY_CHECK, message, now)
            return
        if all(ch.state == _READY for ch in checks):
            self.c.life.admit_checked(wl, now)


__all__ = [
    "DEACTIVATED_BY_CHECK",
    "EVICTED_BY_CHECK",
    "MULTIKUEUE_CONTROLLER",
    "CheckGate",
    "applicable",
    "inactive_reasons",
    "states_message",
]
