"""What the Ray runtime keeps of each workload: its pods' state in memory and on disk, and logs.

This module owns the Ray runtime's bookkeeping, apart from any Ray call: ``RayRun`` and
``RayPod`` (one pod's current attempt: its bundle in the workload's placement group, the node and
attempt its launcher knows it by, its phase, node, GPUs and exit code), the record each workload keeps under
``DATA_DIR/runtime/workloads/<ns>/<name>/run.json`` so a restarted server finds its pods again
on their nodes' launchers, the pods' logs copied there from their nodes, and the pure helpers (a pod's bundle, the
request check). It starts nothing and never talks to Ray.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuaas.runtimes.base import PodSpec

NAMESPACE = "gpuaas"  # the Ray namespace of gpuaas's named launchers and groups
LOST_EXIT_CODE = 137  # a pod whose launcher (or node) died: killed, as Kubernetes reports it
_MIN_CPU = 0.001  # a bundle needs one resource above zero


@dataclass(slots=True)
class RayPod:
    spec: PodSpec
    bundle: int  # its index in the workload's placement group
    token: str  # GPUAAS_POD_UID of every attempt; with ``restarts``, the actor's name
    restarts: int = 0
    phase: str = "Pending"  # Pending, Running, Terminating, Succeeded, Failed
    pid: int | None = None
    node: str = ""
    gpus: tuple[str, ...] = ()
    exit_code: int | None = None
    gone: bool = False
    node_id: str = ""  # the Ray node of the current attempt, once its lease answered
    lease: Any = None  # the ObjectRef of its outstanding ``lease`` task (placing it)
    placing: bool = False  # no lease: waiting for its group to be placed (a pod with no GPU)
    start: Any = None  # the ObjectRef of its launcher's ``start`` answer

    @property
    def attempt(self) -> str:
        """The current attempt's name on its node's launcher."""
        return f"{self.token}-{self.restarts}"


@dataclass(slots=True)
class RayRun:
    key: str
    restart_count: int
    backoff_limit: int
    pods: dict[str, RayPod]
    pg: Any = None  # the placement group
    failures: int = 0
    stopping: bool = False
    failing: bool = False
    started: bool = False
    outcome: str = ""

    @property
    def pg_name(self) -> str:
        return pg_name(self.key)


def pg_name(key: str) -> str:
    return f"gpuaas:{key}"


class RunDir:
    """``root/workloads/<ns>/<name>/``: ``run.json`` and ``logs/<pod>.log`` per workload."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def workload_dir(self, key: str) -> Path:
        namespace, _, name = key.partition("/")
        return self.root / "workloads" / namespace / name

    def log_path(self, key: str, pod: str) -> Path:
        return self.workload_dir(key) / "logs" / f"{pod}.log"

    def logged_pods(self, key: str) -> list[str]:
        return sorted(p.stem for p in (self.workload_dir(key) / "logs").glob("*.log"))

    def append_log(self, key: str, pod: str, data: bytes) -> None:
        path = self.log_path(key, pod)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:
            f.write(data)

    def read(self, key: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads((self.workload_dir(key) / "run.json").read_text())
        except (OSError, ValueError):
            return None
        return data

    def records(self) -> Iterator[dict[str, Any]]:
        for path in sorted(self.root.glob("workloads/*/*/run.json")):
            try:
                yield json.loads(path.read_text())
            except (OSError, ValueError):
                continue

    def write(self, run: RayRun) -> None:
        path = self.workload_dir(run.key) / "run.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(to_record(run), sort_keys=True))
        tmp.replace(path)


def to_record(run: RayRun) -> dict[str, Any]:
    return {
        "key": run.key,
        "restartCount": run.restart_count,
        "backoffLimit": run.backoff_limit,
        "failures": run.failures,
        "stopping": run.stopping,
        "failing": run.failing,
        "outcome": run.outcome,
        "pods": [
            {
                "spec": {
                    k: v
                    for k, v in asdict(p.spec).items()
                    if k not in ("node_selector", "tolerations")  # the group keeps them
                },
                "bundle": p.bundle,
                "token": p.token,
                "restarts": p.restarts,
                "gone": p.gone,
                "nodeId": p.node_id,
                "exitCode": p.exit_code,
                "phase": p.phase,
            }
            for p in run.pods.values()
        ],
    }


def from_record(record: dict[str, Any]) -> RayRun:
    """A run as recorded, without its actors and placement group (the caller finds them)."""
    pods: dict[str, RayPod] = {}
    for item in record["pods"]:
        raw = item["spec"]
        spec = PodSpec(
            **{
                **raw,
                "command": tuple(raw["command"]),
                "args": tuple(raw["args"]),
                "env": tuple((str(k), str(v)) for k, v in raw["env"]),
            }
        )
        pod = RayPod(spec, int(item["bundle"]), str(item["token"]), int(item["restarts"]))
        pod.gone, pod.exit_code = bool(item["gone"]), item.get("exitCode")
        pod.phase = str(item.get("phase", "Pending"))
        pod.node_id = str(item.get("nodeId", ""))
        pods[spec.name] = pod
    run = RayRun(record["key"], int(record["restartCount"]), int(record["backoffLimit"]), pods)
    run.failures = int(record["failures"])
    run.stopping, run.failing = bool(record["stopping"]), bool(record["failing"])
    run.outcome = str(record.get("outcome", ""))
    run.started = all(p.phase != "Pending" for p in pods.values())
    return run


def bundle(spec: PodSpec) -> dict[str, float]:
    """The pod's Ray resources: CPUs, GPUs and memory as Kueue admitted them."""
    out: dict[str, float] = {"CPU": max(spec.cpu_millis / 1000, _MIN_CPU)}
    if spec.gpus:
        out["GPU"] = float(spec.gpus)
    if spec.memory_bytes:
        out["memory"] = float(spec.memory_bytes)
    return out


def lines(data: bytes, pod: str, count: int) -> Iterator[str]:
    for line in data.decode(errors="replace").splitlines():
        yield f"[{pod}] {line}" if count > 1 else line


__all__ = [
    "LOST_EXIT_CODE",
    "NAMESPACE",
    "RayPod",
    "RayRun",
    "RunDir",
    "bundle",
    "from_record",
    "lines",
    "pg_name",
    "to_record",
]
