"""Where the local runtime keeps its records: in memory (``/dev/shm``), its pods' files on disk.

Pod and workload records describe live processes, so they need to outlive a server crash only;
logs and workbench homes are the tenants' and stay in the data directory.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from runtime_helpers import MakeRuntime, sh, wait_for

from gpuaas.runtimes.base import EventKind
from gpuaas.runtimes.podstate import RuntimeDir, volatile_records

SHM = Path("/dev/shm")
needs_shm = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")


@needs_shm
def test_records_go_to_memory_and_logs_stay_on_disk(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    root = tmp_path / "rt"
    runtime = make_runtime(root=root)
    runtime.start("ns/a", [sh("echo hello; sleep 30", name="a-0")])
    records = volatile_records(root)
    assert records.parent == SHM / f"gpuaas-{os.getuid()}"
    assert (records / "workloads/ns/a/workload.json").is_file()
    assert (records / "workloads/ns/a/pods/a-0.json").is_file()
    assert not list(root.rglob("*.json"))  # no record on disk
    deadline = time.monotonic() + 5
    while "".join(runtime.logs("ns/a")) != "hello\n" and time.monotonic() < deadline:
        time.sleep(0.02)
    # one file per pod on disk, named after its workload in its namespace's directory
    assert (root / "logs/ns/a_a-0.log").read_text() == "hello\n"
    assert not (root / "workloads/ns/a").exists()  # a Job keeps no other file on disk
    assert sorted(p.name for p in (root / "logs").rglob("*")) == ["a_a-0.log", "ns"]
    # the same directory always maps to the same records, another one elsewhere
    assert volatile_records(root) == records != volatile_records(tmp_path / "other")
    runtime.stop("ns/a", 0)
    wait_for(runtime, EventKind.STOPPED, "ns/a")
    runtime.forget("ns/a")
    assert not (records / "workloads/ns/a").exists()
    assert not (root / "logs/ns/a_a-0.log").exists()
    runtime.shutdown(grace_seconds=0)
    assert not records.exists()  # nothing left in memory once no workload has records


def test_a_shared_directory_is_never_used(tmp_path: Path) -> None:
    """A directory another user could write (or a symlink to one) never takes the records."""
    shm, root = tmp_path / "shm", tmp_path / "rt"
    shm.mkdir()
    mine = shm / f"gpuaas-{os.getuid()}"
    mine.mkdir()
    os.chmod(mine, 0o777)
    assert volatile_records(root, shm) == root
    mine.rmdir()
    mine.symlink_to(tmp_path)
    assert volatile_records(root, shm) == root
    mine.unlink()
    assert volatile_records(root, shm).parent == mine
    assert (mine.stat().st_mode & 0o777) == 0o700
    assert volatile_records(root, tmp_path / "missing") == root


def test_records_in_the_runtime_directory_when_asked(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    root = tmp_path / "rt"
    runtime = make_runtime(root=root, records=root)
    runtime.start("ns/a", [sh("sleep 30", name="a-0")])
    assert (root / "workloads/ns/a/pods/a-0.json").is_file()
    assert RuntimeDir(root).pods_dir("ns/a") == root / "workloads/ns/a/pods"


def test_records_of_a_deleted_directory_are_pruned(tmp_path: Path) -> None:
    """Records whose runtime directory is gone (a deleted data directory) are removed when
    another runtime starts beside them; those of a directory that exists are kept."""
    shm = tmp_path / "shm"
    shm.mkdir()
    kept, gone, new = tmp_path / "kept", tmp_path / "gone", tmp_path / "new"
    assert volatile_records(kept, shm).parent == shm / f"gpuaas-{os.getuid()}"
    for root in (kept, gone):
        records = RuntimeDir(root, volatile_records(root, shm)).records_dir("ns/a")
        records.mkdir(parents=True)
        (records / "workload.json").write_text("{}")
    gone_records = volatile_records(gone, shm)
    assert gone_records.is_dir()
    for path in sorted(gone.rglob("*"), reverse=True):
        path.rmdir()
    gone.rmdir()
    RuntimeDir(new, volatile_records(new, shm))
    assert not gone_records.exists()
    assert (volatile_records(kept, shm) / "workloads/ns/a/workload.json").is_file()
    assert (volatile_records(new, shm) / "workloads").is_dir()


@needs_shm
def test_a_finished_workload_keeps_its_log_and_no_record(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """Succeeded or failed, nothing reads a workload's records again: they go, its log stays.
    A stopped one keeps its record, whose restart count its next start reads."""
    root = tmp_path / "rt"
    runtime = make_runtime(root=root)
    records = volatile_records(root) / "workloads/ns"
    runtime.start("ns/ok", [sh("echo done", name="ok-0")])
    runtime.start("ns/bad", [sh("exit 3", name="bad-0")], backoff_limit=0)
    runtime.start("ns/stopped", [sh("sleep 30", name="stopped-0")])
    ended: set[tuple[EventKind, str]] = set()
    deadline = time.monotonic() + 10
    while len(ended) < 2 and time.monotonic() < deadline:
        ended |= {(e.kind, e.workload) for e in runtime.poll()}
        ended &= {(EventKind.SUCCEEDED, "ns/ok"), (EventKind.FAILED, "ns/bad")}
        time.sleep(0.01)
    assert ended == {(EventKind.SUCCEEDED, "ns/ok"), (EventKind.FAILED, "ns/bad")}
    runtime.stop("ns/stopped", 0)
    wait_for(runtime, EventKind.STOPPED, "ns/stopped")
    assert not (records / "ok").exists() and not (records / "bad").exists()
    assert (root / "logs/ns/ok_ok-0.log").read_text() == "done\n"
    assert (records / "stopped/workload.json").is_file()
    runtime.start("ns/stopped", [sh("echo $GPUAAS_RESTART_COUNT", name="stopped-0")])
    wait_for(runtime, EventKind.SUCCEEDED, "ns/stopped")
    assert "".join(runtime.logs("ns/stopped")).splitlines()[-1] == "1"


def test_the_older_layout_moves_to_this_one(tmp_path: Path) -> None:
    """A server before 2026-12-07 kept records and logs in the workload directory: they move, so
    a pod left running by its crash is adopted and its log still read."""
    shm, root = tmp_path / "shm", tmp_path / "rt"
    shm.mkdir()
    old = root / "workloads/ns/a"
    (old / "pods").mkdir(parents=True)
    (old / "logs").mkdir()
    (old / "workload.json").write_text('{"key": "ns/a"}')
    (old / "pods/a-0.json").write_text("{}")
    (old / "logs/a-0.log").write_text("hello\n")
    (root / "workloads/ns/bench/home").mkdir(parents=True)  # a workbench's home stays
    (root / "workloads/ns/ray/logs").mkdir(parents=True)  # the Ray runtime's: not moved
    (root / "workloads/ns/ray/run.json").write_text("{}")
    rdir = RuntimeDir(root, volatile_records(root, shm))
    assert rdir.records != root
    assert (rdir.records_dir("ns/a") / "workload.json").read_text() == '{"key": "ns/a"}'
    assert (rdir.pods_dir("ns/a") / "a-0.json").is_file()
    assert rdir.log_path("ns/a", "a-0").read_text() == "hello\n"
    assert not old.exists() and (root / "workloads/ns/bench/home").is_dir()
    assert (root / "workloads/ns/ray/logs").is_dir() and not rdir.logged_pods("ns/ray")
    assert rdir.workload_keys() == ["ns/a"]


def test_logs_of_the_layout_before_flat_names_move_to_them(tmp_path: Path) -> None:
    """A server of 2026-12-07 before the flat names kept ``logs/NS/NAME/POD.log``: each log
    moves to ``logs/NS/NAME_POD.log`` and is read as before."""
    root = tmp_path / "rt"
    (root / "logs/ns/a").mkdir(parents=True)
    (root / "logs/ns/a/a-0.log").write_text("zero\n")
    (root / "logs/ns/a/a-1.log").write_text("one\n")
    rdir = RuntimeDir(root)
    assert rdir.logged_pods("ns/a") == ["a-0", "a-1"]
    assert rdir.log_path("ns/a", "a-1").read_text() == "one\n"
    assert sorted(p.name for p in (root / "logs/ns").iterdir()) == ["a_a-0.log", "a_a-1.log"]


def test_a_workloads_logs_are_its_own_beside_names_that_share_a_prefix(tmp_path: Path) -> None:
    """``a``'s logs are ``a_*``: those of ``a-b`` and ``ab`` are neither listed nor removed
    with it."""
    root = tmp_path / "rt"
    rdir = RuntimeDir(root)
    for key, pod in (("ns/a", "a-0"), ("ns/a-b", "a-b-0"), ("ns/ab", "ab-0"), ("other/a", "a-0")):
        path = rdir.log_path(key, pod)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(key)
    assert rdir.logged_pods("ns/a") == ["a-0"]
    assert rdir.logged_pods("ns/a-b") == ["a-b-0"]
    rdir.remove_workload("ns/a")
    assert rdir.logged_pods("ns/a") == []
    assert rdir.logged_pods("ns/a-b") == ["a-b-0"] and rdir.logged_pods("ns/ab") == ["ab-0"]
    assert rdir.log_path("other/a", "a-0").read_text() == "other/a"


def test_a_runtime_that_did_not_see_a_workload_end_still_removes_its_logs(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """The runtime that ran a workload removes its logs by the pod names it kept; a later one
    (after a restart) finds them in the namespace's log directory, and leaves a neighbour's."""
    root = tmp_path / "rt"
    first = make_runtime(root=root)
    first.start("ns/a", [sh("echo a", name="a-0"), sh("echo b", name="a-1")])
    first.start("ns/ab", [sh("echo c", name="ab-0")])
    ended: set[str] = set()
    deadline = time.monotonic() + 10
    while ended != {"ns/a", "ns/ab"}:
        assert time.monotonic() < deadline, ended
        ended |= {e.workload for e in first.poll() if e.kind is EventKind.SUCCEEDED}
        time.sleep(0.01)
    first.shutdown(grace_seconds=0)
    second = make_runtime(root=root)
    second.forget("ns/a")
    assert sorted(p.name for p in (root / "logs/ns").iterdir()) == ["ab_ab-0.log"]
    assert "".join(second.logs("ns/ab")).strip() == "c"
