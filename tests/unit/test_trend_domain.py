"""Incident trends as pure decisions: where a window's buckets lie for a moment, zeros for empty
buckets, the direction and its sentence, and the strict `trend` value."""

from __future__ import annotations

import pytest

from redrive.domain.errors import InvalidRequest
from redrive.domain.trend import (
    DAY_MS,
    HOUR_MS,
    Direction,
    Window,
    buckets_for,
    chart_label,
    describe,
    parse_window,
    trend_of,
)

NOW = 1_790_000_000_000


def test_the_day_window_is_24_hourly_buckets_ending_at_now() -> None:
    buckets = buckets_for(Window.DAY, NOW)
    assert (buckets.width, buckets.count, buckets.unit) == (HOUR_MS, 24, "hour")
    assert buckets.end == NOW + 1  # an arrival at now is in the window
    assert buckets.start == NOW + 1 - 24 * HOUR_MS  # one exactly 24 hours old is not


def test_the_week_window_is_7_daily_buckets() -> None:
    buckets = buckets_for(Window.WEEK, NOW)
    assert (buckets.width, buckets.count, buckets.unit) == (DAY_MS, 7, "day")
    assert buckets.end - buckets.start == 7 * DAY_MS


def test_empty_buckets_are_zeros_and_bucket_starts_follow_each_other() -> None:
    buckets = buckets_for(Window.DAY, NOW)
    trend = trend_of(buckets, {0: 2, 22: 3, 23: 12, 24: 99, -1: 99})
    assert len(trend.buckets) == 24
    assert trend.counts == (2, *([0] * 21), 3, 12)
    assert [bucket.start for bucket in trend.buckets] == [
        buckets.start + index * HOUR_MS for index in range(24)
    ]
    assert trend.total == 17
    assert trend.direction == Direction.RISING
    assert trend.summary == "rising: 12 in the last hour, 3 the hour before"


RISING = "rising: 12 in the last hour, 3 the hour before"
FALLING = "falling: 1 in the last hour, 9 the hour before"
STEADY = "steady: 4 in the last day, 4 the day before"
QUIET_LATELY = "quiet: none in the last 2 hours, 17 in the last 24 hours"


@pytest.mark.parametrize(
    ("window", "counts", "direction", "summary"),
    [
        (Window.DAY, (5, 3, 12), Direction.RISING, RISING),
        (Window.DAY, (0, 9, 1), Direction.FALLING, FALLING),
        (Window.WEEK, (0, 4, 4), Direction.STEADY, STEADY),
        (Window.DAY, (17, 0, 0), Direction.QUIET, QUIET_LATELY),
        (Window.WEEK, (0, 0, 0), Direction.QUIET, "quiet: none in the last 7 days"),
    ],
)
def test_the_direction_compares_the_last_bucket_with_the_one_before(
    window: Window, counts: tuple[int, ...], direction: Direction, summary: str
) -> None:
    assert describe(window, counts) == (direction, summary)


def test_the_chart_label_gives_every_number() -> None:
    trend = trend_of(buckets_for(Window.WEEK, NOW), {0: 1, 5: 2, 6: 3})
    assert chart_label(trend) == (
        "Dead letters per day over the last 7 days, oldest first: 1, 0, 0, 0, 0, 2, 3 "
        "(6 in all). Rising: 3 in the last day, 2 the day before."
    )


def test_the_trend_value_is_parsed_strictly() -> None:
    assert parse_window("24h") == Window.DAY
    assert parse_window("7d") == Window.WEEK
    assert parse_window(None) is None
    assert parse_window("", Window.DAY) == Window.DAY
    for wrong in ("1h", "24H", "7 d", "week"):
        with pytest.raises(InvalidRequest) as raised:
            parse_window(wrong)
        assert raised.value.details == {"field": "trend", "allowed": ["24h", "7d"]}
