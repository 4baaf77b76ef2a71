"""Request bodies that must be refused before anything stores them (issue 17, items 1, 2 and 5).

``parse_body`` is the one gate every write passes: a value JSON cannot hold faithfully (NaN,
infinities, non-string keys, lone surrogates, integers past int64), a body nested deeper than
``MAX_DEPTH`` or an object over ``MAX_OBJECT_BYTES`` is a 4xx naming the field, never a 500 and
never a stored object.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.api.body import MAX_DEPTH, MAX_OBJECT_BYTES, BodyError, parse_body

J = "application/json"
Y = "application/yaml"


def nested(depth: int) -> str:
    return '{"spec": ' + "[" * depth + "]" * depth + "}"


REFUSED = [
    pytest.param(b'{"spec": {"x": NaN}}', J, 400, "NaN", id="json-nan"),
    pytest.param(b'{"spec": {"x": Infinity}}', J, 400, "Infinity", id="json-infinity"),
    pytest.param(b'{"spec": {"x": -Infinity}}', J, 400, "Infinity", id="json-minus-infinity"),
    pytest.param(b'{"spec": {"x": 1e400}}', J, 400, "spec.x", id="json-1e400"),
    pytest.param(b'{"spec": {"x": [1, -1e999]}}', J, 400, "spec.x[1]", id="json-minus-1e999"),
    pytest.param(b'{"spec": {"x": NaN}}', None, 400, "", id="untyped-nan"),
    pytest.param(b"spec: {x: .nan}", Y, 400, "spec.x", id="yaml-nan"),
    pytest.param(b"spec: {x: .inf}", Y, 400, "spec.x", id="yaml-inf"),
    pytest.param(b"spec: {x: -.Inf}", Y, 400, "spec.x", id="yaml-minus-inf"),
    pytest.param(b"spec: {1: x}", Y, 400, "spec: key 1", id="yaml-int-key"),
    pytest.param(b"spec: {null: x}", Y, 400, "spec: key None", id="yaml-null-key"),
    pytest.param(b"spec: {true: x, b: 1}", Y, 400, "spec: key True", id="yaml-bool-key"),
    pytest.param(b"spec: {? [a, b] : x}", Y, 400, "YAML", id="yaml-list-key"),
    pytest.param(b"spec: {when: 2024-01-01}", Y, 400, "spec.when", id="yaml-date"),
    pytest.param(b"spec: {x: !!binary aGVsbG8=}", Y, 400, "spec.x", id="yaml-binary"),
    pytest.param(b'{"spec": {"x": "\\ud800"}}', J, 400, "spec.x", id="lone-surrogate"),
    pytest.param(b'{"spec": {"\\udfff": 1}}', J, 400, "spec", id="lone-surrogate-key"),
    pytest.param(b'{"spec": {"x": 9223372036854775808}}', J, 400, "spec.x", id="int-past-int64"),
    pytest.param(nested(700).encode(), J, 400, "nests deeper", id="json-700-levels"),
    pytest.param(nested(900).encode(), None, 400, "nests deeper", id="untyped-900-levels"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, J, 400, "", id="json-100000-levels"),
    pytest.param(
        ("spec: " + "[" * 700 + "]" * 700).encode(), Y, 400, "nests deeper", id="yaml-700-levels"
    ),
    pytest.param(
        (
            "spec:\n"
            + "".join("  " * i + f"k{i}:\n" for i in range(1, 800))
            + "  " * 800
            + "v: 1\n"
        ).encode(),
        Y,
        400,
        "nests deeper",
        id="yaml-800-indented-levels",
    ),
    pytest.param(
        json.dumps({"spec": {"x": ["y" * 1000] * (MAX_OBJECT_BYTES // 1000)}}).encode(),
        J,
        413,
        "limit",
        id="object-over-1.5MiB",
    ),
]


@pytest.mark.parametrize(("raw", "ctype", "status", "names"), REFUSED)
def test_refused_naming_the_field(raw: bytes, ctype: str | None, status: int, names: str) -> None:
    with pytest.raises(BodyError) as info:
        parse_body(raw, ctype)
    assert info.value.status == status
    assert names in info.value.message


ACCEPTED = [
    pytest.param(b'{"spec": {"x": 1.5, "y": -0.0, "z": 1e300}}', J, id="finite-floats"),
    pytest.param(b'{"spec": {"x": 9223372036854775807}}', J, id="int64-max"),
    pytest.param(b"spec: {x: '1', y: 'NaN', z: .5}", Y, id="yaml-strings-and-floats"),
    pytest.param(nested(MAX_DEPTH - 2).encode(), J, id="deep-but-allowed"),
    pytest.param('{"spec": {"note": "日本語 ✓"}}'.encode(), J, id="unicode"),
]


@pytest.mark.parametrize(("raw", "ctype"), ACCEPTED)
def test_accepted(raw: bytes, ctype: str) -> None:
    doc = parse_body(raw, ctype)
    json.dumps(doc, allow_nan=False, sort_keys=True).encode()  # storable and readable back


# JSON as documents hold it: what msgspec's decoder (the fast reader) and ``json`` both read
_SCALARS = (
    st.none() | st.booleans() | st.text() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
)  # fmt: skip
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_DOCS)
def test_a_json_body_reads_as_json_reads_it(doc: object) -> None:
    raw = json.dumps(doc).encode()
    assert parse_body(raw, J) == json.loads(raw)
    assert json.dumps(parse_body(raw, None)) == raw.decode()  # same keys, order, types


@pytest.mark.parametrize(
    "raw",
    [b'{"a": 1, "b": 2, "a": 3}', b"[-0, -0.0, 1e2, 9007199254740993, 9007199254740993.0]",
     b'"\\u00e9\\ud83d\\ude00"', b'{"": null}', b"[18446744073709551615]"],
)  # fmt: skip
def test_json_edge_cases_read_as_json_reads_them(raw: bytes) -> None:
    try:
        want = json.loads(raw)
    except ValueError:
        pytest.fail("a valid JSON case")
    try:
        got = parse_body(raw, J)
    except BodyError as exc:  # refused by the checks (an integer past int64), as json's would be
        assert "64-bit" in exc.message
        return
    assert (got, json.dumps(got)) == (want, json.dumps(want))
