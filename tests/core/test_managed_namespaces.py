"""Kueue's LocalQueueDefaulting and RHOAI's managed-namespace queue label check, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.core import managed_namespaces as mn
from gpuaas.core.manifest_common import ManifestError

MANAGED = {mn.MANAGED_LABEL: "true"}


def doc(kind: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    return {"kind": kind, "metadata": meta}


DEFAULTING = {
    "notebook without queue gets default": ("Notebook", None, True, "default"),
    "job without queue gets default": ("Job", {}, True, "default"),
    "a named queue is kept": ("RayCluster", {mn.QUEUE_LABEL: "mine"}, True, "mine"),
    "no default LocalQueue: unchanged": ("Notebook", None, False, None),
    "a Workload is not a job kind": ("Workload", None, True, None),
}


@pytest.mark.parametrize(
    ("kind", "labels", "exists", "want"), list(DEFAULTING.values()), ids=list(DEFAULTING)
)
def test_local_queue_defaulting(
    kind: str, labels: dict[str, str] | None, exists: bool, want: str | None
) -> None:
    out = mn.default_local_queue(doc(kind, labels), exists)
    assert (out["metadata"].get("labels") or {}).get(mn.QUEUE_LABEL) == want


VALIDATION = {
    "managed notebook without label": ("Notebook", None, MANAGED, "missing required label"),
    "managed raycluster, empty label": (
        "RayCluster",
        {mn.QUEUE_LABEL: ""},
        MANAGED,
        "set but empty",
    ),
    "legacy managed label": ("RayJob", {}, {mn.LEGACY_MANAGED_LABEL: "true"}, "missing"),
    "managed notebook with label": ("Notebook", {mn.QUEUE_LABEL: "q"}, MANAGED, None),
    "unmanaged namespace": ("Notebook", None, {}, None),
    "managed=false": ("Notebook", None, {mn.MANAGED_LABEL: "false"}, None),
    "a Job is not checked by RHOAI": ("Job", None, MANAGED, None),
}


@pytest.mark.parametrize(
    ("kind", "labels", "ns_labels", "problem"), list(VALIDATION.values()), ids=list(VALIDATION)
)
def test_rhoai_queue_label_validation(
    kind: str, labels: dict[str, str] | None, ns_labels: dict[str, str], problem: str | None
) -> None:
    if problem is None:
        mn.check_queue_label(doc(kind, labels), ns_labels)
        return
    with pytest.raises(ManifestError) as err:
        mn.check_queue_label(doc(kind, labels), ns_labels)
    assert problem in str(err.value)
    assert "Kueue label validation failed" in str(err.value)
    assert f"{kind} team/w" in str(err.value)
