"""The hub's choice of a worker between sending its Job and recording ``clusterName``: a pass
whose snapshot of the worker predates the Job's answered create keeps the choice, so a copy
admitted on another worker since never gets the Job too (issue 14: never on two workers)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gpuaas.engine.multikueue.controller import MultiKueueController
from gpuaas.engine.multikueue.remote import JOBS, WORKLOADS
from gpuaas.engine.multikueue.workers import Worker

KEY = "default/all-at-once"
HOLDS_QUOTA = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}


@pytest.fixture
def controller() -> Iterator[MultiKueueController]:
    c = MultiKueueController()
    try:
        yield c
    finally:
        c.close()


def test_a_job_answered_after_the_snapshot_keeps_the_choice(
    controller: MultiKueueController,
) -> None:
    w = Worker("b", time.time, lambda _key: None, "hub")
    controller.workers["b"] = w
    w.assume(False, KEY, WORKLOADS, "workloads", {"metadata": {"name": "all-at-once"}})
    before = w.snapshot()  # the pass's snapshot: the copy, no Job yet
    controller._placing[KEY] = "b"  # the Job was sent to "b" by an earlier pass
    # The create is answered now: in the worker's cache, and no longer in flight.
    w.assume(False, KEY, JOBS, "jobs", {"metadata": {"name": "all-at-once"}})
    assert not controller._in_flight.busy("create-job", "b", KEY)
    assert controller._placed(KEY, HOLDS_QUOTA, {"b": before}) == "b"


def test_a_job_that_never_went_drops_the_choice(controller: MultiKueueController) -> None:
    w = Worker("b", time.time, lambda _key: None, "hub")
    controller.workers["b"] = w
    w.assume(False, KEY, WORKLOADS, "workloads", {"metadata": {"name": "all-at-once"}})
    controller._placing[KEY] = "b"  # its create failed: not in flight, not on the worker
    assert controller._placed(KEY, HOLDS_QUOTA, {"b": w.snapshot()}) is None
    assert KEY not in controller._placing
