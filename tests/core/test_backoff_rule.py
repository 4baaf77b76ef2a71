"""The requeue back-off and deactivation rule (``core.backoff``), as Kueue's requeuingStrategy.

Kueue waits ``base * 2^(n-1)`` after the n-th back-off eviction, at most ``backoffMaxSeconds``,
and deactivates a workload whose next eviction would exceed ``backoffLimitCount``
(``triggerDeactivation``: ``count + 1 > limit``). Table-driven, no clock.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.core.backoff import BackoffStep, backoff_step, requeue_backoff_seconds


@pytest.mark.parametrize(
    ("count", "base", "maximum", "expected"),
    [
        pytest.param(0, 60, 3600, 0, id="no-eviction-no-wait"),
        pytest.param(1, 60, 3600, 60, id="first-waits-the-base"),
        pytest.param(2, 60, 3600, 120, id="second-doubles"),
        pytest.param(3, 60, 3600, 240, id="third-doubles-again"),
        pytest.param(7, 60, 3600, 3600, id="capped-at-max"),
        pytest.param(2000, 60, 3600, 3600, id="huge-count-no-overflow"),
        pytest.param(3, 10, 25, 25, id="small-cap"),
    ],
)
def test_requeue_backoff_seconds(count: int, base: float, maximum: float, expected: float) -> None:
    assert requeue_backoff_seconds(count, base, maximum) == expected


@pytest.mark.parametrize(
    ("count", "limit", "expected"),
    [
        pytest.param(0, 3, BackoffStep(1, 1000 + 60, False), id="first-requeued-60s"),
        pytest.param(1, 3, BackoffStep(2, 1000 + 120, False), id="second-requeued-120s"),
        pytest.param(2, 3, BackoffStep(3, 1000 + 240, False), id="third-requeued-240s"),
        pytest.param(3, 3, BackoffStep(4, None, True), id="fourth-deactivates"),
        pytest.param(0, 0, BackoffStep(1, None, True), id="limit-0-deactivates-at-once"),
        pytest.param(9, None, BackoffStep(10, 1000 + 3600, False), id="no-limit-requeues-forever"),
    ],
)
def test_backoff_step(count: int, limit: int | None, expected: BackoffStep) -> None:
    assert backoff_step(count, limit, 1000.0, 60.0, 3600.0) == expected


@given(
    limit=st.integers(min_value=0, max_value=20),
    base=st.floats(min_value=0.5, max_value=600),
    factor=st.floats(min_value=1, max_value=100),
)
def test_waits_never_shrink_and_deactivation_comes_after_exactly_limit_requeues(
    limit: int, base: float, factor: float
) -> None:
    maximum = base * factor
    count, waits = 0, []
    while True:
        step = backoff_step(count, limit, 0.0, base, maximum)
        if step.deactivate:
            break
        assert step.requeue_at is not None
        waits.append(step.requeue_at)
        count = step.count
    assert len(waits) == limit
    assert waits == sorted(waits) and all(base <= w <= maximum for w in waits)
