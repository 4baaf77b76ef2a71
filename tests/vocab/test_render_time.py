"""``render.rfc3339`` reuses the last second's text: the answer is always datetime's own."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.vocab import render


def _datetime(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    "ts",
    [
        0, 1, 1.5, 1_764_000_000.25, 1_764_000_000.9999994, 1_764_000_000.9999996,
        1_764_000_000.999999, 1_764_000_001, -0.5, -1.0000004, -1.9999996, 4102444800.0,
    ],
)  # fmt: skip
def test_rfc3339_is_datetime_formatting_even_at_the_rounding_edge(ts: float) -> None:
    render.rfc3339(int(ts))  # the cached second is ts's own
    assert render.rfc3339(ts) == _datetime(ts)
    assert render.rfc3339(ts) == _datetime(ts)  # from the cache, where it may be


@given(st.lists(st.floats(min_value=-1e10, max_value=1e10), min_size=1, max_size=20))
def test_rfc3339_agrees_with_datetime_for_any_sequence(stamps: list[float]) -> None:
    for ts in stamps:
        assert render.rfc3339(ts) == _datetime(ts)


@pytest.mark.parametrize("ts", [float("nan"), float("inf"), 1e20])
def test_rfc3339_refuses_what_datetime_refuses(ts: float) -> None:
    with pytest.raises(Exception) as ours:
        render.rfc3339(ts)
    with pytest.raises(Exception) as theirs:
        _datetime(ts)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))
