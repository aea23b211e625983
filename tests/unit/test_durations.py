"""Unit tests for ISO 8601 duration parsing/formatting and RFC 3339 timestamp handling."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from redrive.domain.durations import (
    format_duration,
    format_timestamp,
    parse_duration_ms,
    parse_timestamp,
)
from redrive.domain.errors import InvalidRequest

NOW_MS = 1_772_359_200_000  # 2026-03-01T10:00:00.000Z
SERVER_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


# --- parse_duration_ms -------------------------------------------------------------------------

VALID_DURATIONS = [
    pytest.param("PT1S", 1_000, id="one-second"),
    pytest.param("PT0.5S", 500, id="fractional-second"),
    pytest.param("PT0.001S", 1, id="one-millisecond"),
    pytest.param("PT2S", 2_000, id="two-seconds"),
    pytest.param("PT5M", 300_000, id="five-minutes"),
    pytest.param("PT1H", 3_600_000, id="one-hour"),
    pytest.param("PT1H30M", 5_400_000, id="hour-and-half"),
    pytest.param("PT1H30M15S", 5_415_000, id="hours-minutes-seconds"),
    pytest.param("P1D", 86_400_000, id="one-day"),
    pytest.param("P180D", 15_552_000_000, id="dlq-retention"),
    pytest.param("P1W", 604_800_000, id="one-week"),
    pytest.param("P1DT12H", 129_600_000, id="day-and-hours"),
    pytest.param("PT0S", 0, id="zero"),
]


@pytest.mark.parametrize(("text", "expected"), VALID_DURATIONS)
def test_parse_duration_ms_accepts_iso_durations(text: str, expected: int) -> None:
    assert parse_duration_ms(text, "field") == expected


INVALID_DURATIONS = [
    pytest.param("", id="empty"),
    pytest.param("P", id="bare-P"),
    pytest.param("PT", id="bare-PT"),
    pytest.param("P1DT", id="dangling-T"),
    pytest.param("1S", id="missing-P"),
    pytest.param("PTS", id="unit-without-number"),
    pytest.param("P1Y", id="years-unsupported"),
    pytest.param("P1M", id="months-unsupported"),
    pytest.param("PT1.S", id="trailing-dot"),
    pytest.param("pt1s", id="lowercase"),
    pytest.param("PT-1S", id="negative"),
    pytest.param(" PT1S", id="leading-space"),
    pytest.param("PT1S\n", id="trailing-newline"),
]


@pytest.mark.parametrize("text", INVALID_DURATIONS)
def test_parse_duration_ms_rejects_invalid_text(text: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_duration_ms(text, "retry.initial_interval")
    assert caught.value.details["field"] == "retry.initial_interval"
    assert "retry.initial_interval" in caught.value.message


@pytest.mark.parametrize("value", [pytest.param(1000, id="int"), pytest.param(None, id="none")])
def test_parse_duration_ms_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_duration_ms(value, "field")  # type: ignore[arg-type]


# --- format_duration ---------------------------------------------------------------------------

FORMATTED_DURATIONS = [
    pytest.param(1_000, "PT1S", id="one-second"),
    pytest.param(500, "PT0.5S", id="half-second"),
    pytest.param(1_250, "PT1.25S", id="fraction-trimmed"),
    pytest.param(1, "PT0.001S", id="one-millisecond"),
    pytest.param(300_000, "PT300S", id="minutes-as-seconds"),
    pytest.param(86_400_000, "P1D", id="one-day"),
    pytest.param(15_552_000_000, "P180D", id="whole-days"),
]


@pytest.mark.parametrize(("milliseconds", "expected"), FORMATTED_DURATIONS)
def test_format_duration(milliseconds: int, expected: str) -> None:
    assert format_duration(milliseconds) == expected


@pytest.mark.parametrize(
    "milliseconds",
    [
        0,
        1,
        499,
        500,
        1_000,
        1_234,
        59_999,
        300_000,
        5_400_000,
        86_400_000,
        90_000_000,
        15_552_000_000,
    ],
)
def test_format_duration_round_trips_through_parse(milliseconds: int) -> None:
    assert parse_duration_ms(format_duration(milliseconds), "field") == milliseconds


# --- format_timestamp --------------------------------------------------------------------------

FORMATTED_TIMESTAMPS = [
    pytest.param(0, "1970-01-01T00:00:00.000Z", id="epoch"),
    pytest.param(NOW_MS, "2026-03-01T10:00:00.000Z", id="whole-second"),
    pytest.param(NOW_MS + 2_120, "2026-03-01T10:00:02.120Z", id="milliseconds-padded"),
    pytest.param(NOW_MS + 7, "2026-03-01T10:00:00.007Z", id="leading-zeros"),
    pytest.param(NOW_MS + 999, "2026-03-01T10:00:00.999Z", id="last-millisecond"),
    pytest.param(4_102_444_799_999, "2099-12-31T23:59:59.999Z", id="far-future"),
]


@pytest.mark.parametrize(("milliseconds", "expected"), FORMATTED_TIMESTAMPS)
def test_format_timestamp(milliseconds: int, expected: str) -> None:
    text = format_timestamp(milliseconds)
    assert text == expected
    assert SERVER_TIMESTAMP.match(text)


@pytest.mark.parametrize("milliseconds", [0, 1, NOW_MS, NOW_MS + 123, 4_102_444_799_999])
def test_format_timestamp_round_trips_through_parse(milliseconds: int) -> None:
    assert parse_timestamp(format_timestamp(milliseconds), "at", NOW_MS)[0] == milliseconds


# --- parse_timestamp ---------------------------------------------------------------------------

ABSOLUTE_TIMESTAMPS = [
    pytest.param("2099-12-31T23:59:59Z", 4_102_444_799_000, id="utc-z"),
    pytest.param("2026-03-01T10:00:02.120Z", NOW_MS + 2_120, id="fractional"),
    pytest.param("2026-03-01T11:00:00+01:00", NOW_MS, id="positive-offset"),
    pytest.param("2026-03-01T05:00:00-05:00", NOW_MS, id="negative-offset"),
    pytest.param("2026-03-01T10:00:00.5+00:00", NOW_MS + 500, id="short-fraction"),
    pytest.param("2026-03-01t10:00:00z", NOW_MS, id="lowercase-t-and-z"),
]


@pytest.mark.parametrize(("text", "expected_ms"), ABSOLUTE_TIMESTAMPS)
def test_parse_timestamp_absolute_keeps_original_text(text: str, expected_ms: int) -> None:
    moment, original = parse_timestamp(text, "expires_at", NOW_MS)
    assert moment == expected_ms
    assert original == text


RELATIVE_TIMESTAMPS = [
    pytest.param("+PT5S", 5_000, id="five-seconds"),
    pytest.param("+PT2S", 2_000, id="two-seconds"),
    pytest.param("+PT0.5S", 500, id="half-second"),
    pytest.param("+P1D", 86_400_000, id="one-day"),
]


@pytest.mark.parametrize(("text", "offset_ms"), RELATIVE_TIMESTAMPS)
def test_parse_timestamp_relative_adds_to_now(text: str, offset_ms: int) -> None:
    assert parse_timestamp(text, "scheduled_at", NOW_MS) == (NOW_MS + offset_ms, None)


INVALID_TIMESTAMPS = [
    pytest.param("2099-12-31T23:59:59", id="missing-offset"),
    pytest.param("2099-12-31T23:59:59.000", id="fraction-missing-offset"),
    pytest.param("2099-12-31", id="date-only"),
    pytest.param("2099-13-01T00:00:00Z", id="month-13"),
    pytest.param("2099-02-30T00:00:00Z", id="february-30"),
    pytest.param("tomorrow", id="words"),
    pytest.param("", id="empty"),
    pytest.param("+5S", id="relative-without-P"),
    pytest.param("+", id="bare-plus"),
    pytest.param("+P1Y", id="relative-years"),
    pytest.param("2099-12-31T23:59:59Z\n", id="trailing-newline"),
]


@pytest.mark.parametrize("text", INVALID_TIMESTAMPS)
def test_parse_timestamp_rejects_invalid_text(text: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_timestamp(text, "options.expires_at", NOW_MS)
    assert caught.value.details["field"] == "options.expires_at"
    assert "options.expires_at" in caught.value.message


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="none"),
        pytest.param(1_772_359_200, id="epoch-int"),
        pytest.param(1.5, id="float"),
        pytest.param(True, id="bool"),
        pytest.param(["2099-12-31T23:59:59Z"], id="list"),
        pytest.param(datetime(2099, 12, 31, tzinfo=UTC), id="datetime"),
    ],
)
def test_parse_timestamp_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_timestamp(value, "scheduled_at", NOW_MS)
    assert caught.value.details["field"] == "scheduled_at"
