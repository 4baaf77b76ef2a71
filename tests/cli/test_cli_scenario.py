"""``gpuaas`` command line, in process through typer's runner: arguments, streams, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas import __version__
from gpuaas.cli.main import COMMAND_MODULES, build_app

GOOD = """\
apiVersion: gpuaas.dev/v1alpha1
kind: Scenario
metadata: {name: good}
spec:
  objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: default}}
  - {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta1
    kind: ClusterQueue
    metadata: {name: cq}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: lq, namespace: default}, spec: {clusterQueue: cq}}
  - apiVersion: kueue.x-k8s.io/v1beta1
    kind: ClusterQueue
    metadata: {name: no-flavor-cq}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: missing-flavor, resources: [{name: cpu, nominalQuota: 2}]}]
  steps:
  - at: 0
    apply:
    - apiVersion: batch/v1
      kind: Job
      metadata: {name: j, namespace: default, labels: {kueue.x-k8s.io/queue-name: lq}}
      spec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}], restartPolicy: Never}}}
    expect:
      admitted: [default/j]
"""

FAILING = GOOD.replace("name: good", "name: failing").replace(
    "admitted: [default/j]", "admitted: []"
)
BROKEN = "apiVersion: gpuaas.dev/v1alpha1\nkind: Scenario\nmetadata: {name: broken}\nspec:\n  steps:\n  - {at: 5}\n  - {at: 1}\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in {"good": GOOD, "failing": FAILING, "broken": BROKEN}.items():
        p = tmp_path / f"{name}.yaml"
        p.write_text(text)
        out[name] = p
    return out


runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(build_app(), ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"gpuaas {__version__}"


def test_subcommands_are_registered_from_the_list() -> None:
    result = runner.invoke(build_app(), ["--help"])
    assert result.exit_code == 0
    for _, group, _ in COMMAND_MODULES:
        if group is not None:
            assert group in result.stdout
    for command in ("scenario", "server", "apply", "get", "token"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("names", "code", "lines"),
    [
        (["good"], 0, ["PASS good ({good})", "1 passed, 0 failed"]),
        (
            ["good", "failing"],
            1,
            [
                "PASS good ({good})",
                "FAIL failing ({failing})",
                "    at 0: admitted: expected [], observed ['default/j'] (unexpected default/j)",
            ],
        ),
        (
            ["broken", "good", "failing"],
            2,
            ["ERROR broken ({broken})", "PASS good ({good})", "FAIL failing ({failing})"],
        ),
    ],
)
def test_scenario_run_human(
    files: dict[str, Path], names: list[str], code: int, lines: list[str]
) -> None:
    result = runner.invoke(build_app(), ["scenario", "run", *[str(files[n]) for n in names]])
    assert result.exit_code == code, result.output
    out = result.stdout.splitlines()
    for line in lines:
        assert line.format(**{k: str(v) for k, v in files.items()}) in out
    assert "Traceback" not in result.output
    assert "warning:" not in result.stdout
    assert "warning:" in result.stderr and "missing-flavor" in result.stderr


def test_broken_file_message_names_step_and_field(files: dict[str, Path]) -> None:
    result = runner.invoke(build_app(), ["scenario", "run", str(files["broken"])])
    assert result.exit_code == 2
    assert f"{files['broken']}: scenario 'broken': step 1: at: 1 is earlier" in result.stdout


def test_scenario_run_json(files: dict[str, Path]) -> None:
    result = runner.invoke(
        build_app(),
        ["scenario", "run", "--output", "json", str(files["good"]), str(files["failing"])],
    )
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert (doc["passed"], doc["failed"]) == (1, 1)
    assert [s["name"] for s in doc["scenarios"]] == ["good", "failing"]
    check = doc["scenarios"][1]["checks"][0]
    assert check["observed"]["admitted"]["default/j"] == {
        "clusterQueue": "cq",
        "flavors": {"main": {"cpu": "default"}},
        "count": {"main": 1},
    }


def test_missing_path_and_bad_option(tmp_path: Path) -> None:
    result = runner.invoke(build_app(), ["scenario", "run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "no such file" in result.stdout
    result = runner.invoke(build_app(), ["scenario", "run", "-o", "xml", str(tmp_path)])
    assert result.exit_code == 2  # click's usage error
