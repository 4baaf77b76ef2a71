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
