"""cgroup v2 limit values and detection; podman/docker command lines (no engine runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.runtimes.base import PodSpec, RuntimeRequestError
from gpuaas.runtimes.container import check_engine, remove_argv, run_argv
from gpuaas.runtimes.limits import cpu_max, detect_limits, memory_max, own_cgroup


@pytest.mark.parametrize(
    ("millis", "want"),
    [(0, "max 100000"), (500, "50000 100000"), (5000, "500000 100000"), (1, "1000 100000")],
)
def test_cpu_max(millis: int, want: str) -> None:
    assert cpu_max(millis) == want


def test_memory_max() -> None:
    assert memory_max(0) == "max" and memory_max(2**30) == str(2**30)


def test_own_cgroup() -> None:
    assert own_cgroup("0::/user.slice/gpuaas.service\n") == "/user.slice/gpuaas.service"
    assert own_cgroup("4:memory:/x\n1:cpu:/\n") is None


def test_no_cgroup_v2_is_reported(tmp_path: Path) -> None:
    limits = detect_limits(root=tmp_path)
    assert not limits.enforced
    assert limits.note == f"limits not enforced: no cgroup v2 hierarchy at {tmp_path} (cgroup v1?)"


def test_missing_controllers_are_reported(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("hugetlb pids\n")
    limits = detect_limits(parent=tmp_path, root=tmp_path)
    assert limits.note.startswith("limits not enforced: controllers ['cpu', 'memory']")


POD = PodSpec(
    "p-0",
    ("python",),
    ("train.py",),
    working_dir="/work",
    cpu_millis=1500,
    memory_bytes=2**30,
    gpus=2,
    image="pytorch:latest",
)


def test_podman_argv() -> None:
    env = {"GPUAAS_POD": "p-0"}
    argv = run_argv("podman", "ns/w", POD, env, ["GPU-a", "GPU-b"])
    assert argv[:7] == [
        "podman",
        "run",
        "--rm",
        "--init",
        "--sig-proxy=true",
        "--name",
        "gpuaas-ns-w-p-0",
    ]
    assert argv[7:9] == ["--env", "GPUAAS_POD=p-0"]
    assert argv[argv.index("--entrypoint") :] == [
        "--entrypoint",
        "python",
        "pytorch:latest",
        "train.py",
    ]
    assert "nvidia.com/gpu=GPU-b" in argv and "1.5" in argv and str(2**30) in argv
    assert remove_argv("podman", "ns/w", "p-0") == ["podman", "rm", "-f", "gpuaas-ns-w-p-0"]


def test_docker_argv_and_missing_image() -> None:
    argv = run_argv("docker", "ns/w", POD, {}, ["GPU-a"])
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-a"'
    with pytest.raises(RuntimeRequestError, match="pod p-0 has no image"):
        run_argv("docker", "ns/w", PodSpec("p-0", ("true",)), {}, [])


def test_unknown_engine() -> None:
    with pytest.raises(RuntimeRequestError, match="not one of"):
        check_engine("lxc")
