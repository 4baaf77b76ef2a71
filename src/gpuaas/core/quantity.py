"""Kubernetes resource quantities, parsed into the integers Kueue accounts in.

This module owns the quantity grammar of ``k8s.io/apimachinery/pkg/api/resource`` ("500m", "64Gi",
"1e3", "24G", plain numbers) and the rounding Kueue applies when it turns a quantity into an int64:
``MilliValue()`` for CPU, ``Value()`` for everything else, both rounding away from zero. It does not
know about manifests or objects (see ``core.manifests``) and never raises anything but
``QuantityError`` for bad input.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "INT64_MAX",
    "Int64RangeError",
    "QuantityError",
    "format_quantity",
    "is_cpu",
    "parse_quantity",
    "parse_quantity_exact",
    "parse_quantity_rounded",
]

INT64_MAX = (1 << 63) - 1

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Largest first, so 1 GiB formats as "1Gi" rather than "1024Mi".
_FORMAT_BINARY = sorted(_BINARY.items(), key=lambda kv: -kv[1])
# Byte-valued resources get binary suffixes when formatted; counts (GPUs, pods) stay plain integers.
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})

# Number part as Kubernetes accepts it: optional sign, digits with an optional fraction (".5", "5."
# and "5.5" all valid), then either a binary/decimal SI suffix or an integer exponent (e3, E-2).
# ASCII digits only: Python's \d and int() also read "٣" (Arabic-Indic three) as 3; Kubernetes does not.
_QUANTITY_RE = re.compile(
    r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_PLAIN_INT_RE = re.compile(r"[0-9]{1,15}")
# Exponents past these bounds cannot produce an int64 (upper) or round to anything but +-1 (lower).
_MAX_EXP = 40
_MIN_EXP = -80


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or one out of int64 range."""


class Int64RangeError(QuantityError):
    """A quantity Kubernetes accepts whose value in Kueue's int units does not fit in int64
    (where Kueue clamps, as for a pod's requests, a caller catches it and clamps)."""


def is_cpu(resource: str) -> bool:
    """CPU is the one resource Kueue accounts in milli-units."""
    return resource == "cpu"


def _reject(value: object, why: str = "") -> QuantityError:
    text = f"malformed quantity {value!r}" if not why else f"quantity {value!r}: {why}"
    return QuantityError(text)


def _text_of(value: str | int | float) -> str:
    # bool is an int subclass; a YAML "true" is never a quantity.
    if isinstance(value, bool):
        raise _reject(value, "expected a quantity, got a boolean")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _reject(value, "not a finite number")
        # repr is the shortest text that reads back as the same float: what a JSON number carries.
        return repr(value)
    if isinstance(value, str):
        return value
    raise _reject(value, f"expected a string or number, got {type(value).__name__}")


@lru_cache(maxsize=8192)
def _exact_from_text(text: str) -> Fraction:
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        raise _reject(text)
    sign, whole, frac, suffix, exponent = m.groups()
    if not whole and not frac:
        raise _reject(text)
    digits = (whole or "") + (frac or "")
    if len(digits) > 256:
        raise _reject(text, "too many digits")
    mantissa = int(digits) if digits else 0
    scale = len(frac or "")
    if exponent is not None:
        exp = int(exponent)
        mult = 1
    elif suffix in _BINARY:
        exp = 0
        mult = _BINARY[suffix]
    else:
        exp = _DECIMAL_EXP[suffix or ""]
        mult = 1
    exp -= scale
    if mantissa == 0:
        return Fraction(0)
    if exp > _MAX_EXP:
        raise _reject(text, "out of range")
    if exp < _MIN_EXP:
        # Far below any unit: a tiny positive value rounds to the same result as 10**_MIN_EXP.
        exp = _MIN_EXP
        mantissa = 1
    value = Fraction(mantissa * mult) * (Fraction(10) ** exp)
    return -value if sign == "-" else value


def parse_quantity_exact(value: str | int | float) -> Fraction:
    """The exact value of a quantity (in base units: cores for CPU), for comparisons and weights."""
    return _exact_from_text(_text_of(value))


def _round_away(value: Fraction) -> tuple[int, bool]:
    """Round away from zero as ``Quantity.Value()`` does; the flag says whether it was exact."""
    num, den = value.numerator, value.denominator
    if den == 1:
        return num, True
    q = -((-abs(num)) // den)  # ceil(|value|)
    return (q if num > 0 else -q), False


@lru_cache(maxsize=8192)
def _rounded_from_text(text: str, cpu: bool) -> tuple[int, bool]:
    if _PLAIN_INT_RE.fullmatch(text):
        return (int(text) * 1000 if cpu else int(text)), True
    exact = _exact_from_text(text)
    result = _round_away(exact * 1000 if cpu else exact)
    if abs(result[0]) > INT64_MAX:
        raise Int64RangeError(f"quantity {text!r}: out of range for a 64-bit integer")
    return result


def parse_quantity_rounded(value: str | int | float, resource: str) -> tuple[int, bool]:
    """Like ``parse_quantity``, and also whether no rounding happened (so callers can sum exactly)."""
    cpu = resource == "cpu"
    if type(value) is int:
        result = value * 1000 if cpu else value
        if abs(result) > INT64_MAX:
            raise Int64RangeError(f"quantity {value!r}: out of range for a 64-bit integer")
        return result, True
    return _rounded_from_text(_text_of(value), cpu)


def parse_quantity(value: str | int | float, resource: str) -> int:
    """A quantity in Kueue's int units: millicores for ``cpu``, base units for every other resource.

    Rounds away from zero like ``resource.Quantity.MilliValue()`` / ``Value()``: "500m" memory is 1
    byte, "0.1m" CPU is 1 millicore. Raises ``QuantityError`` with the reason.
    """
    return parse_quantity_rounded(value, resource)[0]


def format_quantity(value: int, resource: str) -> str:
    """The shortest Kubernetes text for an int quantity, for display; ``parse_quantity`` inverts it.

    CPU: whole cores as "7", otherwise millicores "500m". Byte resources (memory, storage,
    hugepages-*): the largest binary suffix that divides exactly ("64Gi"), else plain bytes. Other
    resources (GPUs, pods, custom counts): a plain integer.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuantityError(f"quantity {value!r}: expected an int")
    if resource == "cpu":
        if value % 1000 == 0:
            return str(value // 1000)
        return f"{value}m"
    if value != 0 and (resource in _BYTE_RESOURCES or resource.startswith("hugepages-")):
        magnitude = abs(value)
        for suffix, unit in _FORMAT_BINARY:
            if magnitude % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)
