"""The dashboard's Clusters page in a real browser: a hub and a worker joined with its GPU label,
the worker Active with its GPU model, free GPUs and OCM scores, a Placement and the clusters it
chose; a Job taking a GPU on the worker updates the free count and score live."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.api.testing import ServerProcess, create_all
from gpuaas.cli.main import build_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]
G = "cluster.open-cluster-management.io"


def _post(srv: ServerProcess, docs: list[dict[str, Any]]) -> None:
    with srv.client() as c:
        create_all(c, docs)


def _gpu_job(name: str) -> dict[str, Any]:
    container = {"name": "c", "command": ["sleep", "600"],
                 "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"template": {"spec": {"containers": [container],
                                           "restartPolicy": "Never"}}}}  # fmt: skip


def test_clusters_page(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    hub = ServerProcess(tmp_path / "hub").start()
    worker = ServerProcess(
        tmp_path / "w", extra=("--runtime", "local", "--fake-gpus", "3:Tesla-T4")
    )
    try:
        worker.start()
        spoke = resources.files("gpuaas.demos").joinpath("002/addon-spoke.yaml").read_text()
        _post(worker, [d for d in yaml.safe_load_all(spoke) if d])
        env = {"GPUAAS_SERVER": worker.url, "GPUAAS_TOKEN": worker.admin_token,
               "GPUAAS_CONFIG": str(tmp_path / "cli.json")}  # fmt: skip
        args = ["cluster", "join", "--hub", hub.url, "--hub-token", hub.admin_token,
                "--name", "t4-west", "--label", "accelerator=nvidia-tesla-t4"]  # fmt: skip
        result = CliRunner().invoke(build_app(), args, env=env)
        assert result.exit_code == 0, result.output
        _post(hub, [
            {"apiVersion": f"{G}/v1beta2", "kind": "ManagedClusterSetBinding",
             "metadata": {"name": "global", "namespace": "kueue-system"},
             "spec": {"clusterSet": "global"}},
            {"apiVersion": f"{G}/v1beta1", "kind": "Placement",
             "metadata": {"name": "t4", "namespace": "kueue-system"},
             "spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {
                 "matchLabels": {"accelerator": "nvidia-tesla-t4"}}}}]}},
            {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck",
             "metadata": {"name": "t4-check"},
             "spec": {"controllerName": "open-cluster-management.io/placement",
                      "parameters": {"apiGroup": G, "kind": "Placement", "name": "t4"}}},
        ])  # fmt: skip
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(hub.url + "/")
        page.fill("#token", hub.admin_token)
        page.click("#login-submit")
        page.wait_for_selector("#live.on", timeout=10_000)
        page.click('#nav a[data-page="clusters"]')
        row = page.locator('tr[data-cluster="t4-west"]')
        row.locator(".badge.Active").wait_for(timeout=20_000)
        cell = 'document.querySelector(\'tr[data-cluster="t4-west"] td[data-col="{}"]\')'
        page.wait_for_function(f"() => {cell.format('free')}?.textContent.trim() === '3'",
                               timeout=20_000)  # fmt: skip
        assert row.locator('td[data-col="score"]').inner_text().strip() == "-70"
        assert row.locator('td[data-col="gpus"]').inner_text().strip() == "3"
        assert "Tesla-T4" in row.inner_text() and "accelerator=nvidia-tesla-t4" in row.inner_text()
        assert "t4" in row.locator('td[data-col="configs"]').inner_text()
        placement = page.locator('tr[data-placement="kueue-system/t4"]')
        placement.locator(".badge.Satisfied").wait_for(timeout=10_000)
        assert placement.locator('td[data-col="chosen"]').inner_text().strip() == "t4-west"
        _post(worker, [_gpu_job("local-gpu")])
        page.wait_for_function(f"() => {cell.format('free')}?.textContent.trim() === '2'",
                               timeout=20_000)  # fmt: skip
        page.wait_for_function(f"() => {cell.format('score')}?.textContent.trim() === '-80'",
                               timeout=10_000)  # fmt: skip
        page.screenshot(path=str(artifacts / "clusters.png"), full_page=True)
    finally:
        hub.stop()
        worker.stop()
