"""ISO 8601 durations and RFC 3339 timestamps, as epoch milliseconds."""

from __future__ import annotations

import re
import time
from datetime import datetime
from functools import lru_cache

from redrive.domain.errors import InvalidRequest

_DURATION = re.compile(
    r"^P(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
# Durations past a century are mistakes, and beyond them timestamps stop fitting the tables.
MAX_DURATION_MS = 100 * 365 * 86_400_000
_UNIT_MS = {
    "weeks": 604_800_000,
    "days": 86_400_000,
    "hours": 3_600_000,
    "minutes": 60_000,
    "seconds": 1_000,
}
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_duration_ms(text: str, field: str) -> int:
    """`PT1S` -> 1000. Weeks, days, hours, minutes and (fractional) seconds are accepted."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise InvalidRequest(
            f"{field} must be an ISO 8601 duration such as PT1S or P180D, got {text!r}",
            {"field": field},
        )
    total = sum(float(value) * _UNIT_MS[unit] for unit, value in match.groupdict().items() if value)
    if total > MAX_DURATION_MS:
        raise InvalidRequest(f"{field} must be at most 100 years, got {text!r}", {"field": field})
    return round(total)


# Retry policies share a few durations (the default policy's two in every enqueue's answer).
DURATIONS_REMEMBERED = 256


@lru_cache(maxsize=DURATIONS_REMEMBERED)
def format_duration(milliseconds: int) -> str:
    """1000 -> `PT1S`; whole days print as `P180D`."""
    if milliseconds % 86_400_000 == 0 and milliseconds > 0:
        return f"P{milliseconds // 86_400_000}D"
    seconds = milliseconds / 1000
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"PT{text}S"


# The moments formatted lately: a batch's records and events share one `now` (1.9 us a call).
TIMESTAMPS_REMEMBERED = 1024
# The seconds formatted lately: one-job enqueues each have a millisecond of their own, but a
# second's worth of them share its date and time (the miss was 2.5% of the server's CPU).
SECONDS_REMEMBERED = 64


@lru_cache(maxsize=TIMESTAMPS_REMEMBERED)
def format_timestamp(milliseconds: int) -> str:
    """Epoch milliseconds -> `2026-03-01T10:00:02.120Z`."""
    seconds, millis = divmod(milliseconds, 1000)
    return f"{_second(seconds)}.{MILLISECONDS[millis]}Z"


# Each millisecond's three digits, found rather than formatted (`:03d` is a format-spec parse).
MILLISECONDS = [f"{value:03d}" for value in range(1000)]


@lru_cache(maxsize=SECONDS_REMEMBERED)
def _second(seconds: int) -> str:
    """Epoch seconds -> `2026-03-01T10:00:02`."""
    moment = time.gmtime(seconds)
    return (
        f"{moment.tm_year:04d}-{moment.tm_mon:02d}-{moment.tm_mday:02d}T"
        f"{moment.tm_hour:02d}:{moment.tm_min:02d}:{moment.tm_sec:02d}"
    )


def parse_timestamp(text: object, field: str, now_ms: int) -> tuple[int, str | None]:
    """An RFC 3339 timestamp or a relative `+PT5S`.

    Returns the moment in epoch milliseconds and the client's original text when it was absolute,
    so that it can be returned byte for byte.
    """
    if not isinstance(text, str):
        raise InvalidRequest(f"{field} must be an RFC 3339 timestamp string", {"field": field})
    if text.startswith("+"):
        return now_ms + parse_duration_ms(text[1:], field), None
    if not _TIMESTAMP.fullmatch(text):
        raise InvalidRequest(
            f"{field} must be an RFC 3339 timestamp with an offset, got {text!r}",
            {"field": field},
        )
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError as error:
        raise InvalidRequest(
            f"{field} is not a valid timestamp: {error}", {"field": field}
        ) from error
    return round(moment.timestamp() * 1000), text
