"""The server's collector settings (gpuaas.gc_policy): thresholds set and the start-up frozen."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gpuaas import gc_policy


@pytest.fixture
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored")
def test_apply_sets_the_thresholds_and_freezes_what_exists() -> None:
    kept = [{"doc": i} for i in range(1000)]  # tracked containers alive at start-up
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    gc_policy.apply()
    assert gc.get_threshold() == (gc_policy.YOUNG, gc_policy.MIDDLE, gc_policy.OLD)
    assert gc.get_freeze_count() >= len(kept)
    # a frozen object is no longer in any generation the collector walks
    assert not any(o is kept[0] for o in gc.get_objects())


@pytest.mark.usefixtures("restored")
def test_a_cycle_made_after_apply_is_still_collected() -> None:
    gc_policy.apply()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_pause_log_counts_each_generation_and_logs_full_collections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    pauses = gc_policy.PauseLog(clock, every=1.0)
    caplog.set_level("WARNING", logger="gpuaas.gc_policy")
    for gen, start, took in ((0, 0.1, 0.002), (0, 0.2, 0.004), (1, 0.3, 0.01), (2, 0.9, 0.3)):
        clock.now = start
        pauses.callback("start", {"generation": gen})
        clock.now = start + took
        pauses.callback("stop", {"generation": gen, "collected": 7, "uncollectable": 0})
    assert pauses.count == [2, 1, 1]
    assert pauses.summary() == (
        "gen0 2 6.0 ms (max 4.0 ms), gen1 1 10.0 ms (max 10.0 ms), gen2 1 300.0 ms (max 300.0 ms)"
    )
    # the full collection as it ended, then the totals: a second has passed (at 1.2 s)
    assert [r.getMessage() for r in caplog.records] == [
        "gc: full collection 300.0 ms, 7 collected",
        "gc: " + pauses.summary(),
    ]


@pytest.mark.usefixtures("restored")
def test_apply_times_collections_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    before = list(gc.callbacks)
    try:
        monkeypatch.delenv(gc_policy.LOG_ENV, raising=False)
        gc_policy.apply()
        assert gc.callbacks == before
        monkeypatch.setenv(gc_policy.LOG_ENV, "1")
        gc_policy.apply()
        (added,) = [c for c in gc.callbacks if c not in before]
        log = added.__self__
        assert isinstance(log, gc_policy.PauseLog)
        gc.collect()
        assert log.count[2] >= 1
    finally:
        gc.callbacks[:] = before
