"""Warning headers carry only printable ASCII: a body's field names can hold any character, and an
HTTP header is latin-1 (a raw one failed the whole response with a 500, found by the body fuzz)."""

from __future__ import annotations

import pytest

from gpuaas.api.validation import warning_headers


@pytest.mark.parametrize(
    ("message", "sent"),
    [
        ('unknown field "spec.x"', '299 - "unknown field \\"spec.x\\""'),
        ("unknown field spec.\u0100", '299 - "unknown field spec.\\u0100"'),
        ("line\nbreak", '299 - "line\\nbreak"'),
    ],
)
def test_warning_headers_are_printable_ascii(message: str, sent: str) -> None:
    [(name, value)] = warning_headers([message])
    assert name == "Warning" and value == sent
    value.encode("latin-1")
