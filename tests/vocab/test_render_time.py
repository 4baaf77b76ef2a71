"""``render.rfc3339`` keeps the last second's text: it must write every instant as
``datetime`` writes it, the one just before a second's end included (rounded to microseconds,
it is the next second's), whatever it formatted before."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.vocab.render import rfc3339


def _reference(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_SECONDS = st.integers(min_value=-86_400, max_value=4_000_000_000)
_FRACTIONS = st.one_of(
    st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    st.floats(min_value=0.9999990, max_value=1.0, exclude_max=True),  # rounds up, or not
    st.floats(min_value=0.0, max_value=1e-6),
)


@given(st.lists(st.tuples(_SECONDS, _FRACTIONS), min_size=1, max_size=20))
def test_every_instant_reads_as_datetime_writes_it(instants: list[tuple[int, float]]) -> None:
    for second, fraction in instants:
        for ts in (second + fraction, float(second), second + fraction):  # cached or not
            assert rfc3339(ts) == _reference(ts), repr(ts)


def test_the_next_second_after_a_rounding_carry() -> None:
    ts = 1_795_711_907.9999996  # datetime rounds it up to ...:48
    assert rfc3339(1_795_711_907.5) == "2026-11-26T16:51:47Z"
    assert rfc3339(ts) == _reference(ts) == "2026-11-26T16:51:48Z"
    assert rfc3339(1_795_711_907.25) == "2026-11-26T16:51:47Z"


@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf, 1e30])
def test_what_datetime_refuses_is_refused_the_same_way(ts: float) -> None:
    with pytest.raises((ValueError, OverflowError, OSError)) as want:
        _reference(ts)
    with pytest.raises(want.type):
        rfc3339(ts)
