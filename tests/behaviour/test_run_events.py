"""A claim's `job.started` and an ack's `job.completed` events are kept a row a run of alike jobs
(consecutive in claim or ack order, the same tenant, queue and job type), each member's own data
(attempt; duration, attempt, result) in the row's `members`: the feed still reads one event a
job, as `started_event` and `completed_event` make it, in the same order, each with its own id
(its cursor goes on from the middle of a row), on both stores. A subscribed tenant's ack events
stay a row each, delivered with the ids the feed shows."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM
from redrive.domain.errors import OjsError
from redrive.domain.events import block_position, completed_event, started_event
from redrive.domain.job import Job
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhooks import SubscriptionRequest
from redrive.ports import EventQuery, JobFilter
from redrive.ports.attempts import Claim
from redrive.service.attempts import AckRequest, NackRequest
from redrive.service.facade import Service
from redrive.service.workers import FetchRequest
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import count_rows, enqueue
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

QUEUE = "run-events"


async def feed(service: Service, kind: str, limit: int = 100) -> tuple[list[Any], list[str]]:
    """The events of `kind` in the queue, read whole, and their ids paged (a page of 1 below
    100 events, else of 1,000: the cursor goes on from the middle of a row)."""
    page_size = 1 if limit <= 100 else 1000
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        query = EventQuery(None, None, [kind], [QUEUE], None, limit)
        stored = await transaction.list_events(query)
        paged: list[str] = []
        after = None
        while page := await transaction.list_events(
            EventQuery(None, after, [kind], [QUEUE], None, page_size)
        ):
            paged.extend(event.id for event in page)
            after = page[-1].id
    assert paged == [event.id for event in stored]
    assert len(set(paged)) == len(paged)
    assert all(block_position(event_id) is not None for event_id in paged)
    return stored, paged


def place(event_id: str) -> tuple[str, int]:
    """The row (block) an event id names and its position there."""
    found = block_position(event_id)
    assert found is not None
    return found


def assert_key_order(service: Service, stored: list[Any], expected: list[Any]) -> None:
    """On SQLite each event's data keeps its keys in the order the statements always wrote
    them (the domain's); PostgreSQL's jsonb has its own order, as before."""
    if isinstance(service.runtime.store, SqliteStore):
        assert [list(event.event.data) for event in stored] == [list(e.data) for e in expected]


async def rows_of(service: Service, kind: str) -> int:
    return await count_rows(service, f"SELECT COUNT(*) FROM events WHERE type = '{kind}'")


async def retried_once(client: httpx.AsyncClient, service: Service, clock: ManualClock) -> str:
    """A job of `run.a` that failed its first attempt and is due again (its second next)."""
    retry = {"max_attempts": 5}
    job_id: str = (await enqueue(client, "run.a", ["again"], queue=QUEUE, retry=retry))["id"]
    (claimed,) = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 1, "w1"))
    failure = lifecycle.parse_failure({"type": "Boom", "message": "once"})
    nack = NackRequest(claimed.id, "w1", claimed.lease_token, failure, False, claimed)
    (failed,) = await service.workers.nack_many(CALLER, [nack])
    assert isinstance(failed, Job) and failed.state == "retryable"
    clock.advance(3_600_000)
    return job_id


@pytest.mark.parametrize("worker_id", ["w2", None])
async def test_a_claim_s_started_events_are_a_row_a_run(
    client: httpx.AsyncClient, service: Service, clock: ManualClock, worker_id: str | None
) -> None:
    again = await retried_once(client, service, clock)
    for job_type in ["run.a", "run.a", "run.b", "run.a"]:
        await enqueue(client, job_type, [], queue=QUEUE)
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 10, worker_id))
    assert [job.type for job in claimed] == ["run.a"] * 3 + ["run.b", "run.a"]
    assert claimed[0].id == again
    assert [job.attempt for job in claimed] == [2, 1, 1, 1, 1]

    stored, ids = await feed(service, "job.started")
    # The retried job's first claim, then this one's five.
    assert [event.event for event in stored[1:]] == [started_event(job) for job in claimed]
    assert_key_order(service, stored[1:], [started_event(job) for job in claimed])
    assert {event.time for event in stored[1:]} == {clock.now_ms()}
    # Three runs (the a's, the b, the last a), the first of three members in one block.
    assert await rows_of(service, "job.started") == 1 + 3
    blocks = [place(event_id) for event_id in ids[1:]]
    assert [position for _, position in blocks] == [0, 1, 2, 0, 0]
    assert len({block for block, _ in blocks}) == 3


@pytest.mark.parametrize("subscribed", [False, True])
async def test_an_ack_s_completed_events_are_a_row_a_run(
    client: httpx.AsyncClient, service: Service, clock: ManualClock, subscribed: bool
) -> None:
    if subscribed:
        hook = SubscriptionRequest("https://example.test/hook", ("job.completed",), None)
        await service.webhooks.create(CALLER, hook)
    again = await retried_once(client, service, clock)
    for job_type in ["run.a", "run.a", "run.a", "run.b", "run.a"]:
        await enqueue(client, job_type, [], queue=QUEUE)
    # Claimed at three times (their durations differ), one of them a second attempt.
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 2, "w1"))
    clock.advance(40)
    claimed += await service.workers.fetch(CALLER, FetchRequest([QUEUE], 1, "w1"))
    clock.advance(7)
    claimed += await service.workers.fetch(CALLER, FetchRequest([QUEUE], 10, "w1"))
    assert claimed[0].id == again and [job.attempt for job in claimed] == [2, 1, 1, 1, 1, 1]
    clock.advance(250)
    now = clock.now_ms()
    results: list[Any] = [None, {"sum": 1, "nested": {"none": None}}, "text", 0, False, None]
    requests: list[AckRequest | OjsError] = [
        AckRequest(job.id, "w1", job.lease_token, result)
        for job, result in zip(claimed, results, strict=True)
    ]
    outcomes = await service.workers.ack_many(CALLER, requests)
    assert [outcome.id for outcome in outcomes if not isinstance(outcome, OjsError)] == [
        job.id for job in claimed
    ]

    stored, ids = await feed(service, "job.completed")
    expected = [
        completed_event(lifecycle.acknowledge(job, now, result))
        for job, result in zip(claimed, results, strict=True)
    ]
    assert [event.event for event in stored] == expected
    assert_key_order(service, stored, expected)
    assert len({event.event.data["duration_ms"] for event in stored}) == 3
    # Runs: a, a, a, a (one block) | b | a; a subscribed tenant's are a row each.
    assert await rows_of(service, "job.completed") == (len(claimed) if subscribed else 3)
    jobs, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 100, 0)
    delivered = [job.args[0]["event"]["id"] for job in jobs if "job.completed" in str(job.meta)]
    assert sorted(delivered) == (sorted(ids) if subscribed else [])
    assert deliveries >= len(delivered)


async def test_a_claim_past_a_block_is_rows_of_at_most_4096(
    client: httpx.AsyncClient, service: Service
) -> None:
    """A run is at most a block (4,096 ids): a claim of 4,100 alike jobs (the store's, past the
    service's fetch limit) is two rows, read back as 4,100 events in claim order."""
    for _ in range(5):
        jobs = [{"type": "run.a", "args": [i], "options": {"queue": QUEUE}} for i in range(820)]
        response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs})
        assert response.status_code == 201, response.text
    runtime = service.runtime
    now = runtime.now()
    async with runtime.store.transaction(SYSTEM) as transaction:
        claim = Claim(QUEUE, 4100, "w1", runtime.new_token(), None, None)
        heads = runtime.block_head_parts(4100, now)
        taken = await transaction.claim_jobs(claim, now, heads)
    assert len(taken.jobs) == 4100
    stored, ids = await feed(service, "job.started", 5000)
    assert [event.event for event in stored] == [started_event(job) for job in taken.jobs]
    assert await rows_of(service, "job.started") == 2
    assert [place(event_id)[1] for event_id in ids[4094:4098]] == [4094, 4095, 0, 1]
    # Each row is named by the head at its first job's place, built by the statement.
    assert (ids[0], ids[4096]) == (heads[0], heads[4096])


async def test_an_ack_s_alike_jobs_are_one_row_behind_an_unlike_refused_first_ack(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    """The first ack of a batch (a `run.b`) is refused (its lease is not the job's); the three
    `run.a` behind it are written alike, in one row, as when they are acked alone. (SQLite tells
    alike against the first ack's job: this batch takes its row-a-run statement.)"""
    for job_type in ["run.b", "run.a", "run.a", "run.a"]:
        await enqueue(client, job_type, [], queue=QUEUE)
    claimed = await service.workers.fetch(CALLER, FetchRequest([QUEUE], 10, "w1"))
    assert [job.type for job in claimed] == ["run.b"] + ["run.a"] * 3
    clock.advance(30)
    now = clock.now_ms()
    requests: list[AckRequest | OjsError] = [
        AckRequest(job.id, "w1", "not-the-lease" if index == 0 else job.lease_token, None)
        for index, job in enumerate(claimed)
    ]
    outcomes = await service.workers.ack_many(CALLER, requests)
    assert isinstance(outcomes[0], OjsError)
    assert [outcome.id for outcome in outcomes[1:] if not isinstance(outcome, OjsError)] == [
        job.id for job in claimed[1:]
    ]
    stored, ids = await feed(service, "job.completed")
    expected = [completed_event(lifecycle.acknowledge(job, now, None)) for job in claimed[1:]]
    assert [event.event for event in stored] == expected
    assert_key_order(service, stored, expected)
    assert await rows_of(service, "job.completed") == 1
    assert [place(event_id)[1] for event_id in ids] == [0, 1, 2]
