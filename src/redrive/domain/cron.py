"""Cron expressions: parsing them, validating time zones, and finding the next firing time."""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redrive.domain.frozen import frozen_dataclass

__all__ = [
    "CronExpressionError",
    "CronSchedule",
    "CronTimezoneError",
    "next_run_after",
    "parse_cron",
    "validate_timezone",
]


class CronExpressionError(ValueError):
    """A cron expression that cannot be parsed, or that can never fire."""


class CronTimezoneError(ValueError):
    """A time zone that is not an IANA name known to `zoneinfo`."""


@frozen_dataclass(slots=True)
class CronSchedule:
    """A parsed cron expression.

    Field schedules hold the sorted, distinct values each field allows; `days_of_week` uses
    0 = Sunday (7 is folded into 0). An `@every` schedule has `interval` set and empty fields.
    """

    text: str
    seconds: tuple[int, ...] = ()
    minutes: tuple[int, ...] = ()
    hours: tuple[int, ...] = ()
    days_of_month: tuple[int, ...] = ()
    months: tuple[int, ...] = ()
    days_of_week: tuple[int, ...] = ()
    day_of_month_restricted: bool = False
    day_of_week_restricted: bool = False
    interval: timedelta | None = None

    @property
    def is_interval(self) -> bool:
        """True for `@every <duration>` schedules."""
        return self.interval is not None


@frozen_dataclass(slots=True)
class _FieldSpec:
    name: str
    minimum: int
    maximum: int
    names: Mapping[str, int]


_NO_NAMES: Mapping[str, int] = {}
_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
_WEEKDAY_NAMES = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}
_SECOND = _FieldSpec("second", 0, 59, _NO_NAMES)
_MINUTE = _FieldSpec("minute", 0, 59, _NO_NAMES)
_HOUR = _FieldSpec("hour", 0, 23, _NO_NAMES)
_DAY_OF_MONTH = _FieldSpec("day-of-month", 1, 31, _NO_NAMES)
_MONTH = _FieldSpec("month", 1, 12, _MONTH_NAMES)
_DAY_OF_WEEK = _FieldSpec("day-of-week", 0, 7, _WEEKDAY_NAMES)
_SUNDAY_AS_SEVEN = 7

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = "@every"
_EVERY_DURATION = re.compile(r"(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?(?:(?P<seconds>\d+)s)?")
_MAX_INTERVAL_SECONDS = 3660 * 86_400  # about ten years: keeps `after + interval` in range
# Longest days in each month, allowing for leap years.
_LONGEST_MONTH = dict(enumerate((31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), start=1))
# Every parsed schedule fires eventually (parse_cron rejects impossible day/month pairs), but
# rare combinations recur slowly: February 29 can be 8 years apart (around 2100) and "the 1st of
# a month on a given weekday" up to 12 years apart. The horizon covers both while bounding work.
_SEARCH_HORIZON_YEARS = 14
_LAST_SEARCH_YEAR = 9998
_ONE_SECOND = timedelta(seconds=1)
_ONE_MINUTE = timedelta(minutes=1)
_ONE_HOUR = timedelta(hours=1)
_ONE_DAY = timedelta(days=1)


def parse_cron(text: str) -> CronSchedule:
    """Parse a 5-field, 6-field (leading seconds), `@alias` or `@every <duration>` expression."""
    try:
        return _parse(text)
    except CronExpressionError as error:
        raise CronExpressionError(f"invalid cron expression {text!r}: {error}") from None


def validate_timezone(name: str) -> str:
    """Return `name` if it is an IANA time zone name; offsets and unknown names are refused."""
    _load_zone(name)
    return name


def next_run_after(expression: CronSchedule, after: datetime, timezone: str) -> datetime:
    """The first firing time strictly after `after`, as an aware UTC datetime.

    Fields are matched against wall-clock time in `timezone`. A wall time skipped by a DST gap
    does not fire; a wall time repeated by a DST overlap fires once, at its first occurrence.
    """
    zone = _load_zone(timezone)
    if after.tzinfo is None or after.utcoffset() is None:
        raise ValueError("after must be a timezone-aware datetime")
    after_utc = after.astimezone(UTC)
    if expression.interval is not None:
        return after_utc.replace(microsecond=0) + expression.interval
    if not _has_every_field(expression):
        raise CronExpressionError(f"cron schedule {expression.text!r} has an empty field")
    wall = _first_candidate_wall(after_utc, zone)
    last_year = min(wall.year + _SEARCH_HORIZON_YEARS, _LAST_SEARCH_YEAR)
    while True:
        wall = _first_match_at_or_after(expression, wall, last_year)
        instant = _wall_to_utc(wall, zone)
        if instant is None:
            wall = _first_wall_after_gap(wall, zone)
        elif instant > after_utc:
            return instant
        else:
            wall += _ONE_SECOND


# --- parsing -----------------------------------------------------------------------------------


def _parse(text: str) -> CronSchedule:
    tokens = text.split()
    if not tokens:
        raise CronExpressionError("the expression is empty")
    if tokens[0].startswith("@"):
        return _parse_alias(text, tokens)
    if len(tokens) == 5:
        tokens = ["0", *tokens]
    elif len(tokens) != 6:
        raise CronExpressionError(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a "
            f"leading second field, got {len(tokens)}"
        )
    return _schedule_from_fields(text, tokens)


def _parse_alias(text: str, tokens: list[str]) -> CronSchedule:
    alias = tokens[0].lower()
    if alias == _EVERY:
        if len(tokens) != 2:
            raise CronExpressionError("@every takes exactly one duration, such as @every 30s")
        return CronSchedule(text=text, interval=_parse_every_duration(tokens[1]))
    if alias not in _ALIASES:
        known = ", ".join([*_ALIASES, "@every <duration>"])
        raise CronExpressionError(f"unknown alias {tokens[0]!r} (known: {known})")
    if len(tokens) != 1:
        raise CronExpressionError(f"alias {tokens[0]!r} takes no further fields")
    return _schedule_from_fields(text, ["0", *_ALIASES[alias].split()])


def _parse_every_duration(duration: str) -> timedelta:
    match = _EVERY_DURATION.fullmatch(duration)
    if match is None or not duration:
        raise CronExpressionError(
            f"@every duration {duration!r} is not a duration such as 30s, 5m or 1h30m"
        )
    parts = {unit: int(value) for unit, value in match.groupdict().items() if value is not None}
    total_seconds = (
        parts.get("hours", 0) * 3600 + parts.get("minutes", 0) * 60 + parts.get("seconds", 0)
    )
    if total_seconds < 1:
        raise CronExpressionError("@every duration must be at least 1s")
    if total_seconds > _MAX_INTERVAL_SECONDS:
        raise CronExpressionError(
            f"@every duration must be at most {_MAX_INTERVAL_SECONDS // 3600}h"
        )
    return timedelta(seconds=total_seconds)


_FIELD_SPECS = (_SECOND, _MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK)


def _schedule_from_fields(text: str, tokens: list[str]) -> CronSchedule:
    """Build a schedule from six field texts, reporting every bad field at once."""
    expanded: list[tuple[int, ...]] = []
    problems: list[str] = []
    for field, spec in zip(tokens, _FIELD_SPECS, strict=True):
        try:
            expanded.append(tuple(sorted(_parse_field(field, spec))))
        except CronExpressionError as error:
            problems.append(str(error))
    if problems:
        raise CronExpressionError("; ".join(problems))
    seconds, minutes, hours, days_of_month, months, days_of_week = expanded
    schedule = CronSchedule(
        text=text,
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days_of_month=days_of_month,
        months=months,
        days_of_week=tuple(sorted({day % _SUNDAY_AS_SEVEN for day in days_of_week})),
        # Vixie cron: a day field starting with "*" (including "*/2") counts as unrestricted.
        day_of_month_restricted=not tokens[3].startswith("*"),
        day_of_week_restricted=not tokens[5].startswith("*"),
    )
    _check_can_fire(schedule)
    return schedule


def _parse_field(field: str, spec: _FieldSpec) -> set[int]:
    values: set[int] = set()
    for item in field.split(","):
        try:
            values.update(_parse_item(item, spec))
        except CronExpressionError as error:
            raise CronExpressionError(f"{spec.name} field {field!r}: {error}") from None
    return values


def _parse_item(item: str, spec: _FieldSpec) -> range:
    if not item:
        raise CronExpressionError("empty list item")
    base, slash, step_text = item.partition("/")
    step = _parse_step(step_text) if slash else 1
    if base == "*":
        return range(spec.minimum, spec.maximum + 1, step)
    if "-" in base:
        start_text, _, end_text = base.partition("-")
        start = _parse_value(start_text, spec, range_end=False)
        end = _parse_value(end_text, spec, range_end=True)
        if start > end:
            raise CronExpressionError(f"range {base!r} is reversed ({start} > {end})")
        return range(start, end + 1, step)
    start = _parse_value(base, spec, range_end=False)
    # "5/15" means "from 5 to the end of the field, every 15" (as in Quartz and robfig/cron).
    return range(start, (spec.maximum if slash else start) + 1, step)


def _parse_step(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise CronExpressionError(f"step {text!r} is not a whole number")
    step = int(text)
    if step == 0:
        raise CronExpressionError("step 0 is not allowed; a step must be at least 1")
    return step


def _parse_value(text: str, spec: _FieldSpec, *, range_end: bool) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
        if not spec.minimum <= value <= spec.maximum:
            raise CronExpressionError(
                f"value {value} is out of range {spec.minimum}-{spec.maximum}"
            )
        return value
    upper = text.upper()
    if upper in spec.names:
        value = spec.names[upper]
        # "FRI-SUN": Sunday closes a day-of-week range as 7.
        return _SUNDAY_AS_SEVEN if range_end and spec is _DAY_OF_WEEK and value == 0 else value
    if not text:
        raise CronExpressionError("missing value")
    if text.isascii() and text.isalpha() and spec.names:
        known = "-".join((next(iter(spec.names)), list(spec.names)[-1]))
        raise CronExpressionError(f"unknown {spec.name} name {text!r} (use {known})")
    raise CronExpressionError(f"{text!r} is not a number")


def _check_can_fire(schedule: CronSchedule) -> None:
    """Refuse day-of-month/month pairs that never occur, such as February 30."""
    if schedule.day_of_month_restricted and schedule.day_of_week_restricted:
        return  # Either day field may match, and every weekday occurs in every month.
    longest = max(_LONGEST_MONTH[month] for month in schedule.months)
    if min(schedule.days_of_month) > longest:
        raise CronExpressionError(
            f"it can never fire: no allowed month has day {min(schedule.days_of_month)}"
        )


def _load_zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise CronTimezoneError("time zone must be a non-empty IANA name such as UTC or Asia/Tokyo")
    if name[0] in "+-" or name[0].isdigit():
        raise CronTimezoneError(
            f"time zone {name!r} is an offset; use an IANA name such as Asia/Tokyo"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronTimezoneError(
            f"unknown time zone {name!r}; use an IANA name such as UTC or America/New_York"
        ) from None


def _has_every_field(schedule: CronSchedule) -> bool:
    fields = (
        schedule.seconds,
        schedule.minutes,
        schedule.hours,
        schedule.days_of_month,
        schedule.months,
        schedule.days_of_week,
    )
    return all(fields)


# --- searching ---------------------------------------------------------------------------------


def _first_match_at_or_after(schedule: CronSchedule, wall: datetime, last_year: int) -> datetime:
    """The earliest naive wall-clock time at or after `wall` that every field allows."""
    while wall.year <= last_year:
        step = _step_towards_match(schedule, wall)
        if step == wall:
            return wall
        wall = step
    raise CronExpressionError(
        f"cron expression {schedule.text!r} does not fire within {_SEARCH_HORIZON_YEARS} years"
    )


def _step_towards_match(schedule: CronSchedule, wall: datetime) -> datetime:
    """`wall` itself if it matches, else a later time no match can precede."""
    day_start = wall.replace(hour=0, minute=0, second=0)
    if wall.month not in schedule.months:
        return _start_of_next_month(schedule, wall)
    if not _day_matches(schedule, wall):
        return day_start + _ONE_DAY
    hour = _next_allowed(schedule.hours, wall.hour)
    if hour is None:
        return day_start + _ONE_DAY
    if hour != wall.hour:
        return wall.replace(hour=hour, minute=0, second=0)
    minute = _next_allowed(schedule.minutes, wall.minute)
    if minute is None:
        return wall.replace(minute=0, second=0) + _ONE_HOUR
    if minute != wall.minute:
        return wall.replace(minute=minute, second=0)
    second = _next_allowed(schedule.seconds, wall.second)
    if second is None:
        return wall.replace(second=0) + _ONE_MINUTE
    return wall.replace(second=second)


def _start_of_next_month(schedule: CronSchedule, wall: datetime) -> datetime:
    month = _next_allowed(schedule.months, wall.month + 1)
    if month is None:
        return datetime(wall.year + 1, schedule.months[0], 1)
    return datetime(wall.year, month, 1)


def _day_matches(schedule: CronSchedule, wall: datetime) -> bool:
    in_day_of_month = wall.day in schedule.days_of_month
    in_day_of_week = wall.isoweekday() % 7 in schedule.days_of_week
    if schedule.day_of_month_restricted and schedule.day_of_week_restricted:
        return in_day_of_month or in_day_of_week
    return in_day_of_month and in_day_of_week


def _next_allowed(values: tuple[int, ...], current: int) -> int | None:
    """The smallest allowed value >= `current`, or None."""
    index = bisect_left(values, current)
    return values[index] if index < len(values) else None


def _first_candidate_wall(after_utc: datetime, zone: ZoneInfo) -> datetime:
    """The earliest wall-clock time in `zone` that could still fire after `after_utc`.

    During the second pass of a DST overlap the repeated wall times already fired on their first
    pass, so the search starts at the end of the overlap instead of walking through it.
    """
    local = after_utc.astimezone(zone)
    wall = local.replace(tzinfo=None, microsecond=0, fold=0)
    first_offset = local.replace(fold=0).utcoffset()
    second_offset = local.utcoffset()
    if local.fold == 0 or first_offset is None or second_offset is None:
        return wall + _ONE_SECOND
    overlap = first_offset - second_offset
    if overlap <= timedelta(0):
        return wall + _ONE_SECOND
    now = math.floor(after_utc.timestamp())
    transition = _transition_instant(now - int(overlap.total_seconds()), now, zone)
    return max(_shown_wall(transition, zone) + overlap, wall + _ONE_SECOND)


def _first_wall_after_gap(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first existing wall-clock time after `wall`, which a DST gap skips."""
    # In a gap, fold=1 applies the offset after the transition and fold=0 the one before, which
    # gives one instant before the transition and one after it.
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    if before >= after:
        return wall + _ONE_SECOND
    return max(_shown_wall(_transition_instant(before, after, zone), zone), wall + _ONE_SECOND)


def _transition_instant(low: int, high: int, zone: ZoneInfo) -> int:
    """The first epoch second in (low, high] whose UTC offset differs from the one at `low`."""
    offset_before = datetime.fromtimestamp(low, zone).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == offset_before:
            low = middle
        else:
            high = middle
    return high


def _shown_wall(epoch_seconds: int, zone: ZoneInfo) -> datetime:
    """The naive wall-clock time `zone` shows at an epoch second."""
    return datetime.fromtimestamp(epoch_seconds, zone).replace(tzinfo=None)


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The first UTC instant showing `wall` in `zone`, or None when a DST gap skips it."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return instant
