"""Which runs a poll may leave alone (``local_runs.calm``): only those whose every pod is
drained or runs a leader the launcher forked and has not reported ended, with no kill deadline.
A run called calm by mistake would never be seen to end, stop or be killed."""

from __future__ import annotations

import pytest

from gpuaas.runtimes.base import PodSpec
from gpuaas.runtimes.local_runs import Pod, Run, calm
from gpuaas.runtimes.podstate import PodRecord, WorkloadRecord

LAUNCHED = {"launched": True}


def pod(name: str, *, kill_at: float | None = None, **state: object) -> Pod:
    record = PodRecord(PodSpec(name, ("sleep", "60")), (), "t" + name, pid=100, kill_at=kill_at)
    return Pod(record, **state)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ([pod("a", **LAUNCHED)], True),
        ([pod("a", **LAUNCHED), pod("b", gone=True)], True),  # one drained, one running
        ([pod("a", gone=True), pod("b", gone=True)], True),  # every pod drained
        ([pod("a")], False),  # not the launcher's: followed by its pid at every poll
        ([pod("a", launched=True, reported=0)], False),  # the launcher reported its end
        ([pod("a", launched=True, leader_done=True)], False),  # leftovers still swept
        ([pod("a", kill_at=5.0, launched=True)], False),  # being stopped: SIGKILL at kill_at
        ([pod("a", **LAUNCHED), pod("b")], False),  # one pod followed by pid is enough
    ],
)
def test_calm(pods: list[Pod], expected: bool) -> None:
    run = Run(WorkloadRecord("ns/w", 0, 6), {p.name: p for p in pods})
    assert calm(run) is expected
