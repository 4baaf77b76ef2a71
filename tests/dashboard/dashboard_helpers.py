"""Helpers for the dashboard tests: seed 004 over HTTP, namespace tokens, paths.

Screenshots go to ``test-artifacts/dashboard/`` at the repository root (gitignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml

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
