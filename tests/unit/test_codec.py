"""The store's JSON text: compact, exact for every value a job can carry."""

from __future__ import annotations

import json

import pytest

from redrive.store.codec import dump, load


@pytest.mark.parametrize(
    "value",
    [
        {"amount": 2**70, "negative": -(2**65)},
        {"text": "é \u2028 \U0001f600", "quote": 'a"b\\c'},
        [1.5e-05, 1e16, 0.1, -0.0, 12345678901234567890],
        {"nested": {"list": [None, True, False, {}, []]}},
        "plain",
    ],
)
def test_json_round_trips_exactly(value: object) -> None:
    text = dump(value)
    assert text is not None
    assert load(text) == value
    assert json.loads(text) == value


def test_json_is_compact_and_keeps_unicode() -> None:
    assert dump({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
    assert dump({"big": 2**70}) == '{"big":1180591620717411303424}'


def test_none_stays_sql_null() -> None:
    assert dump(None) is None
    assert load(None) is None
