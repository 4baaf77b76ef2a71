"""The idle ``Stop`` of a Notebook: the culler's annotation, its Workload gone, the GPU free."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.core.manifest_notebook import STOPPED_ANNOTATION
from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import NotFound
from gpuaas.engine.notebook_stop import stop_notebook
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND, NOTEBOOK, WORKLOAD

GPU = "nvidia.com/gpu"
SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ds"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
         {"name": "l4", "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "q", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
]  # fmt: skip


def notebook(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {"name": name, "namespace": "ds", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": name, "image": "x", "resources": {"requests": {GPU: 1}}}]}}},
    }  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    e = Engine(store)
    try:
        for doc in SETUP:
            kind = BY_KIND[doc["kind"]]
            e.create(kind, doc["metadata"].get("namespace"), doc)
        yield e
    finally:
        e.close()
        store.close()


def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.02)


def test_stop_annotates_the_notebook_and_frees_the_gpu(engine: Engine) -> None:
    engine.create(NOTEBOOK, "ds", notebook("idle"))
    engine.create(NOTEBOOK, "ds", notebook("waiting"))
    view = engine.workload("ds/idle")
    assert view is not None and view.admission is not None
    assert engine.workload("ds/waiting").admission is None  # type: ignore[union-attr]
    assert stop_notebook(engine, view, "GPU 0 idle for 600s", 1000.0)

    def gone() -> bool:
        try:
            engine.get(WORKLOAD, "ds", "idle")
        except NotFound:
            return True
        return False

    _until(gone)
    annotations = engine.get(NOTEBOOK, "ds", "idle")["metadata"]["annotations"]
    assert STOPPED_ANNOTATION in annotations

    def admitted() -> bool:  # Kueue's 1 s requeue batch runs out on the wall clock
        engine.tick()
        return engine.workload("ds/waiting").admission is not None  # type: ignore[union-attr]

    _until(admitted)


def test_stop_declines_a_workload_no_notebook_owns(engine: Engine) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ds", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}  # fmt: skip
    engine.create(BY_KIND["Job"], "ds", job)
    view = engine.workload("ds/j")
    assert view is not None
    assert not stop_notebook(engine, view, "idle", 1.0)
