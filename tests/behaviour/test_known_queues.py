"""A producer's one-job enqueue writes its queue's row until it has seen that row committed, and
no more after; the test hooks' reset, which deletes the rows, makes it write them again."""

from __future__ import annotations

import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.envelope import EnqueueContext, new_job, read_envelope
from redrive.domain.errors import Duplicate
from redrive.domain.events import enqueued_event
from redrive.domain.records import QueueRecord
from redrive.ports import EventQuery
from redrive.service import jobs as jobs_module
from redrive.service.facade import Service
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def enqueue(service: Service, queue: str) -> None:
    envelope = {"type": "mail.send", "args": [], "options": {"queue": queue}}
    await service.jobs.enqueue(CALLER, read_envelope(envelope))


async def queue_rows(service: Service) -> list[QueueRecord]:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        return await transaction.list_queues(CALLER.tenant_id)


async def test_the_first_enqueue_to_a_queue_writes_its_row_once(
    service: Service, clock: ManualClock
) -> None:
    await enqueue(service, "mail")
    first = clock.now_ms()
    assert (CALLER.tenant_id, "mail") in service.jobs.known_queues
    clock.advance(1_000)
    await enqueue(service, "mail")
    await enqueue(service, "reports")
    rows = await queue_rows(service)
    assert sorted((row.name, row.created_at) for row in rows) == [
        ("mail", first),
        ("reports", clock.now_ms()),
    ]


async def test_a_reset_makes_the_next_enqueue_write_the_queue_again(service: Service) -> None:
    await enqueue(service, "mail")
    await service.reset()
    assert await queue_rows(service) == []
    await enqueue(service, "mail")
    assert [row.name for row in await queue_rows(service)] == ["mail"]


async def test_a_known_queue_is_not_written(service: Service, clock: ManualClock) -> None:
    """The store's side: with `queue_known` the statement leaves the queues table alone (the
    caller vouches for the row), and still writes the job and its event."""
    envelope = {"type": "mail.send", "args": [], "options": {"queue": "mail"}}
    runtime, now = service.runtime, clock.now_ms()
    context = EnqueueContext(
        now, runtime.new_id(now), CALLER.tenant_id, runtime.options.default_retry
    )
    job = new_job(read_envelope(envelope), context)
    event_ids = runtime.enqueued_event_ids([job], now)
    async with service.runtime.store.transaction(CALLER) as transaction:
        written = await transaction.enqueue_jobs([job], event_ids, now, False, True)
    assert written.existing == set()
    assert await queue_rows(service) == []
    async with service.runtime.store.transaction(CALLER) as transaction:
        stored = await transaction.get_job(job.id, CALLER.tenant_id)
    assert stored is not None and stored.queue == "mail"


async def test_an_enqueue_to_a_known_queue_writes_its_event_and_refuses_a_taken_id(
    service: Service,
) -> None:
    """The known queue's statement (enqueue_job_known_queue) is enqueue_job without the queues
    insert: the job's event is the domain's, and an id that exists is the job's Duplicate."""
    await enqueue(service, "mail")
    body = {"type": "mail.send", "args": [1], "options": {"queue": "mail", "priority": 3}}
    job = await service.jobs.enqueue(CALLER, read_envelope(body))
    with pytest.raises(Duplicate) as raised:
        await service.jobs.enqueue(CALLER, read_envelope({**body, "id": job.id}))
    assert raised.value.details == {"job_id": job.id}
    async with service.runtime.store.transaction(CALLER) as transaction:
        events = await transaction.list_events(
            EventQuery(CALLER.tenant_id, None, None, None, None, 10)
        )
    assert [stored.event for stored in events][1:] == [enqueued_event(job)]
    assert [row.name for row in await queue_rows(service)] == ["mail"]


async def test_the_known_queues_are_forgotten_past_their_limit(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_module, "KNOWN_QUEUES_LIMIT", 2)
    for queue in ("a", "b", "c"):
        await enqueue(service, queue)
    assert service.jobs.known_queues == {(CALLER.tenant_id, "c")}
    await enqueue(service, "a")
    assert sorted(row.name for row in await queue_rows(service)) == ["a", "b", "c"]
