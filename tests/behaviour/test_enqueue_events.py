"""The events an enqueue writes, on both stores: the enqueue statement makes each job's event
from the job's own columns, and it is exactly the event the domain names (`enqueued_event`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import read_envelope
from redrive.domain.errors import Duplicate
from redrive.domain.events import Event, enqueued_event
from redrive.domain.webhooks import WEBHOOK_QUEUE, SubscriptionRequest
from redrive.ports import EventQuery, Store, StoredEvent
from redrive.service.facade import Service
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

ACME = Caller.for_tenant("acme", "test", Role.ADMIN)


async def test_each_enqueued_job_gets_the_domain_s_event(
    service: Service, store: Store, clock: ManualClock
) -> None:
    one = await service.jobs.enqueue(
        ACME, read_envelope({"type": "mail.send", "args": [1], "options": {"priority": 7}})
    )
    batch = await service.jobs.enqueue_batch(
        ACME,
        [
            read_envelope({"type": "mail.send", "args": [2], "options": {"queue": "bulk"}}),
            read_envelope(
                {"type": "report.build", "args": [], "options": {"scheduled_at": "+PT1H"}}
            ),
            read_envelope({"type": "mail.send", "args": [3], "options": {"pending": True}}),
        ],
    )
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
    jobs = [one, *batch]
    assert [stored.event for stored in events] == [enqueued_event(job) for job in jobs]
    assert [stored.event.type for stored in events] == [
        "job.enqueued", "job.enqueued", "job.scheduled", "job.enqueued",
    ]  # fmt: skip
    assert events[0].event.data == {"job_type": "mail.send", "queue": "default", "priority": 7}
    assert all(stored.time == clock.now_ms() for stored in events)
    assert all(stored.id.startswith("evt_") for stored in events)
    assert len({stored.id for stored in events}) == len(events)


async def test_a_duplicate_id_writes_no_job_and_no_event(service: Service, store: Store) -> None:
    job = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    again = read_envelope({"type": "mail.send", "args": [], "id": job.id})
    fresh = read_envelope({"type": "mail.send", "args": []})
    with pytest.raises(Duplicate) as raised:
        await service.jobs.enqueue_batch(ACME, [fresh, again])
    assert raised.value.details == {"job_id": job.id}  # named, though PostgreSQL's insert fails
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
    assert [stored.event.subject for stored in events] == [job.id]
    assert sum(counts.values()) == 1


async def test_a_single_enqueue_writes_its_job_event_and_deliveries_once(
    service: Service, store: Store
) -> None:
    """With a subscription, the statement run alone writes nothing and the enqueue goes on in a
    transaction (deliveries too); without one, the statement alone writes it all."""
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    made = await service.webhooks.create(ACME, subscription)
    listened = [
        await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": [index]}))
        for index in range(2)
    ]
    await service.webhooks.delete(ACME, made.subscription.id)
    alone = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
        deliveries = await transaction.count_jobs("acme", WEBHOOK_QUEUE)
    assert [stored.event.subject for stored in events] == [job.id for job in [*listened, alone]]
    assert sum(deliveries.values()) == 2
    assert sum(counts.values()) == 3 + 2


async def test_a_single_duplicate_enqueue_writes_nothing(service: Service, store: Store) -> None:
    job = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    again = {"type": "mail.send", "args": [], "id": job.id, "options": {"queue": "other"}}
    with pytest.raises(Duplicate):
        await service.jobs.enqueue(ACME, read_envelope(again))
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
    assert [stored.event.subject for stored in events] == [job.id]
    assert counts == {("default", "available"): 1}
    assert {queue.name for queue in await service.queues.overview(ACME)} == {"default"}


@pytest.mark.parametrize(
    "options",
    [
        [{}, {}, {}],  # every column alike: sent once, the events' data built once
        [{"priority": 1}, {"priority": 2}, {}],  # the data of each event its own
        [{"timeout_ms": 5_000}, {}, {"queue": "bulk", "expires_at": "+PT1H"}],
    ],
)
async def test_a_batch_s_shared_columns_are_each_job_s_own(
    service: Service, store: Store, options: list[dict[str, object]]
) -> None:
    """A batch's columns that every job has alike are sent once; each job still reads back as
    it was enqueued, with the event the domain names for it."""
    requests = [
        read_envelope({"type": "mail.send", "args": [index], "options": chosen})
        for index, chosen in enumerate(options)
    ]
    batch = await service.jobs.enqueue_batch(ACME, requests)
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        stored = [await transaction.get_job(job.id, "acme") for job in batch]
    assert [replace(job, sequence=None) for job in stored if job is not None] == batch
    assert [event.event for event in events] == [enqueued_event(job) for job in batch]


async def test_a_trim_deletes_the_events_before_the_first_at_its_cut_off(store: Store) -> None:
    """Events are trimmed in sequence order: every one before the first at or after the cut-off
    (never one at or after it); one written with an earlier time after a later one goes with a
    later trim."""
    times = [10, 30, 20, 40]
    written = [
        StoredEvent(f"evt_{index}", 0, time, Event("job.enqueued", "acme", "q", "t", f"j{index}"))
        for index, time in enumerate(times)
    ]
    async with store.transaction(ACME) as transaction:
        await transaction.add_events(written)
        assert await transaction.delete_events_before(25) == 1
        assert await transaction.delete_events_before(25) == 0
    async with store.transaction(ACME) as transaction:
        left = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        assert [event.time for event in left] == [30, 20, 40]
        assert await transaction.delete_events_before(35) == 2
        left = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        assert [event.time for event in left] == [40]
