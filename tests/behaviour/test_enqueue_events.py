"""The events an enqueue writes, on both stores: the enqueue statement makes each job's event
from the job's own columns, and it is exactly the event the domain names (`enqueued_event`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest

from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import EnqueueContext, JobRequest, new_job, read_envelope
from redrive.domain.errors import Duplicate
from redrive.domain.events import Event, block_event_id, enqueued_event
from redrive.domain.identifiers import is_uuid7
from redrive.domain.job import Job
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhooks import SubscriptionRequest
from redrive.ports import EventQuery, JobFilter, Store, StoredEvent
from redrive.service.facade import Service
from redrive.store.base import SqlBase
from redrive.store.codec import new_job_parameters
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


async def test_a_batch_enqueue_writes_its_jobs_events_and_deliveries_once(
    service: Service, store: Store
) -> None:
    """As one job's: with a subscription, the batch's statement run alone writes nothing and the
    batch goes on in a transaction (deliveries too); without one, its statement alone writes it
    all (a tenant's batch after one that found a subscription tries a transaction first)."""
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    made = await service.webhooks.create(ACME, subscription)
    bodies = [{"type": "mail.send", "args": [index]} for index in range(2)]
    listened = [
        job
        for _ in range(2)
        for job in await service.jobs.enqueue_batch(ACME, list(map(read_envelope, bodies)))
    ]
    await service.webhooks.delete(ACME, made.subscription.id)
    alone = [
        job
        for _ in range(2)
        for job in await service.jobs.enqueue_batch(ACME, list(map(read_envelope, bodies)))
    ]
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
        deliveries = await transaction.count_jobs("acme", WEBHOOK_QUEUE)
    assert [stored.event.subject for stored in events] == [job.id for job in [*listened, *alone]]
    assert sum(deliveries.values()) == 4
    assert sum(counts.values()) == 8 + 4


async def test_a_single_duplicate_enqueue_writes_nothing(service: Service, store: Store) -> None:
    job = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    again = {"type": "mail.send", "args": [], "id": job.id, "options": {"queue": "other"}}
    with pytest.raises(Duplicate) as raised:
        await service.jobs.enqueue(ACME, read_envelope(again))
    assert raised.value.details == {"job_id": job.id}  # named, though PostgreSQL's insert fails
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
    assert [stored.event.subject for stored in events] == [job.id]
    assert counts == {("default", "available"): 1}
    assert {queue.name for queue in await service.queues.overview(ACME)} == {"default"}


async def test_a_duplicate_id_while_a_subscription_listens_writes_nothing(
    service: Service, store: Store
) -> None:
    """The enqueue found a listener, so it goes on in a transaction; there, the taken id is the
    job's Duplicate (SQLite's statement names it `existing`, PostgreSQL's insert fails)."""
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    await service.webhooks.create(ACME, subscription)
    job = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    again = {"type": "mail.send", "args": [1], "id": job.id}
    with pytest.raises(Duplicate) as raised:
        await service.jobs.enqueue(ACME, read_envelope(again))
    assert raised.value.details == {"job_id": job.id}
    async with store.transaction(ACME) as transaction:
        events = await transaction.list_events(EventQuery("acme", None, None, None, None, 100))
        counts = await transaction.count_jobs("acme", None)
        deliveries = await transaction.count_jobs("acme", WEBHOOK_QUEUE)
    assert [stored.event.subject for stored in events] == [job.id]
    assert sum(deliveries.values()) == 1
    assert sum(counts.values()) == 1 + 1


@pytest.mark.parametrize("statement", ["enqueue_job", "enqueue_job_known_queue"])
async def test_a_one_job_enqueue_answers_with_its_listeners_alone(
    service: Service, store: Store, clock: ManualClock, statement: str
) -> None:
    """The one-job statement names no job it wrote (it writes it, or fails, or, run alone,
    writes nothing for a listener, which its rows tell): on PostgreSQL a row for the job cost
    the server a scan under an Append and the caller a record to read, per call."""
    runtime, now = service.runtime, clock.now_ms()
    jobs = [new_job_for(service, now) for _ in range(2)]
    async with store.transaction(ACME) as transaction:
        quiet = await cast(SqlBase, transaction).executor.rows(
            statement, new_job_parameters(jobs[0], runtime.new_id(now), now, False)
        )
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    made = await service.webhooks.create(ACME, subscription)
    async with store.transaction(ACME) as transaction:
        listened = await cast(SqlBase, transaction).executor.rows(
            statement, new_job_parameters(jobs[1], runtime.new_id(now), now, False)
        )
    assert quiet == []
    assert [(row["kind"], row["id"]) for row in listened] == [("listener", made.subscription.id)]


def new_job_for(service: Service, now: int) -> Job:
    context = EnqueueContext(
        now, service.runtime.new_id(now), "acme", service.runtime.options.default_retry
    )
    return new_job(read_envelope({"type": "mail.send", "args": []}), context)


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


def _mixed_batch(offset: int) -> list[JobRequest]:
    """Three runs: two alike jobs (their priorities differ), one scheduled, two of another
    queue."""
    bodies: list[dict[str, Any]] = [
        {"type": "mail.send", "args": [offset], "options": {"priority": 2}},
        {"type": "mail.send", "args": [offset + 1], "options": {"priority": 5}},
        {"type": "mail.send", "args": [offset + 2], "options": {"scheduled_at": "+PT1H"}},
        {"type": "report.build", "args": [offset + 3], "options": {"queue": "bulk"}},
        {"type": "report.build", "args": [offset + 4], "options": {"queue": "bulk"}},
    ]
    return [read_envelope(body) for body in bodies]


async def _feed(store: Store, after: str | None, limit: int, **filters: Any) -> list[StoredEvent]:
    query = EventQuery(
        "acme", after, filters.get("types"), filters.get("queues"), filters.get("job_types"),
        limit,
    )  # fmt: skip
    async with store.transaction(ACME) as transaction:
        return await transaction.list_events(query)


async def test_a_batch_s_events_page_one_by_one_across_its_rows(
    service: Service, store: Store
) -> None:
    """A batch's alike jobs share an outbox row, yet the feed shows each event in the jobs'
    order, each with its own id; a cursor in the middle of a row goes on from the next member
    (the rest of that row, then the rows after)."""
    single = await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    first = await service.jobs.enqueue_batch(ACME, _mixed_batch(0))
    second = await service.jobs.enqueue_batch(
        ACME, [read_envelope({"type": "mail.send", "args": [index]}) for index in range(7)]
    )
    jobs = [single, *first, *second]
    events = await _feed(store, None, 100)
    assert [stored.event for stored in events] == [enqueued_event(job) for job in jobs]
    assert [stored.event.data.get("priority") for stored in events[1:3]] == [2, 5]
    ids = [stored.id for stored in events]
    assert len(set(ids)) == len(ids) and all(is_uuid7(id_.removeprefix("evt_")) for id_ in ids)
    for limit in (1, 2, 3, 4):
        paged: list[str] = []
        after = None
        while page := await _feed(store, after, limit):
            assert len(page) <= limit
            paged.extend(stored.id for stored in page)
            after = page[-1].id
        assert paged == ids
    for index, event_id in enumerate(ids):
        assert [stored.id for stored in await _feed(store, event_id, 100)] == ids[index + 1 :]


async def test_an_id_that_is_no_event_reads_the_feed_from_its_start(
    service: Service, store: Store
) -> None:
    """An unknown `after` id (as before): the feed from its first event, also for an id of a
    block's shape past the block's end."""
    batch = await service.jobs.enqueue_batch(
        ACME, [read_envelope({"type": "mail.send", "args": [index]}) for index in range(3)]
    )
    events = await _feed(store, None, 100)
    assert len(events) == len(batch)
    past_end = block_event_id(events[0].id, 3)
    for after in (past_end, "evt_nope", "nope"):
        assert [stored.id for stored in await _feed(store, after, 100)] == [
            stored.id for stored in events
        ]


async def test_the_feed_s_filters_see_each_event_of_a_batch(service: Service, store: Store) -> None:
    batch = await service.jobs.enqueue_batch(ACME, _mixed_batch(0))

    async def subjects(**filters: Any) -> list[str | None]:
        return [stored.event.subject for stored in await _feed(store, None, 100, **filters)]

    ids = [job.id for job in batch]
    assert await subjects(types=["job.scheduled"]) == [ids[2]]
    assert await subjects(types=["job.enqueued"]) == [ids[0], ids[1], ids[3], ids[4]]
    assert await subjects(queues=["bulk"]) == ids[3:]
    assert await subjects(job_types=["mail.send"]) == ids[:3]
    everything = await _feed(store, None, 100)
    after_first = await _feed(store, everything[0].id, 100, queues=["default"])
    assert [stored.event.subject for stored in after_first] == ids[1:3]
    other = Caller.for_tenant("other", "test", Role.ADMIN)
    async with store.transaction(other) as transaction:
        assert await transaction.list_events(EventQuery("other", None, None, None, None, 9)) == []


async def test_a_trim_counts_and_deletes_each_event_of_a_batch(
    service: Service, store: Store, clock: ManualClock
) -> None:
    await service.jobs.enqueue_batch(ACME, _mixed_batch(0))
    clock.advance(1_000)
    later = await service.jobs.enqueue_batch(ACME, _mixed_batch(10))
    async with store.transaction(ACME) as transaction:
        assert await transaction.delete_events_before(clock.now_ms()) == 5
        assert await transaction.delete_events_before(clock.now_ms()) == 0
    left = await _feed(store, None, 100)
    assert [stored.event.subject for stored in left] == [job.id for job in later]
    async with store.transaction(ACME) as transaction:
        assert await transaction.delete_events_before(clock.now_ms() + 1) == 5
    assert await _feed(store, None, 100) == []


async def test_a_webhook_delivers_each_event_of_a_batch_under_its_feed_id(
    service: Service, store: Store
) -> None:
    subscription = SubscriptionRequest("https://example.test/hook", ("job.*",), None)
    await service.webhooks.create(ACME, subscription)
    batch = await service.jobs.enqueue_batch(ACME, _mixed_batch(0))
    events = await _feed(store, None, 100)
    async with store.transaction(ACME) as transaction:
        deliveries, _ = await transaction.list_jobs("acme", JobFilter(queue=WEBHOOK_QUEUE), 100, 0)
    sent = sorted(
        (delivery.args[0]["event"]["id"], delivery.args[0]["event"]["subject"])
        for delivery in deliveries
    )
    assert sent == sorted((stored.id, stored.event.subject) for stored in events)
    assert [stored.event.subject for stored in events] == [job.id for job in batch]
