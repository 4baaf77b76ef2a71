"""``gpuaas apply`` and ``gpuaas delete`` with several ``-f`` (files and directories), against a
live server: every file applies, in the order given, and ``delete -f`` removes what they name."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.kubectl import build_app

SEED = Path(__file__).parent / "seed"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    srv = ServerProcess(tmp_path / "data").start()
    try:
        yield {
            "GPUAAS_SERVER": srv.url,
            "GPUAAS_TOKEN": srv.admin_token,
            "GPUAAS_CONFIG": str(tmp_path / "cfg.json"),
            "GPUAAS_INSECURE": "1",
        }
    finally:
        srv.kill()


def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), list(args), env=env)
    return result.exit_code, result.output


def test_apply_several_files_then_delete_them(env: dict[str, str]) -> None:
    setup, job_a, job_b = (str(SEED / f) for f in ("setup.yaml", "team-a-job.yaml",
                                                   "team-b-job.yaml"))  # fmt: skip
    code, out = run(env, "apply", "-f", setup, "-f", job_a, "-f", job_b)
    assert code == 0, out
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq created" in out
    assert "job.batch/team-a-job created" in out and "job.batch/team-b-job created" in out
    code, out = run(env, "apply", "-f", setup, "-f", job_a)
    assert code == 0 and "created" not in out and "team-a-job unchanged" in out
    code, out = run(env, "delete", "-f", job_a, "-f", job_b)
    assert code == 0, out
    assert 'job.batch "team-a-job" deleted' in out and 'job.batch "team-b-job" deleted' in out
    assert "team-a-job" not in run(env, "get", "jobs", "-A")[1]


def test_apply_and_delete_a_directory(env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    shutil.copy(SEED / "setup.yaml", folder / "0-setup.yaml")
    shutil.copy(SEED / "team-a-job.yaml", folder / "1-job.yaml")
    code, out = run(env, "apply", "-f", str(folder))
    assert code == 0 and "job.batch/team-a-job created" in out, out
    code, out = run(env, "delete", "-f", str(folder / "1-job.yaml"), "-f", str(folder))
    assert code == 1  # the job is named twice: the second delete finds nothing
    assert 'job.batch "team-a-job" deleted' in out and "not found" in out


def test_delete_needs_names_or_files(env: dict[str, str]) -> None:
    code, out = run(env, "delete", "cq")
    assert code == 1 and "give KIND NAME... or -f FILE" in out
    code, out = run(env, "delete", "cq", "x", "-f", str(SEED / "setup.yaml"))
    assert code == 1 and "not both" in out
