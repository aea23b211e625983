"""The claim and ack statements write what the domain decides: the claim the same `job.started`
events as `started_event` makes, the ack (complete_jobs) the same job and `job.completed` event as
`lifecycle.acknowledge` and `completed_event` make, on both stores; a subscribed tenant's events
are written once each, and delivered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.errors import OjsError
from redrive.domain.events import completed_event, failure_events, started_event
from redrive.domain.job import Job
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhooks import SubscriptionChanges, SubscriptionRequest
from redrive.ports import EventQuery, JobFilter
from redrive.service.attempts import AckRequest, NackRequest
from redrive.service.facade import Service
from redrive.service.workers import FetchRequest
from tests.behaviour.ojs_http import count_rows, enqueue, fetch
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "ack-statement"
RESULTS: list[Any] = [None, {"sum": 1, "nested": {"none": None}}, "text", 0, False, [1, "two"]]


async def jobs_now(service: Service, ids: list[str]) -> dict[str, Job]:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        return await transaction.lock_jobs(ids, None)


async def test_an_ack_writes_the_job_and_event_the_domain_makes(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    for index in range(len(RESULTS)):
        await enqueue(client, "ack.job", [index], queue=QUEUE)
    fetched = await fetch(client, [QUEUE], count=len(RESULTS), worker_id="w1")
    ids = [job["id"] for job in fetched]
    before = await jobs_now(service, ids)
    clock.advance(250)
    now = clock.now_ms()
    requests = [
        # Half name their worker and lease, half name neither (the HTTP edge allows both).
        AckRequest(job_id, "w1" if index % 2 else None,
                   before[job_id].lease_token if index % 2 else None, result)
        for index, (job_id, result) in enumerate(zip(ids, RESULTS, strict=True))
    ]  # fmt: skip
    outcomes = await service.workers.ack_many(CALLER, list(requests))

    after = await jobs_now(service, ids)
    expected = {
        request.job_id: lifecycle.acknowledge(before[request.job_id], now, request.result)
        for request in requests
    }
    assert after == expected
    assert outcomes == [
        lifecycle.Completed(job_id, 1, expected[job_id].max_attempts, now) for job_id in ids
    ]
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        stored = await transaction.list_events(
            EventQuery(None, None, ["job.completed"], [QUEUE], None, 100)
        )
    assert [event.event for event in stored] == [completed_event(expected[i]) for i in ids]
    assert {event.time for event in stored} == {now}


async def test_an_ack_of_a_subscribed_tenant_queues_each_delivery(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The ack reads its jobs' and its listeners' rows by position (Executor.table, one set of
    columns for both kinds): each completed job is answered, and the tenant's subscription gets
    a delivery of each `job.completed`."""
    hook = SubscriptionRequest("https://example.test/hook", ("job.completed",), None)
    await service.webhooks.create(CALLER, hook)
    for index in range(3):
        await enqueue(client, "ack.job", [index], queue=QUEUE)
    fetched = await fetch(client, [QUEUE], count=3, worker_id="w1")
    requests: list[AckRequest | OjsError] = [
        AckRequest(job["id"], "w1", None, {"n": index}) for index, job in enumerate(fetched)
    ]
    outcomes = await service.workers.ack_many(CALLER, requests)
    assert [outcome.id for outcome in outcomes if not isinstance(outcome, OjsError)] == [
        job["id"] for job in fetched
    ]
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 3


async def test_an_ack_queues_deliveries_only_for_its_own_tenant_s_active_subscriptions(
    client: httpx.AsyncClient, service: Service
) -> None:
    """Another tenant's active subscription and the tenant's own inactive one get nothing from
    an ack; the tenant's own, once active, a delivery a job (complete_jobs' listeners)."""
    hook = SubscriptionRequest("https://example.test/hook", ("job.completed",), None)
    other = Caller.for_tenant("globex", "test", Role.ADMIN)
    await service.webhooks.create(other, hook)
    own = await service.webhooks.create(CALLER, hook)
    await service.webhooks.update(CALLER, own.subscription.id, SubscriptionChanges(active=False))

    async def ack_two() -> None:
        for index in range(2):
            await enqueue(client, "ack.job", [index], queue=QUEUE)
        fetched = await fetch(client, [QUEUE], count=2, worker_id="w1")
        acks: list[AckRequest | OjsError] = [
            AckRequest(job["id"], "w1", None, None) for job in fetched
        ]
        outcomes = await service.workers.ack_many(CALLER, acks)
        assert not any(isinstance(outcome, OjsError) for outcome in outcomes)

    await ack_two()
    _, deliveries = await service.jobs.list(SYSTEM, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 0
    await service.webhooks.update(CALLER, own.subscription.id, SubscriptionChanges(active=True))
    await ack_two()
    _, deliveries = await service.jobs.list(SYSTEM, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 2


async def events_of(service: Service, kind: str, queues: tuple[str, ...] = (QUEUE,)) -> list[Any]:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        query = EventQuery(None, None, [kind], list(queues), None, 100)
        stored = await transaction.list_events(query)
    return [event.event for event in stored]


@pytest.mark.parametrize("worker_id", ["w1", None])
@pytest.mark.parametrize("subscribed", [False, True])
async def test_a_claim_writes_the_started_events_the_domain_makes(
    client: httpx.AsyncClient, service: Service, worker_id: str | None, subscribed: bool
) -> None:
    if subscribed:
        hook = SubscriptionRequest("https://example.test/hook", ("job.started",), None)
        await service.webhooks.create(CALLER, hook)
    for index, priority in enumerate([0, 5, 0, 9, 5]):
        await enqueue(client, "claim.job", [index], queue=QUEUE, priority=priority)
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 3, worker_id))
    claimed += await service.workers.fetch(CALLER, FetchRequest([QUEUE], 3, worker_id))
    assert [job.priority for job in claimed] == [9, 5, 5, 0, 0]
    assert await events_of(service, "job.started") == [started_event(job) for job in claimed]
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == (len(claimed) if subscribed else 0)


async def test_a_claimed_job_is_its_row_as_stored(
    client: httpx.AsyncClient, service: Service
) -> None:
    """A claim reads its rows by position (Executor.table), not as dicts: each job it returns is
    the job its row reads as by name (lock_jobs), every field."""
    for index, priority in enumerate([0, 3, 0]):
        await enqueue(client, "claim.job", [index, {"k": index}], queue=QUEUE, priority=priority,
                      meta={"m": index})  # fmt: skip
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 5, "w1"))
    assert [job.priority for job in claimed] == [3, 0, 0]
    stored = await jobs_now(service, [job.id for job in claimed])
    assert claimed == [stored[job.id] for job in claimed]


async def test_the_claims_of_one_fetch_take_each_queue_s_own_jobs_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    """A fetch over several queues claims each in turn in one transaction (on SQLite each claim
    keeps its pick in the same temporary table): every job once, as its queue's claim took it,
    each with its one `job.started` event, in claim order."""
    first = [(await enqueue(client, "claim.job", [i], queue="first"))["id"] for i in range(3)]
    second = [(await enqueue(client, "claim.job", [i], queue="second"))["id"] for i in range(2)]
    claimed = await service.workers.fetch(CALLER, FetchRequest(["first", "second"], 10, "w1"))
    assert [job.id for job in claimed] == first + second
    assert [job.queue for job in claimed] == ["first"] * 3 + ["second"] * 2
    assert all(job.state == "active" and job.attempt == 1 for job in claimed)
    started = await events_of(service, "job.started", ("first", "second"))
    assert started == [started_event(job) for job in claimed]
    assert await service.workers.fetch(CALLER, FetchRequest(["first", "second"], 10, "w1")) == []


@pytest.mark.parametrize("alike", [True, False])
@pytest.mark.parametrize("subscribed", [False, True])
async def test_a_batch_of_nacks_writes_each_job_s_failure_events(
    client: httpx.AsyncClient, service: Service, alike: bool, subscribed: bool
) -> None:
    """Each job's failure events, as `failure_events` makes them and in its order, the batch's
    first events before its second ones; alike ones (the same error and outcome) are one outbox
    row a kind, yet the feed pages them one by one, each with its own id, and a subscription
    gets a delivery for each."""
    if subscribed:
        hook = SubscriptionRequest("https://example.test/hook", ("job.failed",), None)
        await service.webhooks.create(CALLER, hook)
    retry = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    for index in range(4):
        await enqueue(client, "nack.job", [index], queue=QUEUE, retry=retry)
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 4, "w1"))
    nacks: list[NackRequest | OjsError] = [
        NackRequest(job.id, "w1", job.lease_token, lifecycle.parse_failure(
            {"type": "Boom", "message": "down" if alike else f"down {index}"}
        ), False, job)
        for index, job in enumerate(claimed)
    ]  # fmt: skip
    failed = await service.workers.nack_many(CALLER, nacks)
    assert all(isinstance(job, Job) and job.state == "discarded" for job in failed)

    kinds = ["job.failed", "job.discarded", "dead_letter.added"]
    expected = [
        event
        for kind in kinds
        for job in failed
        if isinstance(job, Job)
        for event in failure_events(job, "max_attempts_exceeded")
        if event.type == kind
    ]
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        stored = await transaction.list_events(EventQuery(None, None, kinds, [QUEUE], None, 100))
        paged: list[str] = []
        after = None
        while page := await transaction.list_events(
            EventQuery(None, after, kinds, [QUEUE], None, 2)
        ):
            paged.extend(event.id for event in page)
            after = page[-1].id
    assert [event.event for event in stored] == expected
    assert paged == [event.id for event in stored] and len(set(paged)) == len(expected)
    rows = await count_rows(service, "SELECT COUNT(*) FROM events WHERE type = 'job.failed'")
    assert rows == (1 if alike else len(claimed))
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == (len(claimed) if subscribed else 0)
