"""What the local runtime remembers on disk, so a restarted server can find its pods again.

This module owns the runtime directory's layout and its records: one ``workload.json`` per
workload (restart count, backoff state, whether a stop is under way) and one JSON file per live
pod (pid, process group, start time, GPUs, a unique token in the pod's environment). Files are
written whole and renamed into place, so a crash never leaves half a record. It starts and
signals nothing; ``runtimes.local`` decides what the records mean.

Layout: ``<root>/workloads/<namespace>/<name>/{workload.json, pods/<pod>.json, pods/<pod>.exit,
logs/<pod>.log}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from gpuaas.runtimes.base import PodSpec


@dataclass(slots=True)
class PodRecord:
    spec: PodSpec
    gpus: tuple[int, ...]
    token: str
    pid: int | None = None  # None between writing the record and spawning
    pgid: int | None = None
    start_time: float = 0.0
    restarts: int = 0
    cgroup: str | None = None
    kill_at: float | None = None  # wall time of SIGKILL once SIGTERM was sent

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodRecord:
        spec = dict(data["spec"])
        for name in ("command", "args"):
            spec[name] = tuple(spec[name])
        spec["env"] = tuple((str(k), str(v)) for k, v in spec["env"])
        return cls(
            spec=PodSpec(**spec),
            gpus=tuple(data["gpus"]),
            token=data["token"],
            pid=data.get("pid"),
            pgid=data.get("pgid"),
            start_time=float(data.get("start_time", 0.0)),
            restarts=int(data.get("restarts", 0)),
            cgroup=data.get("cgroup"),
            kill_at=data.get("kill_at"),
        )


@dataclass(slots=True)
class WorkloadRecord:
    key: str
    restart_count: int
    backoff_limit: int
    failures: int = 0
    stopping: bool = False
    failing: bool = False
    outcome: str = ""  # Succeeded, Failed, Stopped once every pod is gone
    pods: list[str] = field(default_factory=list)


class RuntimeDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "workloads").mkdir(parents=True, exist_ok=True)

    def workload_dir(self, key: str) -> Path:
        namespace, name = key.split("/", 1)
        return self.root / "workloads" / namespace / name

    def pods_dir(self, key: str) -> Path:
        return self.workload_dir(key) / "pods"

    def logs_dir(self, key: str) -> Path:
        return self.workload_dir(key) / "logs"

    def log_path(self, key: str, pod: str) -> Path:
        return self.logs_dir(key) / f"{pod}.log"

    def exit_path(self, key: str, pod: str) -> Path:
        return self.pods_dir(key) / f"{pod}.exit"

    def workload_keys(self) -> list[str]:
        base = self.root / "workloads"
        return sorted(f"{ns.name}/{wl.name}" for ns in base.iterdir() for wl in ns.iterdir())

    def read_workload(self, key: str) -> WorkloadRecord | None:
        data = _read_json(self.workload_dir(key) / "workload.json")
        return None if data is None else WorkloadRecord(**data)

    def write_workload(self, record: WorkloadRecord) -> None:
        _write_json(self.workload_dir(record.key) / "workload.json", record)

    def read_pods(self, key: str) -> list[PodRecord]:
        pods_dir = self.pods_dir(key)
        if not pods_dir.is_dir():
            return []
        records = []
        for path in sorted(pods_dir.glob("*.json")):
            data = _read_json(path)
            if data is not None:
                records.append(PodRecord.from_json(data))
        return records

    def write_pod(self, key: str, record: PodRecord) -> None:
        _write_json(self.pods_dir(key) / f"{record.spec.name}.json", record)

    def remove_pod(self, key: str, pod: str) -> None:
        for path in (self.pods_dir(key) / f"{pod}.json", self.exit_path(key, pod)):
            path.unlink(missing_ok=True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_ENCODE = msgspec.json.Encoder().encode  # dataclasses as JSON objects, as ``asdict`` gave them


def _write_json(path: Path, record: object) -> None:
    """Write whole, then rename into place (a crash never leaves half a record). A pod's start
    writes three records: the directory is made only when missing (a ``mkdir`` per write before)
    and msgspec encodes the dataclass (``asdict`` copied it deeply first)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
    try:
        data = memoryview(_ENCODE(record))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)
