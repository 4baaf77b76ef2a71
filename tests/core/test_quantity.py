"""Kubernetes quantity parsing and formatting (gpuaas.core.quantity)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.core.quantity import (
    INT64_MAX,
    QuantityError,
    format_quantity,
    parse_quantity,
    parse_quantity_exact,
)

GI = 1 << 30


@pytest.mark.parametrize(
    ("value", "resource", "expected"),
    [
        pytest.param("500m", "cpu", 500, id="cpu-milli"),
        pytest.param("2", "cpu", 2000, id="cpu-string-int"),
        pytest.param(2, "cpu", 2000, id="cpu-int"),
        pytest.param(1.5, "cpu", 1500, id="cpu-float"),
        pytest.param(0.1, "cpu", 100, id="cpu-float-0.1-exact"),
        pytest.param("0.5", "cpu", 500, id="cpu-fraction"),
        pytest.param("1e3", "cpu", 1_000_000, id="cpu-exponent"),
        pytest.param("1E3", "cpu", 1_000_000, id="cpu-capital-exponent"),
        pytest.param("1e-3", "cpu", 1, id="cpu-negative-exponent"),
        pytest.param("0.1m", "cpu", 1, id="cpu-submilli-rounds-up"),
        pytest.param("100n", "cpu", 1, id="cpu-nano-rounds-up"),
        pytest.param("1k", "cpu", 1_000_000, id="cpu-kilo"),
        pytest.param("0", "cpu", 0, id="cpu-zero"),
        pytest.param("+1", "cpu", 1000, id="cpu-plus-sign"),
        pytest.param(".5", "cpu", 500, id="cpu-leading-dot"),
        pytest.param("5.", "cpu", 5000, id="cpu-trailing-dot"),
        pytest.param("64Gi", "memory", 64 * GI, id="mem-gi"),
        pytest.param("1.5Gi", "memory", 3 * GI // 2, id="mem-fractional-gi"),
        pytest.param("24G", "memory", 24_000_000_000, id="mem-decimal-g"),
        pytest.param("1Ki", "memory", 1024, id="mem-ki"),
        pytest.param("1Ei", "memory", 1 << 60, id="mem-ei"),
        pytest.param("1E", "memory", 10**18, id="mem-exa-suffix-not-exponent"),
        pytest.param("500m", "memory", 1, id="mem-milli-rounds-up"),
        pytest.param("1.5", "memory", 2, id="mem-half-rounds-up"),
        pytest.param("1e-100", "memory", 1, id="mem-tiny-rounds-up"),
        pytest.param("-1", "memory", -1, id="negative"),
        pytest.param("-500m", "memory", -1, id="negative-rounds-away-from-zero"),
        pytest.param("2", "nvidia.com/gpu", 2, id="gpu-string"),
        pytest.param(2, "nvidia.com/gpu", 2, id="gpu-int"),
        pytest.param("1e3", "pods", 1000, id="pods-exponent"),
        pytest.param(1e20 / 1e10, "memory", 10**10, id="float-with-exponent-repr"),
        pytest.param("9223372036854775807", "memory", INT64_MAX, id="int64-max"),
    ],
)
def test_parse_quantity(value: str | int | float, resource: str, expected: int) -> None:
    assert parse_quantity(value, resource) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("abc", "malformed quantity 'abc'", id="letters"),
        pytest.param("", "malformed quantity ''", id="empty"),
        pytest.param(".", "malformed quantity '.'", id="dot"),
        pytest.param("1.2.3", "malformed", id="two-dots"),
        pytest.param("Gi", "malformed", id="suffix-only"),
        pytest.param("1e", "malformed", id="exponent-without-digits"),
        pytest.param("1 Gi", "malformed", id="inner-space"),
        pytest.param(" 1", "malformed", id="leading-space"),
        pytest.param("1gi", "malformed", id="lowercase-binary"),
        pytest.param("1KiB", "malformed", id="bytes-suffix"),
        pytest.param("1e1.5", "malformed", id="fractional-exponent"),
        pytest.param("0x10", "malformed", id="hex"),
        pytest.param(True, "boolean", id="bool"),
        pytest.param(None, "expected a string or number", id="none"),
        pytest.param([1], "expected a string or number", id="list"),
        pytest.param(float("nan"), "finite", id="nan"),
        pytest.param(float("inf"), "finite", id="inf"),
        pytest.param("1e100", "out of range", id="huge-exponent"),
        pytest.param("9223372036854775808", "out of range", id="int64-overflow"),
        pytest.param(1 << 64, "out of range", id="int-overflow"),
        pytest.param("1" * 300, "too many digits", id="too-many-digits"),
    ],
)
def test_parse_quantity_rejects(value: object, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(value, "memory")  # type: ignore[arg-type]
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError)


def test_cpu_overflow_counts_millis() -> None:
    # 9.3e15 cores fit in int64 as cores but not as millicores.
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity("9300000000000000", "cpu")


def test_parse_quantity_exact_keeps_fractions() -> None:
    assert parse_quantity_exact("1.5") == Fraction(3, 2)
    assert parse_quantity_exact("100n") == Fraction(1, 10**7)
    assert parse_quantity_exact("0.5Ki") == 512


@pytest.mark.parametrize(
    ("value", "resource", "expected"),
    [
        pytest.param(7000, "cpu", "7", id="cpu-whole"),
        pytest.param(500, "cpu", "500m", id="cpu-milli"),
        pytest.param(1500, "cpu", "1500m", id="cpu-mixed"),
        pytest.param(0, "cpu", "0", id="cpu-zero"),
        pytest.param(68719476736, "memory", "64Gi", id="mem-gi"),
        pytest.param(1024, "memory", "1Ki", id="mem-ki"),
        pytest.param(1536, "memory", "1536", id="mem-not-divisible"),
        pytest.param(3 * (1 << 20), "memory", "3Mi", id="mem-mi"),
        pytest.param(1 << 60, "memory", "1Ei", id="mem-ei"),
        pytest.param(1000, "memory", "1000", id="mem-decimal-stays-plain"),
        pytest.param(0, "memory", "0", id="mem-zero"),
        pytest.param(-2048, "memory", "-2Ki", id="mem-negative"),
        pytest.param(2 * GI, "ephemeral-storage", "2Gi", id="storage"),
        pytest.param(2 << 20, "hugepages-2Mi", "2Mi", id="hugepages"),
        pytest.param(2048, "nvidia.com/gpu", "2048", id="gpu-plain"),
        pytest.param(4, "pods", "4", id="pods-plain"),
    ],
)
def test_format_quantity(value: int, resource: str, expected: str) -> None:
    assert format_quantity(value, resource) == expected


RESOURCES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "hugepages-1Gi", "storage"])


@given(value=st.integers(min_value=-(2**62), max_value=2**62), resource=RESOURCES)
def test_format_then_parse_round_trips(value: int, resource: str) -> None:
    assert parse_quantity(format_quantity(value, resource), resource) == value


@given(
    units=st.integers(min_value=0, max_value=10**12),
    scale=st.integers(min_value=0, max_value=12),
    resource=RESOURCES,
)
def test_decimal_text_rounds_up_like_kubernetes(units: int, scale: int, resource: str) -> None:
    text = f"{units // 10**scale}.{units % 10**scale:0{scale}d}" if scale else str(units)
    exact = Fraction(units, 10**scale) * (1000 if resource == "cpu" else 1)
    assert parse_quantity(text, resource) == math.ceil(exact)


@given(value=st.floats(min_value=0, max_value=1e9, allow_nan=False), resource=RESOURCES)
def test_float_parses_as_its_shortest_text(value: float, resource: str) -> None:
    assert parse_quantity(value, resource) == parse_quantity(repr(value), resource)
