"""The sweep loop's pacing: retention trims with nothing to trim back off (up to 2 s), trims
that find work run every sweep again, and the other tasks and an unpaced sweep run every time."""

from __future__ import annotations

import pytest

from redrive.domain.envelope import read_envelope
from redrive.service.facade import Service
from redrive.service.sweeper import FIRST_BACKOFF_MS, PACED_TASKS, TRIM_BACKOFF_MS
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_idle_trims_back_off_and_the_rest_run_every_sweep(
    service: Service, clock: ManualClock
) -> None:
    sweeper = service.sweeper
    first = await sweeper.sweep(paced=True)
    assert first.keys() >= PACED_TASKS and all(first[name] == 0 for name in PACED_TASKS)
    again = await sweeper.sweep(paced=True)
    assert not PACED_TASKS & again.keys()
    assert {"promote", "expire", "reap", "crons", "replay", "redrives"} <= again.keys()
    assert (await sweeper.sweep()).keys() >= PACED_TASKS  # unpaced: everything, as tests use it
    waits = []
    for _ in range(5):
        wait = sweeper.backoff_ms["events"]
        clock.advance(wait - 1)
        assert "events" not in await sweeper.sweep(paced=True)
        clock.advance(1)
        assert "events" in await sweeper.sweep(paced=True)
        waits.append(wait)
    assert waits == [FIRST_BACKOFF_MS, 800, 1_600, TRIM_BACKOFF_MS, TRIM_BACKOFF_MS]


async def test_a_trim_that_finds_work_runs_every_sweep_again(
    service: Service, clock: ManualClock
) -> None:
    sweeper = service.sweeper
    await sweeper.sweep(paced=True)
    await service.jobs.enqueue(CALLER, read_envelope({"type": "t", "args": []}))
    clock.advance(sweeper.runtime.options.event_retention_ms + 1)
    assert (await sweeper.sweep(paced=True))["events"] == 1
    assert sweeper.backoff_ms["events"] == 0
    assert "events" in await sweeper.sweep(paced=True)
