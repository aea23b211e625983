"""Unit tests for the worker's failure lines: one each while they are few, then a count a
second, and nothing held back once the worker stops."""

from __future__ import annotations

import asyncio

import pytest

from redrive.worker.failure_log import FailureLog

pytestmark = pytest.mark.anyio
ERROR: dict[str, object] = {"type": "SmtpError", "message": "relay refused"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "redrive.worker"]


async def test_each_failure_has_its_line_until_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = FailureLog(lines_per_second=2, clock=clock)
    for number in range(2):
        failures.failed(f"job-{number}", "email.send", 1, ERROR)
    assert lines(caplog) == [
        "job job-0 (email.send) failed on attempt 1: SmtpError: relay refused",
        "job job-1 (email.send) failed on attempt 1: SmtpError: relay refused",
    ]


async def test_past_the_limit_the_rest_of_the_second_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failures = FailureLog(lines_per_second=1, clock=clock)
    failures.failed("job-0", "email.send", 1, ERROR)
    failures.failed("job-1", "email.send", 1, ERROR)
    failures.failed("job-2", "email.send", 2, ERROR)
    failures.failed("job-3", "sms.send", 1, {"type": "Timeout", "message": "slow"})
    assert len(lines(caplog)) == 1
    clock.now += 1.0  # the next second: its first failure writes the count, then its own line
    failures.failed("job-4", "email.send", 1, ERROR)
    assert lines(caplog)[1:] == [
        "3 more jobs failed (beyond 1 lines a second): "
        "email.send SmtpError x2, sms.send Timeout x1",
        "job job-4 (email.send) failed on attempt 1: SmtpError: relay refused",
    ]


async def test_a_count_held_back_is_written_after_a_second_without_more_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog(lines_per_second=0)
    failures.failed("job-0", "email.send", 1, ERROR)
    assert lines(caplog) == []
    await asyncio.sleep(1.1)
    assert lines(caplog) == [
        "1 more jobs failed (beyond 0 lines a second): email.send SmtpError x1"
    ]


async def test_flush_writes_what_is_held_and_nothing_when_nothing_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog(lines_per_second=0)
    failures.flush()
    failures.failed("job-0", "email.send", 1, ERROR)
    failures.flush()
    failures.flush()
    assert lines(caplog) == [
        "1 more jobs failed (beyond 0 lines a second): email.send SmtpError x1"
    ]
