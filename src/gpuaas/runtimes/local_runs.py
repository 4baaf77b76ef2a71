"""What the local runtime knows of each workload it runs: its pods' records and how each ended.

Kept apart from ``runtimes.local`` (which starts, stops and sweeps pods) because the state and
what is read off it (``status``, ``calm``) need no process, file or clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuaas.runtimes.base import PodStatus, WorkloadRun
from gpuaas.runtimes.podstate import PodRecord, WorkloadRecord


@dataclass(slots=True)
class Pod:
    record: PodRecord
    leader_done: bool = False
    exit_code: int | None = None
    gone: bool = False
    group_known: bool = True  # pgid still names this pod's group (False: leader died unseen)
    exit_path: Path | None = None  # where pod_init writes its code (built once, read each poll)
    launched: bool = False  # its leader is a child of the runtime's launcher, which reports its end
    reported: int | None = None  # the exit code the launcher reported for it
    term_waits: bool = False  # stopped before its leader created the command: SIGTERM once it has

    @property
    def name(self) -> str:
        return self.record.spec.name


@dataclass(slots=True)
class Run:
    record: WorkloadRecord
    pods: dict[str, Pod] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.record.key


def calm(run: Run) -> bool:
    """Whether no poll needs to look at ``run`` until the launcher reports one of its leaders
    ended or it is stopped: every pod is drained, or runs a leader the launcher forked and has
    not reported, with no kill deadline. Anything else (a leader followed by its pid, one that
    ended, one being stopped) is checked at every poll."""
    return all(
        p.gone
        or (p.launched and p.reported is None and p.record.kill_at is None and not p.leader_done)
        for p in run.pods.values()
    )


def status(run: Run) -> WorkloadRun:
    """The run as the Runtime protocol shows it: each pod's phase, pid, GPUs and restarts."""
    pods = []
    for pod in run.pods.values():
        rec = pod.record
        if pod.gone:
            phase = "Succeeded" if pod.exit_code == 0 else "Failed"
        elif rec.kill_at is not None:
            phase = "Terminating"
        else:
            phase = "Running"
        pods.append(
            PodStatus(
                pod.name,
                rec.pid,
                rec.gpus,
                rec.restarts,
                phase,
                pod.exit_code,
                pod_set=rec.spec.pod_set,
                started=rec.start_time or None,
                kill_at=rec.kill_at,
            )
        )
    return WorkloadRun(run.key, run.record.restart_count, run.record.stopping, tuple(pods))
