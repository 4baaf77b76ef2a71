"""A MultiKueue pass does not wait for its own commit, but no remote write leaves before what
the last pass wrote on the hub is stored: a finish lost in a crash must never find its copies
already removed (the workload would be Ready with no copy, and run again)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from gpuaas.engine.engine import Engine
from gpuaas.engine.errors import Unavailable
from gpuaas.engine.multikueue import writes
from gpuaas.engine.multikueue.controller import MultiKueueController
from gpuaas.engine.multikueue.remote import RemoteClient, Target
from gpuaas.engine.multikueue.workers import WorkerView
from gpuaas.store.base import StoreError
from gpuaas.store.groupcommit import Ack
from gpuaas.vocab.kinds import BY_KIND

JOB = BY_KIND["Job"]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MultiKueueController, list[str]]]:
    c = MultiKueueController()
    submitted: list[str] = []
    monkeypatch.setattr(
        c._in_flight, "submit_many", lambda ops: submitted.extend(o.key for o in ops) or ops
    )
    client = RemoteClient(Target("http://127.0.0.1:1", "", None))
    view = WorkerView("w1", client, True, "Active", "Connected", None, {}, {}, {})
    c._remove(view, "ns/finished")  # planned by a pass on the hub's unsaved finish
    try:
        yield c, submitted
    finally:
        client.close()
        c.close()


def test_a_pass_applies_its_updates_without_waiting_for_the_store(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.create(BY_KIND["Namespace"], None, {"metadata": {"name": "ns"}})
    containers = [{"name": "c", "command": ["true"]}]
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": containers}}}}
    engine.create(JOB, "ns", job)
    held = Ack()  # the store's answer, given by the test
    monkeypatch.setattr(engine.committer, "submit", lambda writes, after=None, **kw: held)
    mirrored = writes.StatusWrite(JOB, "ns", "j", {"active": 1})
    applied, ack = writes.apply_workloads(engine, [], [mirrored])  # returns: nothing waited for
    assert applied == [] and ack is held and not held.done()
    stored = engine.objects.get(engine.key_of(JOB, "ns", "j"))
    assert stored is not None and stored.doc["status"] == {"active": 1}  # applied, not stored


def test_remote_writes_wait_until_the_last_pass_is_stored(
    engine: Engine, started: tuple[MultiKueueController, list[str]]
) -> None:
    c, submitted = started
    last = c._unsaved = Ack()  # the last pass's commit, not stored yet
    flushed = threading.Thread(target=c._flush, args=(engine,))
    flushed.start()
    time.sleep(0.2)
    assert submitted == []  # the removal waits for the finish to be stored
    last.set_result()
    flushed.join(timeout=5)
    assert submitted == ["ns/finished"]


def test_a_commit_that_failed_sends_nothing_and_mirrors_again(
    engine: Engine, started: tuple[MultiKueueController, list[str]]
) -> None:
    c, submitted = started
    c._mirrored["uid"] = {"active": 1}
    failed = Ack()
    failed.set_exception(StoreError("disk full"))
    c._unsaved = failed
    with pytest.raises(Unavailable):
        c._flush(engine)
    assert submitted == [] and c._mirrored == {} and c._unsaved is None
    c._flush(engine)  # the next pass plans again; nothing is left queued from this one
    assert submitted == []
