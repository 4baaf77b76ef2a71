"""``gpuaas get`` as kubectl users reach for it, against a live server: the server's Table
columns, ``-l``, ``--field-selector``, ``-o name|jsonpath``, several kinds at once, ``describe
KIND`` without a name, and ``version``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.api import tables
from gpuaas.api.testing import ServerProcess
from gpuaas.cli.kubectl import build_app
from gpuaas.vocab.kinds import BY_KIND

SEED = Path(__file__).parent / "seed"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    srv = ServerProcess(tmp_path / "data").start()
    try:
        env = {
            "GPUAAS_SERVER": srv.url,
            "GPUAAS_TOKEN": srv.admin_token,
            "GPUAAS_CONFIG": str(tmp_path / "cfg.json"),
        }
        for name in ("setup.yaml", "team-b-job.yaml"):
            assert run(env, "apply", "-f", str(SEED / name))[0] == 0
        yield env
    finally:
        srv.kill()


def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), list(args), env=env)
    return result.exit_code, result.output


def lines(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def test_columns_are_the_servers_table(env: dict[str, str]) -> None:
    """The header is the server Table's priority-0 columns, every column with ``-o wide``."""
    code, out = run(env, "get", "wl", "-A")
    assert code == 0, out
    cols = tables.table(BY_KIND["Workload"], "v1beta2", [])["columnDefinitions"]
    expected = ["NAMESPACE"] + [c["name"].upper() for c in cols if c["priority"] == 0]
    assert out.splitlines()[0].split() == " ".join(expected).split()
    assert lines(out)[1][:4] == ["team-b", "team-b-job", "local-queue", "team-b-cq"]
    code, out = run(env, "get", "cq", "-o", "wide")
    assert lines(out)[0] == ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED",
                             "WORKLOADS"]  # fmt: skip


def test_selectors_and_output_formats(env: dict[str, str]) -> None:
    code, out = run(env, "get", "wl", "-A", "-l", "kueue.x-k8s.io/queue-name=local-queue")
    assert code == 0 and "team-b-job" in out
    code, out = run(env, "get", "wl", "-A", "-l", "x=y")
    assert code == 0 and "No resources found" in out
    code, out = run(env, "get", "cq", "--field-selector", "metadata.name=team-a-cq")
    assert [r[0] for r in lines(out)[1:]] == ["team-a-cq"]
    code, out = run(env, "get", "cq", "--field-selector", "spec.cohort=x")
    assert code == 1 and "not a known field selector" in out
    code, out = run(env, "get", "cq", "-o", "name")
    assert out.split() == [
        "clusterqueue.kueue.x-k8s.io/shared-cq",
        "clusterqueue.kueue.x-k8s.io/team-a-cq",
        "clusterqueue.kueue.x-k8s.io/team-b-cq",
    ]
    code, out = run(env, "get", "job", "-n", "team-b", "-o", "name")
    assert out.split() == ["job.batch/team-b-job"]
    code, out = run(env, "get", "cq", "-o", "jsonpath={.items[*].metadata.name}")
    assert out.split() == ["shared-cq", "team-a-cq", "team-b-cq"]
    code, out = run(env, "get", "cq", "team-a-cq", "-o", "jsonpath={.spec.cohort}")
    assert out.strip() == "team-ab"
    code, out = run(env, "get", "cq", "team-a-cq", "-o", "json")
    assert '"kind": "ClusterQueue"' in out
    code, out = run(env, "get", "cq", "nope")
    assert code == 1 and 'clusterqueues.kueue.x-k8s.io "nope" not found' in out
    code, out = run(env, "get", "cq", "-o", "bogus")
    assert code == 1 and "unknown output format" in out


def test_several_kinds_in_one_get(env: dict[str, str]) -> None:
    code, out = run(env, "get", "cq,lq", "-A")
    assert code == 0, out
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 2
    assert lines(blocks[0])[0][:2] == ["NAME", "COHORT"]
    assert lines(blocks[0])[1][0] == "clusterqueue.kueue.x-k8s.io/shared-cq"
    assert lines(blocks[1])[0][:3] == ["NAMESPACE", "NAME", "CLUSTERQUEUE"]
    assert lines(blocks[1])[1][:2] == ["team-a", "localqueue.kueue.x-k8s.io/local-queue"]
    code, out = run(env, "get", "cq,lq", "-A", "-o", "name")
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq" in out.split()
    assert "localqueue.kueue.x-k8s.io/local-queue" in out.split()


def test_describe_a_kind_and_version(env: dict[str, str]) -> None:
    code, out = run(env, "describe", "cq")
    assert code == 0, out
    names = [line.split()[1] for line in out.splitlines() if line.startswith("Name:")]
    assert names == ["shared-cq", "team-a-cq", "team-b-cq"]
    code, out = run(env, "describe", "wl", "-A")
    assert "team-b-job" in out and "QuotaReserved" in out
    code, out = run(env, "version")
    assert code == 0, out
    assert out.splitlines()[0].startswith("Client Version: gpuaas ")
    assert out.splitlines()[1].startswith("Server Version: v1.32.0+gpuaas.")
