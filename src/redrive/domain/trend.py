"""Incident trends: the dead letters arriving at an incident per bucket over a window (the last
24 hours in hourly buckets, or the last 7 days in daily ones), the window's bucket bounds for a
moment, and the direction an operator reads off them ("rising: 12 in the last hour, 3 the hour
before").

Windows end at `now` (inclusive) and are cut into equal buckets counted back from it, so the last
bucket is always a whole hour (or day) and compares fairly with the one before. Arrivals are
every episode that entered the dead-letter queue, whatever its status now (a retried dead letter
still arrived).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


class Window(StrEnum):
    DAY = "24h"  # 24 hourly buckets
    WEEK = "7d"  # 7 daily buckets


DEFAULT_WINDOW = Window.DAY
WINDOWS = tuple(window.value for window in Window)
# Each window: its bucket width, how many buckets, what a bucket is called, how the window reads.
SHAPES: dict[Window, tuple[int, int, str, str]] = {
    Window.DAY: (HOUR_MS, 24, "hour", "24 hours"),
    Window.WEEK: (DAY_MS, 7, "day", "7 days"),
}


class Direction(StrEnum):
    RISING = "rising"  # more in the last bucket than the one before
    FALLING = "falling"  # fewer
    STEADY = "steady"  # as many (and some)
    QUIET = "quiet"  # none in either


@frozen_dataclass
class Buckets:
    """Where a window's buckets lie: [start, end) cut into `count` buckets of `width` ms."""

    window: Window
    start: int
    width: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.width * self.count

    @property
    def unit(self) -> str:
        return SHAPES[self.window][2]


def buckets_for(window: Window, now: int) -> Buckets:
    """The buckets of `window` ending at `now` (an arrival at `now` is in the last one)."""
    width, count, _, _ = SHAPES[window]
    return Buckets(window, now + 1 - width * count, width, count)


@frozen_dataclass
class Bucket:
    start: int  # epoch ms, inclusive; the bucket ends where the next starts
    count: int


@frozen_dataclass
class Trend:
    """One incident's arrivals per bucket (oldest first, empty buckets zero), the direction of
    the last bucket against the one before, and that direction in words."""

    window: Window
    width: int
    buckets: tuple[Bucket, ...]
    direction: Direction
    summary: str

    @property
    def total(self) -> int:
        return sum(bucket.count for bucket in self.buckets)

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(bucket.count for bucket in self.buckets)

    @property
    def unit(self) -> str:
        return SHAPES[self.window][2]


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" + ("" if count == 1 else "s")


def direction_of(last: int, before: int) -> Direction:
    if last == before:
        return Direction.QUIET if last == 0 else Direction.STEADY
    return Direction.RISING if last > before else Direction.FALLING


def describe(window: Window, counts: tuple[int, ...]) -> tuple[Direction, str]:
    """The direction of the last bucket against the one before, and a sentence saying it."""
    unit, span = SHAPES[window][2], SHAPES[window][3]
    last, before = counts[-1], counts[-2]
    direction = direction_of(last, before)
    if direction != Direction.QUIET:
        return direction, f"{direction}: {last} in the last {unit}, {before} the {unit} before"
    total = sum(counts)
    if total == 0:
        return direction, f"quiet: none in the last {span}"
    return direction, f"quiet: none in the last {_plural(2, unit)}, {total} in the last {span}"


def trend_of(buckets: Buckets, arrivals: Mapping[int, int]) -> Trend:
    """The trend from the arrivals counted per bucket index (0 the oldest; absent ones are
    zero; indexes outside the window are ignored)."""
    counts = tuple(int(arrivals.get(index, 0)) for index in range(buckets.count))
    direction, summary = describe(buckets.window, counts)
    return Trend(
        window=buckets.window,
        width=buckets.width,
        buckets=tuple(
            Bucket(buckets.start + index * buckets.width, count)
            for index, count in enumerate(counts)
        ),
        direction=direction,
        summary=summary,
    )


def parse_window(text: str | None, default: Window | None = None) -> Window | None:
    """A `trend` query value: 24h or 7d; empty or absent is `default`; anything else refused."""
    if text is None or text == "":
        return default
    try:
        return Window(text)
    except ValueError as error:
        raise InvalidRequest(
            f"trend must be one of {', '.join(WINDOWS)}",
            {"field": "trend", "allowed": list(WINDOWS)},
        ) from error


def chart_label(trend: Trend) -> str:
    """What a chart of the trend shows, in words (for its title and screen readers)."""
    unit, span = SHAPES[trend.window][2], SHAPES[trend.window][3]
    numbers = ", ".join(str(count) for count in trend.counts)
    return (
        f"Dead letters per {unit} over the last {span}, oldest first: {numbers} "
        f"({trend.total} in all). {trend.summary[0].upper()}{trend.summary[1:]}."
    )
