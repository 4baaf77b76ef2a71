"""Dashboard fixtures: a real server process, seed 004 applied over HTTP, and headless Chromium.

The browser is Debian's chromium driven by Playwright; without either the browser tests skip
(or fail under GPUAAS_REQUIRE_SERVICES=1) through the shared ``require_service`` policy.
Screenshots go to ``test-artifacts/dashboard/`` at the repository root.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.api.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "004-jobs"
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
CHROMIUM = Path("/usr/bin/chromium")
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
GPUAAS = "/apis/gpuaas.dev/v1alpha1"

_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ResourceFlavor": f"{KUEUE}/resourceflavors",
    "ClusterQueue": f"{KUEUE}/clusterqueues",
    "WorkloadPriorityClass": f"{KUEUE}/workloadpriorityclasses",
    "LocalQueue": f"{KUEUE}/namespaces/{{ns}}/localqueues",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
}


def seed_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def apply_seed(c: httpx.Client, *names: str) -> None:
    """POST every object of the named seed 004 files, in order, as ``kubectl create`` would."""
    for name in names:
        for doc in seed_docs(name):
            path = _PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace"))
            r = c.post(path, json=doc)
            assert r.status_code == 201, f"{doc['kind']} {doc['metadata']['name']}: {r.text}"


def namespace_token(c: httpx.Client, *namespaces: str) -> str:
    r = c.post(f"{GPUAAS}/tokens", json={"namespaces": list(namespaces)})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path / "data")
    try:
        yield srv.start()
    finally:
        srv.kill()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def browser(require_service: Callable[[str, bool, str], None]) -> Iterator[Any]:
    """A headless Chromium (one per test, closed after it)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        require_service("playwright", False, f"cannot import playwright: {exc}")
        raise AssertionError("unreachable") from exc
    require_service(
        "Chromium",
        CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK),
        f"{CHROMIUM} not found (apt-get install -y chromium)",
    )
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            b.close()
