"""The sweep loop's pacing: retention trims with nothing to trim back off (up to 2 s), trims
that find work run every sweep again, the finished prune waits until its oldest job can be due,
and the other tasks and an unpaced sweep run every time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain.envelope import read_envelope
from redrive.service import sweeper as sweeper_module
from redrive.service.attempts import AckRequest
from redrive.service.facade import Service
from redrive.service.sweeper import (
    FINISHED_RECHECK_MS,
    FIRST_BACKOFF_MS,
    PACED_TASKS,
    TRIM_BACKOFF_MS,
)
from redrive.service.workers import FetchRequest
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


async def test_an_idle_finished_prune_waits_for_the_recheck_not_the_backoff(
    service: Service, clock: ManualClock
) -> None:
    sweeper = service.sweeper
    assert (await sweeper.sweep(paced=True))["finished"] == 0  # no finished job: none is due
    clock.advance(4 * TRIM_BACKOFF_MS)
    assert "finished" not in await sweeper.sweep(paced=True)
    clock.advance(FINISHED_RECHECK_MS - 4 * TRIM_BACKOFF_MS)
    assert "finished" in await sweeper.sweep(paced=True)


async def test_the_finished_prune_runs_when_its_oldest_job_comes_due(
    service: Service, clock: ManualClock
) -> None:
    retention = 60_000
    service.runtime.options = replace(service.runtime.options, finished_job_retention_ms=retention)
    sweeper = service.sweeper
    await service.jobs.enqueue(CALLER, read_envelope({"type": "t", "args": []}))
    (job,) = await service.workers.fetch(CALLER, FetchRequest(["default"], 1, "w1"))
    await service.workers.ack_many(CALLER, [AckRequest(job.id, None, job.lease_token, None)])
    completed_at = clock.now_ms()
    clock.advance(10_000)
    assert (await sweeper.sweep(paced=True))["finished"] == 0
    assert sweeper.due_at["finished"] == completed_at + retention
    clock.advance(retention - 10_000 - 1)  # the old pacing read the table every 2 s meanwhile
    assert "finished" not in await sweeper.sweep(paced=True)
    clock.advance(1 + TRIM_BACKOFF_MS)
    assert (await sweeper.sweep(paced=True))["finished"] == 1
    assert sweeper.due_at["finished"] == clock.now_ms() + retention  # none left: from now


async def test_a_finished_prune_with_a_full_batch_runs_again_at_the_next_sweep(
    service: Service, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweeper_module, "BATCH", 1)
    retention = 60_000
    service.runtime.options = replace(service.runtime.options, finished_job_retention_ms=retention)
    sweeper = service.sweeper
    for _ in range(2):
        await service.jobs.enqueue(CALLER, read_envelope({"type": "t", "args": []}))
    fetched = await service.workers.fetch(CALLER, FetchRequest(["default"], 2, "w1"))
    await service.workers.ack_many(
        CALLER, [AckRequest(job.id, None, job.lease_token, None) for job in fetched]
    )
    clock.advance(retention + 1)
    assert (await sweeper.sweep(paced=True))["finished"] == 1  # a full batch: more may be due
    assert sweeper.due_at["finished"] == clock.now_ms()
    assert (await sweeper.sweep(paced=True))["finished"] == 1  # the next sweep, no backoff
    assert sweeper.due_at["finished"] == clock.now_ms()
    assert (await sweeper.sweep(paced=True))["finished"] == 0  # caught up: waits from now
    assert sweeper.due_at["finished"] == clock.now_ms() + retention
