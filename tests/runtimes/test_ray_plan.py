"""The ``ray start`` command a RayCluster pod with no command gets (pure; Ray is not needed).

Built from seed 003's RayClusters: each pod runs the ``ray_pod`` launcher, then ``ray start`` with
exactly the admitted CPUs, GPUs and memory; ``rayStartParams`` are honoured where they make
sense on one host and refused, with the object and the field, where they cannot be.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.core.manifests import parse_object
from gpuaas.core.objects import Workload
from gpuaas.core.state import Admission, PodSetAssignment
from gpuaas.runtimes.podspecs import PodSpecError, RunPlan, build_run_plan

SEED = Path(__file__).resolve().parents[2] / "examples" / "003-rayclusters"


def _seed(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((SEED / name).read_text()))


def _plan(
    doc: dict[str, Any], tmp_path: Path, admission: Admission | None = None, **kw: Any
) -> RunPlan:
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    ray_bin = tmp_path / "ray"
    ray_bin.touch()
    kw.setdefault("ray_dir", tmp_path / "wl" / "ray")
    return build_run_plan(wl, admission, doc, ray_bin=ray_bin, **kw)


def _ray_args(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


def _launcher_args(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")]


def test_seed_prod_raycluster_gets_kuberays_command(tmp_path: Path) -> None:
    plan = _plan(_seed("team-a-ray-cluster-prod.yaml"), tmp_path)
    assert [(p.name, p.pod_set, p.gpus) for p in plan.pods] == [
        ("raycluster-prod-head-0", "head", 0),
        ("raycluster-prod-gpu-group-0", "gpu-group", 2),
        ("raycluster-prod-gpu-group-1", "gpu-group", 2),
    ]
    head, worker = plan.pods[0].argv, plan.pods[1].argv
    assert _launcher_args(head)[1:4] == ["-m", "gpuaas.runtimes.ray_pod", "head"]
    assert "--dashboard" in _launcher_args(head)
    assert _ray_args(head)[:2] == [str(tmp_path / "ray"), "start"]
    for flag in ("--block", "--head", "--num-cpus=2", "--num-gpus=0", "--memory=8000000000",
                 "--object-store-memory=2400000000", "--include-dashboard=true",
                 "--dashboard-host=127.0.0.1", "--node-ip-address=127.0.0.1",
                 "--disable-usage-stats"):  # fmt: skip
        assert flag in _ray_args(head), flag
    assert _launcher_args(worker)[3] == "worker"
    assert "--head" not in _ray_args(worker) and "--dashboard" not in _launcher_args(worker)
    assert {"--num-cpus=4", "--num-gpus=2", "--memory=8000000000"} <= set(_ray_args(worker))
    # ports are the launcher's to pick at spawn time, never fixed in the plan
    assert not [a for a in _ray_args(head) if a.startswith(("--port", "--dashboard-port"))]
    # one run id for the whole cluster; a temp dir of its own for every node
    runs = {p.argv[p.argv.index("--run") + 1] for p in plan.pods}
    temps = [p.argv[p.argv.index("--temp-dir") + 1] for p in plan.pods]
    assert len(runs) == 1 and len(set(temps)) == 3
    assert all(t.startswith(temps[0]) for t in temps) and len(temps[1]) < 60
    assert ("RAY_USAGE_STATS_ENABLED", "0") in plan.pods[0].env
    assert plan.pods[0].termination_grace_seconds == 30.0
    assert _launcher_args(head)[_launcher_args(head).index("--stop-after") + 1] == "29"


def test_admitted_counts_win_and_each_plan_is_a_new_run(tmp_path: Path) -> None:
    doc = _seed("team-b-ray-cluster-dev.yaml")
    admitted = Admission(
        "team-b-cq",
        [PodSetAssignment("head", {}, 1, {}), PodSetAssignment("small-group-test", {}, 1, {})],
    )
    plan = _plan(doc, tmp_path, admitted)
    assert [p.name for p in plan.pods] == [
        "raycluster-dev-head-0",
        "raycluster-dev-small-group-test-0",
    ]
    again = _plan(doc, tmp_path, admitted)
    run = plan.pods[0].argv.index("--run") + 1
    assert plan.pods[0].argv[run] != again.pods[0].argv[run]


def _with(doc: dict[str, Any], *, head: dict[str, Any] | None = None,
          worker: dict[str, Any] | None = None, cpu: str | None = None) -> dict[str, Any]:  # fmt: skip
    doc = copy.deepcopy(doc)
    if head is not None:
        doc["spec"]["headGroupSpec"]["rayStartParams"] = head
    if worker is not None:
        doc["spec"]["workerGroupSpecs"][0]["rayStartParams"] = worker
    if cpu is not None:
        res = doc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]
        res["requests"]["cpu"] = res["limits"]["cpu"] = cpu
    return doc


@pytest.mark.parametrize(
    ("change", "pod", "present", "absent"),
    [
        # the usual head idiom: no tasks on the head
        ({"head": {"num-cpus": "0"}}, 0, ["--num-cpus=0"], ["--num-cpus=2"]),
        # what gpuaas owns on the host is replaced, as KubeRay replaces some of it
        (
            {"head": {"dashboard-host": "0.0.0.0", "block": "true", "port": "6379"}},
            0,
            ["--dashboard-host=127.0.0.1"],
            ["--dashboard-host=0.0.0.0", "--port=6379"],
        ),
        (
            {"head": {"include-dashboard": "false"}},
            0,
            ["--include-dashboard=false"],
            ["--dashboard-host=127.0.0.1", "--dashboard"],
        ),
        (
            {"worker": {"resources": '"{\\"x\\": 1}"', "no-monitor": "true"}},
            1,
            ['--resources="{\\"x\\": 1}"', "--no-monitor"],
            [],
        ),
        (
            {"worker": {"num-gpus": 1, "object-store-memory": "100000000"}},
            1,
            ["--num-gpus=1", "--object-store-memory=100000000"],
            ["--num-gpus=2"],
        ),
        # CPUs are whole Ray CPUs, rounded down, at least one
        ({"cpu": "1500m"}, 1, ["--num-cpus=1"], []),
        ({"cpu": "500m"}, 1, ["--num-cpus=1"], []),
    ],
    ids=[
        "head-num-cpus-0",
        "owned-replaced",
        "no-dashboard",
        "passed-through",
        "lowered",
        "cpu-rounded-down",
        "cpu-at-least-one",
    ],
)
def test_ray_start_params(
    tmp_path: Path, change: dict[str, Any], pod: int, present: list[str], absent: list[str]
) -> None:
    plan = _plan(_with(_seed("team-a-ray-cluster-prod.yaml"), **change), tmp_path)
    argv = plan.pods[pod].argv
    for arg in present:
        assert arg in argv, (arg, argv)
    for arg in absent:
        assert arg not in argv, (arg, argv)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"worker": {"num-gpus": "3"}},
            r"spec.workerGroupSpecs\[0\].rayStartParams.num-gpus: 3 is more than the 2 GPUs",
        ),
        (
            {"head": {"num-cpus": "4"}},
            r"spec.headGroupSpec.rayStartParams.num-cpus: 4 is more than the 2 CPUs",
        ),
        ({"head": {"num-cpus": "two"}}, r"num-cpus: must be a whole number >= 0, got 'two'"),
        (
            {"head": {"redis-shard-ports": "1"}},
            r"spec.headGroupSpec.rayStartParams.redis-shard-ports: not supported",
        ),
        ({"head": {"resources": {"x": 1}}}, r"rayStartParams.resources: must be a string"),
    ],
    ids=["gpus-above-admitted", "cpus-above-admitted", "not-a-number", "unknown", "not-a-string"],
)
def test_bad_ray_start_params_name_object_and_field(
    tmp_path: Path, change: dict[str, Any], match: str
) -> None:
    with pytest.raises(PodSpecError, match=match) as info:
        _plan(_with(_seed("team-a-ray-cluster-prod.yaml"), **change), tmp_path)
    assert "RayCluster team-a/raycluster-prod" in str(info.value)


def test_without_ray_or_its_directory_the_pods_cannot_run(tmp_path: Path) -> None:
    doc = _seed("team-b-ray-cluster-dev.yaml")
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    missing = tmp_path / "no-venv" / "ray"
    with pytest.raises(PodSpecError, match=r"Ray is not installed here .*gpuaas\[ray\]"):
        build_run_plan(wl, None, doc, ray_dir=tmp_path, ray_bin=missing)
    with pytest.raises(PodSpecError, match="no Ray directory"):
        build_run_plan(wl, None, doc)


def test_a_container_command_is_kept(tmp_path: Path) -> None:
    doc = copy.deepcopy(_seed("team-b-ray-cluster-dev.yaml"))
    doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "1"]
    plan = _plan(doc, tmp_path)
    assert plan.pods[0].argv == ["sleep", "1"]
    assert _launcher_args(plan.pods[1].argv)[3] == "worker"


def test_a_temp_dir_too_long_for_rays_sockets_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", "/tmp/" + "x" * 60)
    with pytest.raises(PodSpecError, match=r"too long for its sockets.*TMPDIR"):
        _plan(_seed("team-b-ray-cluster-dev.yaml"), tmp_path)


def _rayjob(**spec: Any) -> dict[str, Any]:
    cluster = _seed("team-b-ray-cluster-dev.yaml")
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "team-b", "labels": cluster["metadata"]["labels"]},
        "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster["spec"], **spec},
    }


def test_a_rayjob_gets_its_cluster_and_a_submitter_of_its_entrypoint(tmp_path: Path) -> None:
    env = "pip: [requests]\nenv_vars: {A: b}\n"
    plan = _plan(
        _rayjob(entrypoint="python run.py --x 1", runtimeEnvYAML=env, entrypointNumGpus=1),
        tmp_path,
    )
    roles = {p.name: p.argv[p.argv.index("gpuaas.runtimes.ray_pod") + 1] for p in plan.pods}
    assert roles == {
        "rj-head-0": "head",
        "rj-small-group-test-0": "worker",
        "rj-small-group-test-1": "worker",
        "rj-submitter-0": "submitter",
    }
    (submitter,) = [p for p in plan.pods if p.name == "rj-submitter-0"]
    tail = list(submitter.argv[submitter.argv.index("--") + 1 :])
    assert tail[1:3] == ["job", "submit"]
    assert '--runtime-env-json={"pip": ["requests"], "env_vars": {"A": "b"}}' in tail
    assert "--entrypoint-num-gpus=1" in tail
    assert tail[-5:] == ["--", "python", "run.py", "--x", "1"]  # split as KubeRay's shell does
    # the cluster's pods run `ray start`, as a RayCluster's do
    (head,) = [p for p in plan.pods if p.name == "rj-head-0"]
    assert "--head" in head.argv and "--block" in head.argv


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "RayJob team-b/rj: spec.entrypoint: required, a command line (a string)"),
        ({"entrypoint": ["python"]}, "spec.entrypoint: required, a command line"),
        ({"entrypoint": "python 'x"}, "RayJob team-b/rj: spec.entrypoint: No closing quotation"),
        (
            {"entrypoint": "x", "head-params": {"include-dashboard": "false"}},
            "headGroupSpec.rayStartParams.include-dashboard: false, but the RayJob's submitter",
        ),
        (
            {"entrypoint": "x", "submissionMode": "HTTPMode"},
            "RayJob team-b/rj: spec.submissionMode: HTTPMode is not run here yet",
        ),
        (
            {"entrypoint": "x", "runtimeEnvYAML": "- a list"},
            "RayJob team-b/rj: spec.runtimeEnvYAML: must be a YAML mapping",
        ),
    ],
)
def test_a_rayjob_that_cannot_be_submitted_is_refused_naming_the_field(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    doc = _rayjob(**{k: v for k, v in spec.items() if k != "head-params"})
    if "head-params" in spec:
        doc["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] = spec["head-params"]
    with pytest.raises(PodSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _plan(doc, tmp_path)
