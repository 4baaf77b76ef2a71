"""A Notebook's pod on the host: JupyterLab's command, the workbench's port kept across calls."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpuaas.core.manifests import parse_object
from gpuaas.core.objects import Workload
from gpuaas.runtimes import PodSpecError, build_run_plan
from gpuaas.runtimes import workbench as wb


def notebook(command: list[str] | None = None) -> dict[str, object]:
    container: dict[str, object] = {"name": "lab", "image": "jupyter"}
    if command:
        container["command"] = command
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": "lab", "namespace": "ds"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def test_port_is_recorded_and_found_again(tmp_path: Path) -> None:
    first = wb.ensure(tmp_path, "ds", "lab")
    assert first.base_url == "/workbenches/ds/lab/"
    assert wb.ensure(tmp_path, "ds", "lab") == first == wb.load(tmp_path)
    assert wb.load(tmp_path / "elsewhere") is None


def test_a_command_runs_as_given_with_the_kubeflow_env(tmp_path: Path) -> None:
    doc = notebook(["sleep", "60"])
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    bench = wb.Workbench(12345, wb.base_url("ds", "lab"))
    [pod] = build_run_plan(wl, None, doc, workbench=(bench, tmp_path)).pods
    assert pod.argv == ["sleep", "60"]
    assert dict(pod.env)[wb.PREFIX_ENV] == "/workbenches/ds/lab"
    assert dict(pod.env)[wb.PORT_ENV] == "12345"


def test_no_command_runs_jupyterlab_or_says_what_is_missing(tmp_path: Path) -> None:
    doc = notebook()
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    bench = wb.Workbench(12345, wb.base_url("ds", "lab"))
    if importlib.util.find_spec("jupyterlab") is None:
        with pytest.raises(PodSpecError, match=r"gpuaas\[workbench\]"):
            build_run_plan(wl, None, doc, workbench=(bench, tmp_path))
        return
    [pod] = build_run_plan(wl, None, doc, workbench=(bench, tmp_path)).pods
    argv = pod.argv
    assert argv[1:3] == ["-m", "jupyterlab"]
    assert "--ServerApp.port=12345" in argv and "--ServerApp.ip=127.0.0.1" in argv
    assert "--ServerApp.base_url=/workbenches/ds/lab/" in argv
    assert "--IdentityProvider.token=" in argv


def test_without_a_workbench_a_notebook_needs_a_command() -> None:
    doc = notebook()
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    with pytest.raises(PodSpecError, match="no command"):
        build_run_plan(wl, None, doc)
