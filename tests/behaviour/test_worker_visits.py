"""A fetch records the worker's visit (its last heartbeat, the jobs it claimed); an idle worker's
empty fetches, one a second while it long-polls, write that record only when it changes or has
aged, so an idle worker does not commit every second."""

from __future__ import annotations

import pytest

from redrive.domain.envelope import read_envelope
from redrive.domain.records import WorkerRecord
from redrive.service.facade import Service
from redrive.service.workers import IDLE_VISIT_MS, FetchRequest
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def fetch(service: Service) -> int:
    request = FetchRequest(queues=["mail"], count=10, worker_id="w1")
    return len(await service.workers.fetch(CALLER, request))


async def visit(service: Service) -> WorkerRecord:
    (worker,) = await service.workers.list(CALLER)
    return worker


async def test_empty_fetches_record_the_visit_when_it_changes_or_has_aged(
    service: Service, clock: ManualClock
) -> None:
    assert await fetch(service) == 0
    first = clock.now_ms()
    assert (await visit(service)).last_heartbeat_at == first
    clock.advance(1_000)
    assert await fetch(service) == 0
    assert (await visit(service)).last_heartbeat_at == first, "nothing new to record"
    clock.advance(IDLE_VISIT_MS)
    assert await fetch(service) == 0
    assert (await visit(service)).last_heartbeat_at == clock.now_ms(), "the record had aged"

    await service.jobs.enqueue(
        CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
    )
    clock.advance(1_000)
    assert await fetch(service) == 1
    assert (await visit(service)).active_jobs == 1
    clock.advance(1_000)
    assert await fetch(service) == 0
    recorded = await visit(service)
    assert (recorded.last_heartbeat_at, recorded.active_jobs) == (clock.now_ms(), 0)


async def test_a_wipe_records_the_next_visit(service: Service, clock: ManualClock) -> None:
    assert await fetch(service) == 0
    await service.reset()
    clock.advance(1_000)
    assert await fetch(service) == 0
    assert (await visit(service)).last_heartbeat_at == clock.now_ms()
