"""A Job's shown status is computed on read (``ReadModel._job_shown``), so a list of Jobs reads
every stored Job: each one's document must be decoded once, not once per look at it. When a
MultiKueue hub listed each worker's Jobs every second, a second decode was most of what that
list cost the worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.store import compact, open_store
from gpuaas.vocab.kinds import BY_KIND, KINDS

NS, RF, CQ, LQ = (BY_KIND[k] for k in ("Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"))
JOB = next(k for k in KINDS if k.kind == "Job" and k.group == "batch")


def _job(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1"}}}]}}}}  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    store = open_store(f"sqlite:///{tmp_path / 'db'}")
    e = Engine(store)
    e.create(NS, None, {"metadata": {"name": "ns"}})
    e.create(RF, None, {"metadata": {"name": "rf"}})
    e.create(CQ, None, {"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {},
             "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": 2}]}]}]}})  # fmt: skip
    e.create(LQ, "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}})
    try:
        yield e
    finally:
        e.close()
        store.close()


def test_a_job_list_decodes_each_job_once(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b", "c"):  # two fit the quota, one waits: both kinds of shown status
        engine.create(JOB, "ns", _job(name))
    decoded: list[str] = []
    real = compact.decode

    def counting(gk: str, packed: Any) -> Any:
        if gk == JOB.gk:
            decoded.append(gk)
        return real(gk, packed)

    monkeypatch.setattr(compact, "decode", counting)
    listed, _ = engine.list_objects(JOB)
    docs = list(listed)
    assert [d["metadata"]["name"] for d in docs] == ["a", "b", "c"]
    assert [d["status"]["active"] for d in docs] == [0, 0, 0]
    assert len(decoded) <= len(docs)
