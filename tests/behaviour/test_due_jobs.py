"""A scheduled or retrying job is fetchable once due, even while another replica's sweeper is in
the middle of promoting it (the case OJS L1-RTR-014 tripped over on a busy machine)."""

from __future__ import annotations

import asyncio

import pytest

from redrive.api.worker_requests import fetch_request
from redrive.domain.caller import SYSTEM
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import read_envelope
from redrive.ports import Store
from redrive.service.facade import Service
from tests.conftest import open_test_store
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "due"
RUN_IN_MS = 1_000
HOLD_SECONDS = 0.3
PATIENCE_SECONDS = 10


async def schedule(service: Service, clock: ManualClock, queue: str = QUEUE) -> str:
    """A job due RUN_IN_MS from the clock's now."""
    options = {"queue": queue, "delay_until": format_timestamp(clock.now_ms() + RUN_IN_MS)}
    job = await service.jobs.enqueue(
        CALLER, read_envelope({"type": "due.job", "args": [], "options": options})
    )
    assert job.state == "scheduled"
    return job.id


async def promote_and_hold(store: Store, now: int, promoting: asyncio.Event) -> set[str]:
    """The other replica's sweeper: promotes every due job and commits only after a pause."""
    async with store.transaction(SYSTEM) as transaction:
        queues = await transaction.promote_due_jobs(now)
        promoting.set()
        await asyncio.sleep(HOLD_SECONDS)
    return queues


async def test_a_fetch_gets_a_due_job_another_replica_is_promoting(
    service: Service, clock: ManualClock, database_url: str
) -> None:
    job_id = await schedule(service, clock)
    clock.advance(RUN_IN_MS)
    other_replica = await open_test_store(database_url)
    try:
        promoting = asyncio.Event()
        sweeper = asyncio.create_task(promote_and_hold(other_replica, clock.now_ms(), promoting))
        await asyncio.wait_for(promoting.wait(), PATIENCE_SECONDS)
        claimed = await asyncio.wait_for(
            service.workers.fetch(CALLER, fetch_request({"queues": [QUEUE]})), PATIENCE_SECONDS
        )
        assert await sweeper == {QUEUE}
    finally:
        await other_replica.close()
    assert [(job.id, job.state, job.attempt) for job in claimed] == [(job_id, "active", 1)]


async def test_a_fetch_promotes_due_jobs_of_its_own_queues_only(
    service: Service, clock: ManualClock
) -> None:
    job_id = await schedule(service, clock)
    elsewhere_id = await schedule(service, clock, "elsewhere")
    clock.advance(RUN_IN_MS)
    claimed = await service.workers.fetch(CALLER, fetch_request({"queues": [QUEUE]}))
    assert [job.id for job in claimed] == [job_id]
    assert (await service.jobs.get(CALLER, elsewhere_id)).state == "scheduled"
    await service.sweeper.sweep()
    assert (await service.jobs.get(CALLER, elsewhere_id)).state == "available"
