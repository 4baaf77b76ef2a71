"""CPU and memory limits for local pods: cgroup v2 where the OS lets us, accounting otherwise.

This module owns deciding whether limits can be enforced and, when they can, one sub-cgroup per
pod with ``cpu.max`` and ``memory.max`` set from the pod's requests (the core keeps requests only,
so they double as limits). It never falls back to ``RLIMIT_AS``, which counts virtual memory and
breaks CUDA and JVM processes that reserve large address ranges; without a writable cgroup v2
tree it reports ``limits not enforced: <reason>`` and the runtime only accounts. The enforcing path
needs a delegated cgroup v2 tree; the machines this was written on run cgroup v1, so it is tested
there only up to the refusal and the file formats.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass(slots=True, frozen=True)
class Limits:
    enforced: bool
    note: str  # "cgroup v2 at ..." or "limits not enforced: <reason>"
    parent: Path | None = None


def cpu_max(cpu_millis: int) -> str:
    """``cpu.max`` for a request in millicores: quota and period in microseconds."""
    if cpu_millis <= 0:
        return f"max {CPU_PERIOD_US}"
    return f"{max(1000, cpu_millis * CPU_PERIOD_US // 1000)} {CPU_PERIOD_US}"


def memory_max(memory_bytes: int) -> str:
    return "max" if memory_bytes <= 0 else str(memory_bytes)


def own_cgroup(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 path from the text of ``/proc/self/cgroup`` (the ``0::`` line)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return None


def detect_limits(parent: Path | None = None, root: Path = CGROUP_ROOT) -> Limits:
    """Prepare ``<parent>/gpuaas`` (parent: our own cgroup by default) or say why not."""
    if not (root / "cgroup.controllers").exists():
        return Limits(False, f"limits not enforced: no cgroup v2 hierarchy at {root} (cgroup v1?)")
    if parent is None:
        try:
            path = own_cgroup(Path("/proc/self/cgroup").read_text())
        except OSError as exc:
            return Limits(False, f"limits not enforced: cannot read /proc/self/cgroup: {exc}")
        if path is None:
            return Limits(False, "limits not enforced: this process is in no cgroup v2 group")
        parent = root / path.lstrip("/")
    available = _read(parent / "cgroup.controllers").split()
    missing = [c for c in ("cpu", "memory") if c not in available]
    if missing:
        return Limits(
            False, f"limits not enforced: controllers {missing} not delegated to {parent}"
        )
    base = parent / "gpuaas"
    try:
        base.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text("+cpu +memory")
        (base / "cgroup.subtree_control").write_text("+cpu +memory")
    except OSError as exc:
        return Limits(False, f"limits not enforced: cannot set up {base}: {exc.strerror or exc}")
    return Limits(True, f"cpu and memory limits enforced with cgroup v2 under {base}", base)


def create_pod_cgroup(limits: Limits, name: str, cpu_millis: int, memory_bytes: int) -> Path | None:
    """A sub-cgroup for one pod attempt; None when limits are not enforced."""
    if not limits.enforced or limits.parent is None:
        return None
    path = limits.parent / name
    path.mkdir(exist_ok=True)
    (path / "cpu.max").write_text(cpu_max(cpu_millis))
    (path / "memory.max").write_text(memory_max(memory_bytes))
    return path


def remove_pod_cgroup(path: Path | None) -> None:
    """Remove an empty pod cgroup (the kernel refuses while processes remain; then keep it)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
