"""Unit tests for cron parsing, time zone validation and next-run computation."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from redrive.domain.cron import (
    CronExpressionError,
    CronSchedule,
    CronTimezoneError,
    next_run_after,
    parse_cron,
    validate_timezone,
)

EVERY_MINUTE = tuple(range(60))
EVERY_HOUR = tuple(range(24))
EVERY_DAY_OF_MONTH = tuple(range(1, 32))
EVERY_MONTH = tuple(range(1, 13))
EVERY_WEEKDAY = tuple(range(7))


def utc(text: str) -> datetime:
    """`2026-03-02T10:07` -> an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- parsing: valid expressions ----------------------------------------------------------------

# (expression, field name, expected values)
VALID_FIELDS = [
    ("* * * * *", "seconds", (0,)),
    ("* * * * *", "minutes", EVERY_MINUTE),
    ("* * * * *", "hours", EVERY_HOUR),
    ("* * * * *", "days_of_month", EVERY_DAY_OF_MONTH),
    ("* * * * *", "months", EVERY_MONTH),
    ("* * * * *", "days_of_week", EVERY_WEEKDAY),
    ("*/15 * * * *", "minutes", (0, 15, 30, 45)),
    ("1-30/5 * * * *", "minutes", (1, 6, 11, 16, 21, 26)),
    ("5/15 * * * *", "minutes", (5, 20, 35, 50)),
    ("0,30,15 * * * *", "minutes", (0, 15, 30)),
    ("0 9-17/4 * * *", "hours", (9, 13, 17)),
    ("0 0 */10 * *", "days_of_month", (1, 11, 21, 31)),
    ("0 0 1 JAN-MAR *", "months", (1, 2, 3)),
    ("0 0 1 jan,Jul,DEC *", "months", (1, 7, 12)),
    ("0 9 * * MON-FRI", "days_of_week", (1, 2, 3, 4, 5)),
    ("0 0 * * 7", "days_of_week", (0,)),
    ("0 0 * * 0,7", "days_of_week", (0,)),
    ("0 0 * * 5-7", "days_of_week", (0, 5, 6)),
    ("0 0 * * FRI-SUN", "days_of_week", (0, 5, 6)),
    ("0 0 * * SUN-SAT", "days_of_week", EVERY_WEEKDAY),
    ("0 0 * * */2", "days_of_week", (0, 2, 4, 6)),
    ("30 0 0 * * *", "seconds", (30,)),
    ("*/20 * * * * *", "seconds", (0, 20, 40)),
    ("*/20 * * * * *", "minutes", EVERY_MINUTE),
    ("  0   0 * * *  ", "hours", (0,)),
    ("@yearly", "months", (1,)),
    ("@annually", "days_of_month", (1,)),
    ("@monthly", "days_of_month", (1,)),
    ("@monthly", "months", EVERY_MONTH),
    ("@weekly", "days_of_week", (0,)),
    ("@daily", "hours", (0,)),
    ("@midnight", "minutes", (0,)),
    ("@hourly", "minutes", (0,)),
    ("@hourly", "hours", EVERY_HOUR),
    ("@HOURLY", "minutes", (0,)),
    ("@every 30s", "interval", timedelta(seconds=30)),
    ("@every 5m", "interval", timedelta(minutes=5)),
    ("@every 1h30m", "interval", timedelta(hours=1, minutes=30)),
    ("@every 90s", "interval", timedelta(seconds=90)),
    ("@every 2h0m5s", "interval", timedelta(hours=2, seconds=5)),
    ("0 0 * * *", "interval", None),
]


@pytest.mark.parametrize(("expression", "field", "expected"), VALID_FIELDS)
def test_parse_expands_fields(expression: str, field: str, expected: object) -> None:
    assert getattr(parse_cron(expression), field) == expected


# (expression, day_of_month_restricted, day_of_week_restricted)
DAY_RESTRICTIONS = [
    ("0 0 * * *", False, False),
    ("0 0 13 * *", True, False),
    ("0 0 * * FRI", False, True),
    ("0 0 13 * FRI", True, True),
    ("0 0 */2 * MON", False, True),  # Vixie: a field starting with "*" is unrestricted
    ("@weekly", False, True),
    ("@monthly", True, False),
]


@pytest.mark.parametrize(("expression", "day_of_month", "day_of_week"), DAY_RESTRICTIONS)
def test_parse_records_day_restrictions(
    expression: str, day_of_month: bool, day_of_week: bool
) -> None:
    schedule = parse_cron(expression)
    assert schedule.day_of_month_restricted is day_of_month
    assert schedule.day_of_week_restricted is day_of_week


def test_schedule_keeps_original_text_and_is_frozen() -> None:
    schedule = parse_cron("*/5 * * * *")
    assert isinstance(schedule, CronSchedule)
    assert schedule.text == "*/5 * * * *"
    assert not schedule.is_interval
    assert parse_cron("@every 30s").is_interval
    assert parse_cron("*/5 * * * *") == schedule
    with pytest.raises(AttributeError):
        schedule.text = "other"  # type: ignore[misc]


# --- parsing: invalid expressions --------------------------------------------------------------

# (expression, fragment the error message must contain)
INVALID_EXPRESSIONS = [
    ("", "empty"),
    ("   ", "empty"),
    ("not a cron", "expected 5 fields"),
    ("not a valid cron", "got 4"),
    ("0 0 0 0 0 0 0", "got 7"),
    ("* * * *", "got 4"),
    (
        "99 25 32 13 8",
        "minute field '99': value 99 is out of range 0-59; "
        "hour field '25': value 25 is out of range 0-23; "
        "day-of-month field '32': value 32 is out of range 1-31; "
        "month field '13': value 13 is out of range 1-12; "
        "day-of-week field '8': value 8 is out of range 0-7",
    ),
    ("0 25 * * *", "hour field '25': value 25 is out of range 0-23"),
    ("0 0 32 * *", "day-of-month field '32': value 32 is out of range 1-31"),
    ("0 0 0 * *", "day-of-month field '0': value 0 is out of range 1-31"),
    ("0 0 * 13 *", "month field '13': value 13 is out of range 1-12"),
    ("0 0 * * 8", "day-of-week field '8': value 8 is out of range 0-7"),
    ("60 * * * * *", "second field '60': value 60 is out of range 0-59"),
    ("*/0 * * * *", "step 0 is not allowed"),
    ("1-10/0 * * * *", "step 0 is not allowed"),
    ("*/x * * * *", "step 'x' is not a whole number"),
    ("*/ * * * *", "step '' is not a whole number"),
    ("30-10 * * * *", "range '30-10' is reversed"),
    ("0 0 * * FRI-MON", "range 'FRI-MON' is reversed"),
    ("0 0 * FOO *", "unknown month name 'FOO'"),
    ("0 0 * * FUN", "unknown day-of-week name 'FUN'"),
    ("0 0 * * JAN", "unknown day-of-week name 'JAN'"),
    ("0 0 * MON *", "unknown month name 'MON'"),
    ("0 MON * * *", "hour field 'MON': 'MON' is not a number"),
    ("1,,2 * * * *", "empty list item"),
    ("1, * * * *", "empty list item"),
    ("-5 * * * *", "missing value"),
    ("1-2-3 * * * *", "'2-3' is not a number"),
    ("? * * * *", "'?' is not a number"),
    ("0 0 30 2 *", "can never fire"),
    ("0 0 31 4,6,9,11 *", "can never fire"),
    ("@fortnightly", "unknown alias '@fortnightly'"),
    ("@reboot", "unknown alias '@reboot'"),
    ("@daily 5", "takes no further fields"),
    ("@every", "@every takes exactly one duration"),
    ("@every 1m 2s", "@every takes exactly one duration"),
    ("@every 0s", "at least 1s"),
    ("@every soon", "'soon' is not a duration"),
    ("@every 30", "'30' is not a duration"),
    ("@every 1.5h", "'1.5h' is not a duration"),
    ("@every 30s1h", "'30s1h' is not a duration"),
    ("@every 999999999h", "at most"),
]


@pytest.mark.parametrize(("expression", "fragment"), INVALID_EXPRESSIONS)
def test_parse_rejects_with_a_message_naming_the_problem(expression: str, fragment: str) -> None:
    with pytest.raises(CronExpressionError) as caught:
        parse_cron(expression)
    message = str(caught.value)
    assert fragment in message
    assert message.startswith(f"invalid cron expression {expression!r}")
    assert isinstance(caught.value, ValueError)


# --- time zones --------------------------------------------------------------------------------

VALID_TIMEZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Europe/London", "EST", "Etc/GMT+9"]
INVALID_TIMEZONES = [
    ("+09:00", "offset"),
    ("-05:00", "offset"),
    ("09:00", "offset"),
    ("0", "offset"),
    ("", "non-empty"),
    ("JST", "unknown time zone 'JST'"),
    ("Not/AZone", "unknown time zone"),
    ("America", "unknown time zone"),
    ("../etc", "unknown time zone"),
    ("/etc/passwd", "unknown time zone"),
    ("UTC ", "unknown time zone"),
]


@pytest.mark.parametrize("name", VALID_TIMEZONES)
def test_validate_timezone_accepts_iana_names(name: str) -> None:
    assert validate_timezone(name) == name


@pytest.mark.parametrize(("name", "fragment"), INVALID_TIMEZONES)
def test_validate_timezone_rejects(name: str, fragment: str) -> None:
    with pytest.raises(CronTimezoneError, match=fragment.replace("(", r"\(")) as caught:
        validate_timezone(name)
    assert isinstance(caught.value, ValueError)


# --- next run ----------------------------------------------------------------------------------

# (case id, expression, time zone, after (UTC), expected next run (UTC))
NEXT_RUNS = [
    ("quarter-hour", "*/15 * * * *", "UTC", "2026-03-02T10:07", "2026-03-02T10:15"),
    ("strictly-after", "*/15 * * * *", "UTC", "2026-03-02T10:15", "2026-03-02T10:30"),
    ("sub-second", "*/15 * * * *", "UTC", "2026-03-02T10:14:59.999", "2026-03-02T10:15"),
    ("hour-rollover", "*/15 * * * *", "UTC", "2026-03-02T10:50", "2026-03-02T11:00"),
    ("year-rollover", "* * * * *", "UTC", "2026-12-31T23:59:30", "2027-01-01T00:00"),
    ("tokyo-midnight", "0 0 * * *", "Asia/Tokyo", "2026-03-02T10:00", "2026-03-02T15:00"),
    ("tokyo-same-day", "0 0 * * *", "Asia/Tokyo", "2026-03-02T14:59", "2026-03-02T15:00"),
    ("kolkata-half-hour", "0 0 * * *", "Asia/Kolkata", "2026-03-02T00:00", "2026-03-02T18:30"),
    ("new-york-9am", "0 9 * * *", "America/New_York", "2026-06-01T12:00", "2026-06-01T13:00"),
    ("weekday-over-weekend", "0 9 * * MON-FRI", "UTC", "2026-03-06T09:00", "2026-03-09T09:00"),
    ("weekday-same-day", "0 9 * * MON-FRI", "UTC", "2026-03-06T08:00", "2026-03-06T09:00"),
    ("fri-to-sun", "0 12 * * FRI-SUN", "UTC", "2026-03-07T12:00", "2026-03-08T12:00"),
    ("sunday-as-7", "0 0 * * 7", "UTC", "2026-03-04T00:00", "2026-03-08T00:00"),
    ("31st-skips-april", "0 0 31 * *", "UTC", "2026-03-31T00:00", "2026-05-31T00:00"),
    ("31st-skips-to-july", "0 0 31 * *", "UTC", "2026-05-31T00:00", "2026-07-31T00:00"),
    ("leap-day", "0 0 29 2 *", "UTC", "2026-03-01T00:00", "2028-02-29T00:00"),
    ("leap-day-over-2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00", "2104-02-29T00:00"),
    ("month-names", "0 0 1 JAN,JUL *", "UTC", "2026-02-10T00:00", "2026-07-01T00:00"),
    ("hourly", "@hourly", "UTC", "2026-03-02T10:59:59", "2026-03-02T11:00"),
    ("hourly-on-the-hour", "@hourly", "UTC", "2026-03-02T11:00", "2026-03-02T12:00"),
    ("daily", "@daily", "UTC", "2026-03-02T10:00", "2026-03-03T00:00"),
    ("weekly", "@weekly", "UTC", "2026-03-04T10:00", "2026-03-08T00:00"),
    ("monthly", "@monthly", "UTC", "2026-03-04T10:00", "2026-04-01T00:00"),
    ("yearly", "@yearly", "UTC", "2026-06-01T00:00", "2027-01-01T00:00"),
    ("every-90s", "@every 90s", "UTC", "2026-03-02T10:00", "2026-03-02T10:01:30"),
    ("every-drops-fraction", "@every 90s", "UTC", "2026-03-02T10:00:00.5", "2026-03-02T10:01:30"),
    ("every-1h30m", "@every 1h30m", "Asia/Tokyo", "2026-03-02T23:00", "2026-03-03T00:30"),
    ("seconds-field", "30 */10 * * * *", "UTC", "2026-03-02T10:00:30", "2026-03-02T10:10:30"),
    ("seconds-same-minute", "30 */10 * * * *", "UTC", "2026-03-02T10:00:10", "2026-03-02T10:00:30"),
    ("every-20-seconds", "*/20 * * * * *", "UTC", "2026-03-02T10:00:59", "2026-03-02T10:01:00"),
    # 2026-03-08 02:00-02:59 does not exist in New York: 02:30 that day is skipped.
    ("dst-gap-skipped", "30 2 * * *", "America/New_York", "2026-03-07T08:00", "2026-03-09T06:30"),
    ("dst-gap-from-0100", "30 2 * * *", "America/New_York", "2026-03-08T06:00", "2026-03-09T06:30"),
    ("dst-gap-minutely", "* * * * *", "America/New_York", "2026-03-08T06:59", "2026-03-08T07:00"),
    ("dst-gap-hourly", "0 * * * *", "America/New_York", "2026-03-08T06:30", "2026-03-08T07:00"),
    ("dst-gap-0300-fires", "0 3 * * *", "America/New_York", "2026-03-08T06:00", "2026-03-08T07:00"),
    (
        "dst-gap-seconds",
        "* * * * * *",
        "America/New_York",
        "2026-03-08T06:59:59",
        "2026-03-08T07:00",
    ),
    ("lord-howe-gap", "10 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00", "2026-10-04T15:10"),
    # 2026-11-01 01:00-01:59 happens twice in New York: 01:30 fires once, in EDT.
    ("dst-overlap-first", "30 1 * * *", "America/New_York", "2026-11-01T04:00", "2026-11-01T05:30"),
    ("dst-overlap-once", "30 1 * * *", "America/New_York", "2026-11-01T05:30", "2026-11-02T06:30"),
    (
        "dst-overlap-inside",
        "30 1 * * *",
        "America/New_York",
        "2026-11-01T06:00",
        "2026-11-02T06:30",
    ),
    ("dst-overlap-hourly", "0 * * * *", "America/New_York", "2026-11-01T05:30", "2026-11-01T07:00"),
    (
        "dst-overlap-minute",
        "*/20 * * * *",
        "America/New_York",
        "2026-11-01T06:05",
        "2026-11-01T07:00",
    ),
    (
        "dst-overlap-seconds",
        "* * * * * *",
        "America/New_York",
        "2026-11-01T06:00",
        "2026-11-01T07:00",
    ),
    (
        "dst-overlap-seconds-first",
        "* * * * * *",
        "America/New_York",
        "2026-11-01T05:59:59",
        "2026-11-01T07:00",
    ),
    ("london-gap", "30 1 * * *", "Europe/London", "2026-03-28T12:00", "2026-03-30T00:30"),
    # Both day fields restricted: a day matches if either does (Vixie cron).
    ("or-weekday-first", "0 0 15 * MON", "UTC", "2026-03-01T00:00", "2026-03-02T00:00"),
    ("or-day-of-month-first", "0 0 15 * MON", "UTC", "2026-03-14T00:00", "2026-03-15T00:00"),
    ("or-friday-13th", "0 0 13 * FRI", "UTC", "2026-03-06T00:00", "2026-03-13T00:00"),
    # A day-of-month starting with "*" is unrestricted, so both fields must match.
    ("and-star-step", "0 0 */2 * MON", "UTC", "2026-03-01T00:00", "2026-03-09T00:00"),
    ("and-weekday-only", "0 0 * * MON", "UTC", "2026-03-03T00:00", "2026-03-09T00:00"),
]


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in NEXT_RUNS],
)
def test_next_run_after(expression: str, zone: str, after: str, expected: str) -> None:
    result = next_run_after(parse_cron(expression), utc(after), zone)
    assert result == utc(expected)
    assert result.tzinfo is UTC


def test_next_run_accepts_any_aware_datetime() -> None:
    tokyo_evening = datetime(2026, 3, 2, 19, 7, tzinfo=timezone(timedelta(hours=9)))
    result = next_run_after(parse_cron("*/15 * * * *"), tokyo_evening, "UTC")
    assert result == utc("2026-03-02T10:15")
    assert result.tzinfo is UTC


def test_next_run_accepts_the_second_occurrence_of_an_ambiguous_time() -> None:
    new_york = ZoneInfo("America/New_York")
    second_0130 = datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=new_york)  # 06:30 UTC, in EST
    result = next_run_after(parse_cron("45 1 * * *"), second_0130, "America/New_York")
    assert result == utc("2026-11-02T06:45")


def test_next_run_rejects_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_run_after(parse_cron("* * * * *"), datetime(2026, 3, 2, 10, 0), "UTC")


def test_next_run_rejects_an_unknown_timezone() -> None:
    with pytest.raises(CronTimezoneError, match="offset"):
        next_run_after(parse_cron("* * * * *"), utc("2026-03-02T10:00"), "+09:00")


def test_next_run_gives_up_on_a_hand_built_schedule_that_never_fires() -> None:
    never = CronSchedule(
        text="0 0 31 2 *",
        seconds=(0,),
        minutes=(0,),
        hours=(0,),
        days_of_month=(31,),
        months=(2,),
        days_of_week=EVERY_WEEKDAY,
        day_of_month_restricted=True,
    )
    with pytest.raises(CronExpressionError, match="does not fire within"):
        next_run_after(never, utc("2026-03-02T10:00"), "UTC")


def test_next_run_sequence_is_strictly_increasing_across_dst() -> None:
    schedule = parse_cron("*/30 * * * *")
    moment = utc("2026-10-31T12:00")
    seen: list[datetime] = []
    while moment < utc("2026-11-02T12:00"):
        moment = next_run_after(schedule, moment, "America/New_York")
        seen.append(moment)
    assert all(earlier < later for earlier, later in pairwise(seen))
    # 48 hours of half-hours, minus the two repeated wall times (01:00 and 01:30 in EST).
    assert len(seen) == 96 - 2


# --- cross-check against a brute-force, minute-by-minute oracle -------------------------------

ORACLE_ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",  # 30-minute DST shift
    "Asia/Kolkata",
]
ORACLE_STARTS = [
    "2026-03-07T20:00",  # US spring forward
    "2026-03-28T20:00",  # EU spring forward
    "2026-04-04T10:00",  # Lord Howe fall back
    "2026-10-03T10:00",  # Lord Howe spring forward
    "2026-10-24T20:00",  # EU fall back
    "2026-10-31T20:00",  # US fall back
    "2026-02-27T12:34",  # month end
]
MINUTE_CHOICES = ["*", "*/7", "0,30", "15-45/10", "5", "*/20"]
HOUR_CHOICES = ["*", "1-3", "*/2", "2", "0,12", "1"]
DAY_OF_MONTH_CHOICES = ["*", "1-10", "8", "*/3", "1,28"]
DAY_OF_WEEK_CHOICES = ["*", "SUN", "MON-FRI", "0,6", "*/3"]


def _oracle_matches(schedule: CronSchedule, local: datetime) -> bool:
    in_day_of_month = local.day in schedule.days_of_month
    in_day_of_week = local.isoweekday() % 7 in schedule.days_of_week
    if schedule.day_of_month_restricted and schedule.day_of_week_restricted:
        day_ok = in_day_of_month or in_day_of_week
    else:
        day_ok = in_day_of_month and in_day_of_week
    return (
        day_ok
        and local.month in schedule.months
        and local.hour in schedule.hours
        and local.minute in schedule.minutes
    )


def _oracle_next(schedule: CronSchedule, after: datetime, zone: str) -> datetime | None:
    """Walk real time minute by minute; a repeated wall time only counts on its first pass."""
    tz = ZoneInfo(zone)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(8 * 24 * 60):
        local = moment.astimezone(tz)
        if local.fold == 0 and _oracle_matches(schedule, local):
            return moment
        moment += timedelta(minutes=1)
    return None


def _oracle_cases() -> list[tuple[str, str, str]]:
    chooser = random.Random(20260308)
    cases = []
    for _ in range(60):
        expression = " ".join(
            (
                chooser.choice(MINUTE_CHOICES),
                chooser.choice(HOUR_CHOICES),
                chooser.choice(DAY_OF_MONTH_CHOICES),
                "*",
                chooser.choice(DAY_OF_WEEK_CHOICES),
            )
        )
        cases.append((expression, chooser.choice(ORACLE_ZONES), chooser.choice(ORACLE_STARTS)))
    return cases


@pytest.mark.parametrize(("expression", "zone", "start"), _oracle_cases())
def test_next_run_agrees_with_brute_force(expression: str, zone: str, start: str) -> None:
    schedule = parse_cron(expression)
    moment = utc(start)
    for _ in range(5):
        expected = _oracle_next(schedule, moment, zone)
        if expected is None:
            return
        moment = next_run_after(schedule, moment, zone)
        assert moment == expected
