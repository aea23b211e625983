"""Reading a request body's JSON: orjson where it reads what the standard library reads, the
standard library's decoder (and its refusals) for everything else."""

from __future__ import annotations

import math
from typing import Any

import pytest

from redrive.api.http import DECODER, _decoded
from redrive.domain.errors import InvalidPayload

SAME = [
    '{"jobs": [{"type": "a.b", "args": [1, 1.5, -0, 1E2, "é", true, null, {"k": []}]}]}',
    '{"big": 123456789012345678901234567890, "small": -9223372036854775809}',
    '{"id": "0123456789012345678901234", "a": 1, "a": 2}',
    '["\\ud83d\\ude00", "\\u0000", "\\ud800"]',
    "[1.5e-400, 5e-324, 1.7976931348623157e308]",
]


@pytest.mark.parametrize("text", SAME)
def test_a_body_reads_as_the_standard_library_reads_it(text: str) -> None:
    value = _decoded(text.encode())
    expected = DECODER.decode(text)
    assert value == expected
    assert repr(value) == repr(expected)  # the same types: an integer stays an integer


@pytest.mark.parametrize("text", ["[NaN]", "[Infinity]", "[1e400]", "[-1e400]"])
def test_what_json_numbers_cannot_be_is_refused(text: str) -> None:
    with pytest.raises(InvalidPayload):
        _decoded(text.encode())


def test_bad_json_is_refused_as_the_standard_library_refuses_it() -> None:
    with pytest.raises(ValueError, match="Expecting value"):
        _decoded(b"[1,]")


def test_a_body_that_is_not_utf8_bytes_is_read_from_its_text() -> None:
    value: Any = _decoded('{"n": 1.0}'.encode("utf-16"))
    assert value == {"n": 1.0} and not math.isnan(value["n"])
