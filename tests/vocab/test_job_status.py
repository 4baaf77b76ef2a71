"""A batch/v1 Job's status as Kubernetes' job controller writes it under Kueue (pure): each phase
of its workload with the pods the runtime reports, in named cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpuaas.core.state import (
    AdmissionCheckStatus,
    CheckStateValue,
    Condition,
    Phase,
    WorkloadState,
)
from gpuaas.testing.builders import WorkloadBuilder
from gpuaas.vocab.job_status import job_status
from gpuaas.vocab.render import rfc3339

CREATED, ADMITTED, EVICTED, DONE = 1000.0, 1010.0, 1020.0, 1030.0


def _state(
    phase: Phase | None,
    *,
    finished: str | None = None,
    evicted: bool = False,
    check: CheckStateValue | None = None,
    pods: int = 1,
) -> WorkloadState | None:
    if phase is None:
        return None
    wl = WorkloadBuilder("j").pod_set("main", pods, cpu="1").obj()
    st = WorkloadState(wl, uid=1, created_at=CREATED, priority=0, phase=phase)
    if phase in (Phase.ADMITTED, Phase.EVICTING, Phase.FINISHED):
        st.admitted_at = ADMITTED
    if finished is not None:
        st.conditions["Finished"] = Condition("Finished", "True", finished, "Job done", DONE)
    if evicted:
        st.conditions["Evicted"] = Condition("Evicted", "True", "Preempted", "", EVICTED)
    if check is not None:
        st.admission_checks["mk"] = AdmissionCheckStatus("mk", check, "", ADMITTED)
    return st


@dataclass(frozen=True)
class Case:
    name: str
    state: WorkloadState | None
    pods: list[dict[str, Any]] = field(default_factory=list)
    want: dict[str, Any] = field(default_factory=dict)
    conditions: list[tuple[str, str, str]] = field(default_factory=list)  # type, status, reason
    absent: tuple[str, ...] = ()


CASES = [
    Case("pending for quota: suspended", _state(Phase.PENDING),
         want={"active": 0, "ready": 0},
         conditions=[("Suspended", "True", "JobSuspended")],
         absent=("startTime", "completionTime", "succeeded")),
    Case("quota reserved, a check not Ready: still suspended",
         _state(Phase.ADMITTED, check=CheckStateValue.PENDING),
         conditions=[("Suspended", "True", "JobSuspended")], absent=("startTime",)),
    Case("admitted, pod starting", _state(Phase.ADMITTED), [{"phase": "Pending"}],
         want={"active": 1, "ready": 0, "startTime": rfc3339(ADMITTED)},
         conditions=[("Suspended", "False", "JobResumed")]),
    Case("admitted, checks Ready, pod running",
         _state(Phase.ADMITTED, check=CheckStateValue.READY), [{"phase": "Running"}],
         want={"active": 1, "ready": 1, "startTime": rfc3339(ADMITTED)},
         conditions=[("Suspended", "False", "JobResumed")], absent=("completionTime",)),
    Case("two pods, one retried after a failure", _state(Phase.ADMITTED, pods=2),
         [{"phase": "Running", "restarts": 1}, {"phase": "Succeeded"}],
         want={"active": 1, "ready": 1, "succeeded": 1, "failed": 1}),
    Case("evicted, pods stopping", _state(Phase.EVICTING, evicted=True),
         [{"phase": "Terminating"}],
         want={"active": 0, "terminating": 1},
         conditions=[("Suspended", "True", "JobSuspended")], absent=("startTime",)),
    Case("succeeded, pod still listed", _state(Phase.FINISHED, finished="Succeeded"),
         [{"phase": "Succeeded"}],
         want={"active": 0, "succeeded": 1, "startTime": rfc3339(ADMITTED),
               "completionTime": rfc3339(DONE)},
         conditions=[("Suspended", "False", "JobResumed"),
                     ("SuccessCriteriaMet", "True", "CompletionsReached"),
                     ("Complete", "True", "CompletionsReached")]),
    Case("succeeded, pods gone: every pod counted", _state(Phase.FINISHED, finished="Succeeded",
                                                           pods=3),
         want={"succeeded": 3, "active": 0},
         conditions=[("Complete", "True", "CompletionsReached")]),
    Case("failed", _state(Phase.FINISHED, finished="Failed"), [{"phase": "Failed"}],
         want={"failed": 1, "active": 0},
         conditions=[("FailureTarget", "True", "BackoffLimitExceeded"),
                     ("Failed", "True", "BackoffLimitExceeded")],
         absent=("completionTime", "succeeded")),
    Case("no workload: counters only", None, [{"phase": "Running"}],
         want={"active": 1, "ready": 1}, absent=("conditions",)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_job_status(case: Case) -> None:
    status = job_status(case.state, case.pods)
    for k, v in case.want.items():
        assert status.get(k) == v, (k, status)
    for k in case.absent:
        assert k not in status, (k, status)
    got = [(c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])]
    for want in case.conditions:
        assert want in got, (want, got)
    assert not any(c[0] in ("Complete", "Failed") for c in got if c not in case.conditions)
    assert status["uncountedTerminatedPods"] == {}


def test_a_finished_job_keeps_its_conditions_times() -> None:
    status = job_status(_state(Phase.FINISHED, finished="Succeeded"), [])
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["lastTransitionTime"] == rfc3339(DONE) == status["completionTime"]
    assert complete["message"] == "Job done"
