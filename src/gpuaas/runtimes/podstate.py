"""What the local runtime remembers, so a restarted server can find its pods again, and its logs.

This module owns the runtime directory's layout and its records: one ``workload.json`` per
workload (restart count, backoff state, whether a stop is under way; removed once the workload
succeeds or fails, kept after a stop for the restart count of its next start) and one JSON file
per live pod (pid, process group, start time, GPUs, a unique token in the pod's environment).
Files are written whole and renamed into place, so a crash never leaves half a record. It starts
and signals nothing; ``runtimes.local`` decides what the records mean.

Layout: the records, ``<records>/workloads/<namespace>/<name>/{workload.json, pods/<pod>.json,
pods/<pod>.exit}``; what pods leave behind, ``<root>/logs/<namespace>/<name>_<pod>.log`` and
``<root>/workloads/<namespace>/<name>/{home/, ray/, workbench.json}``.

The records describe live processes, which a reboot ends, so they need to outlive a server crash,
not the machine: like containerd's ``state`` directory (``/run/containerd``, beside its
persistent ``root``), they go to a per-boot memory file system by default (``volatile_records``:
``/dev/shm``), and logs, workbench homes and Ray's files stay in the data directory. On the 2-core
VM a file created on its disk cost 0.3-0.7 ms of kernel CPU against 0.01-0.02 ms in ``/dev/shm``,
and a pod's start made seven of them for its records (the directories, the workload record, the
pod record before and after its spawn), beside the two directories and the file of its log. After
a reboot the records are gone with the pods, so an admitted workload finds no pods and is
requeued (``PodsLost``), as a Kubernetes node's pods are recreated elsewhere.

Logs are flat, one file per pod in its namespace's directory, as kubelet's
``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``: the ``_`` cannot occur in a
Kubernetes name, so ``<name>_`` is exactly one workload's files. A pod's start then allocates
one inode on the data directory's disk, not two (a directory per workload before), and removing
a workload frees one. On the 2-core VM's ext4, which has no journal, the kernel skips inodes
freed in the last minutes when it allocates one (``recently_deleted``), and each skip reads the
inode table: right after a run of 1,000 pods was removed, a directory and a file cost 0.5-1.2 ms
of CPU (``__ext4_new_inode`` was 4 % of the whole machine in ``bench/multicluster.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Sequence
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


def volatile_records(root: Path, shm: Path = Path("/dev/shm")) -> Path:
    """Where the records of the runtime at ``root`` go: ``/dev/shm/gpuaas-UID/<hash of root>``,
    the same for every server on the same directory, so a restarted one finds its pods; ``root``
    itself where no private directory can be had there (no ``/dev/shm``, or another user's)."""
    base = shm / f"gpuaas-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return root
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return root  # a symlink or a directory someone else made: never write records there
    return base / hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


OWNER = "root"  # in a records directory kept apart: the runtime directory it belongs to


def _prune_orphans(records: Path) -> None:
    """Remove the records beside ``records`` whose runtime directory no longer exists (a data
    directory deleted, a test's temporary one): nothing can adopt their pods any more, and they
    would hold memory until the next reboot."""
    for other in records.parent.iterdir():
        try:
            owner = (other / OWNER).read_text()
        except OSError:
            continue
        if other != records and owner and not Path(owner).exists():
            shutil.rmtree(other, ignore_errors=True)


class RuntimeDir:
    def __init__(self, root: Path, records: Path | None = None) -> None:
        self.root = root
        self.records = root if records is None else records
        (root / "workloads").mkdir(parents=True, exist_ok=True)
        (self.records / "workloads").mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.records != root:
            (self.records / OWNER).write_text(str(root.resolve()))
            _prune_orphans(self.records)
        self._move_older_layout()

    def _move_older_layout(self) -> None:
        """Records and logs that a server before 2026-12-07 left in the workload directories
        (``workloads/NS/NAME/{workload.json, pods/, logs/}``) move to where this one keeps them,
        so pods left running by a crash of that server are adopted, and their logs still read."""
        for wdir in (self.root / "workloads").glob("*/*"):
            if not ((wdir / "workload.json").exists() or (wdir / "pods").is_dir()):
                continue  # not the local runtime's (the Ray runtime keeps run.json and logs)
            key = f"{wdir.parent.name}/{wdir.name}"
            self._flatten_logs(key, wdir / "logs")
            moves: list[tuple[Path, Path]] = []
            if self.records != self.root:
                moves += [(wdir / "workload.json", self.records_dir(key) / "workload.json")]
                moves += [(wdir / "pods", self.pods_dir(key))]
            for old, new in moves:
                if old.exists() and not new.exists():
                    new.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(old, new)
            if not any(wdir.iterdir()):
                wdir.rmdir()
        # the layout of the morning of 2026-12-07: logs/NS/NAME/POD.log (a directory entry's
        # own type, not a stat per log file: a namespace may hold thousands)
        for ns in _subdirs(self.root / "logs"):
            for ldir in _subdirs(ns):
                self._flatten_logs(f"{ns.name}/{ldir.name}", ldir)

    def _flatten_logs(self, key: str, old: Path) -> None:
        """Move ``old``'s ``POD.log`` files to ``key``'s flat names, then remove ``old``."""
        if not old.is_dir():
            return
        for log in old.glob("*.log"):
            new = self.log_path(key, log.stem)
            if not new.exists():
                new.parent.mkdir(parents=True, exist_ok=True)
                log.rename(new)
        if not any(old.iterdir()):
            old.rmdir()

    def workload_dir(self, key: str) -> Path:
        """The workload's files that outlive its pods beside its logs: a workbench's home and
        record, Ray's files (made only by what keeps files there)."""
        namespace, name = key.split("/", 1)
        return self.root / "workloads" / namespace / name

    def records_dir(self, key: str) -> Path:
        return _under(self.records, "workloads", *key.split("/", 1))

    def pods_dir(self, key: str) -> Path:
        return _under(self.records, "workloads", *key.split("/", 1), "pods")

    def logs_dir(self, key: str) -> Path:
        """The directory of the logs of ``key``'s namespace (see the module's docstring): beside
        the workload directories, not in them, so a Job's start makes no directory on disk, and
        a workload directory only where a workbench or Ray keeps files there."""
        return self.root / "logs" / key.split("/", 1)[0]

    def log_path(self, key: str, pod: str) -> Path:
        namespace, name = key.split("/", 1)
        return _under(self.root, "logs", namespace, f"{name}_{pod}.log")

    def logged_pods(self, key: str) -> list[str]:
        """The pods of ``key`` that have a log here, by name, sorted."""
        prefix = f"{key.split('/', 1)[1]}_"
        try:
            names = os.listdir(self.logs_dir(key))
        except OSError:
            return []
        return sorted(
            n[len(prefix) : -len(".log")]
            for n in names
            if n.startswith(prefix) and n.endswith(".log") and "_" not in n[len(prefix) :]
        )

    def exit_path(self, key: str, pod: str) -> Path:
        return _under(self.records, "workloads", *key.split("/", 1), "pods", f"{pod}.exit")

    def workload_keys(self) -> list[str]:
        """The workloads with records (those whose pods a restarted server may adopt)."""
        base = self.records / "workloads"
        return sorted(f"{ns.name}/{wl.name}" for ns in base.iterdir() for wl in ns.iterdir())

    def read_workload(self, key: str) -> WorkloadRecord | None:
        data = _read_json(self.records_dir(key) / "workload.json")
        return None if data is None else WorkloadRecord(**data)

    def write_workload(self, record: WorkloadRecord) -> None:
        _write_json(self.records_dir(record.key) / "workload.json", record)

    def remove_records(self, key: str) -> None:
        _remove_tree(self.records_dir(key))

    def remove_workload(self, key: str, pods: Sequence[str] | None = None) -> None:
        """Its records and its files. ``pods``: the names of its pods' logs where the caller
        knows them; else they are read from its namespace's log directory."""
        for pod in self.logged_pods(key) if pods is None else pods:
            self.log_path(key, pod).unlink(missing_ok=True)
        for base in dict.fromkeys((self.records_dir(key), self.workload_dir(key))):
            _remove_tree(base)

    def close(self) -> None:
        """Remove the records' directory once no workload has records (a server stopped with
        none running leaves nothing in memory)."""
        if self.records == self.root:
            return
        base = self.records / "workloads"
        try:
            for ns in list(base.iterdir()):
                ns.rmdir()  # raises while a workload's records remain
            base.rmdir()
            (self.records / OWNER).unlink(missing_ok=True)
            self.records.rmdir()
        except OSError:
            pass

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
        _write_json(os.path.join(self.pods_dir(key), f"{record.spec.name}.json"), record)

    def remove_pod(self, key: str, pod: str) -> None:
        for path in (self.pods_dir(key) / f"{pod}.json", self.exit_path(key, pod)):
            path.unlink(missing_ok=True)


@functools.lru_cache(maxsize=4096)
def _under(base: Path, *parts: str) -> Path:
    """``base`` joined with ``parts``, remembered: a pod's start and each change of its record
    built the same directories again, and pathlib's parsing of each join was 3 % of a
    MultiKueue worker's CPU with 300 pods starting."""
    return base.joinpath(*parts)


def _subdirs(base: Path) -> list[Path]:
    """The directories in ``base`` (none if it is missing), told by their directory entries."""
    try:
        with os.scandir(base) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _remove_tree(base: Path) -> None:
    """``base`` and what it holds, bottom up (gone already is fine)."""
    for path in sorted(base.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    if base.exists():
        base.rmdir()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_ENCODE = msgspec.json.Encoder().encode  # dataclasses as JSON objects, as ``asdict`` gave them


def _write_json(path: str | Path, record: object) -> None:
    """Write whole, then rename into place (a crash never leaves half a record). A pod's start
    writes three records: the directory is made only when missing (a ``mkdir`` per write before)
    and msgspec encodes the dataclass (``asdict`` copied it deeply first)."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
    try:
        data = memoryview(_ENCODE(record))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)
