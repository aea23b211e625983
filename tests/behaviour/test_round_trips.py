"""Round trips per operation on PostgreSQL, counted on the wire (libpq's trace of the
connection): each Sync or simple Query the client sends is one wait for the server."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from redrive.api.worker_requests import fetch_request
from redrive.domain.envelope import read_envelope
from redrive.domain.errors import Duplicate
from redrive.domain.webhooks import WEBHOOK_QUEUE, SubscriptionRequest
from redrive.ports import JobFilter
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options
from tests.support.postgres import database_from_template

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


class Wire:
    """Counts what the store's only pooled connection sends while `counting()` is open."""

    def __init__(self, store: PostgresStore, folder: Path) -> None:
        self.store = store
        self.folder = folder
        self.messages: list[str] = []

    @asynccontextmanager
    async def counting(self) -> AsyncIterator[None]:
        trace = self.folder / "trace.txt"
        async with self.store.pool.connection() as connection:
            pgconn = connection.pgconn
        with trace.open("w") as file:
            pgconn.trace(file.fileno())
            pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                yield
            finally:
                pgconn.untrace()
        sent = [line.split("\t") for line in trace.read_text().splitlines()]
        self.messages = [fields[2].strip() for fields in sent if fields[0] == "F"]

    @property
    def round_trips(self) -> int:
        return sum(message in ("Sync", "Query") for message in self.messages)


@pytest.fixture
async def wired(postgres_template: str, tmp_path: Path) -> AsyncIterator[tuple[Service, Wire]]:
    with database_from_template(postgres_template) as url:
        store = PostgresStore(url, min_size=1, max_size=1)
        await store.open()
        runtime = Runtime(store, ManualClock(), service_options(), random.Random(7))
        try:
            yield Service(runtime), Wire(store, tmp_path)
        finally:
            await store.close()


def job(queue: str = "mail") -> dict[str, object]:
    return {"type": "mail.send", "args": [1], "options": {"queue": queue}}


async def test_one_enqueue_is_two_round_trips(wired: tuple[Service, Wire]) -> None:
    """BEGIN, the tenant and one statement (queue, job, event); then NOTIFY and COMMIT."""
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))  # the pool's connection is made
    async with wire.counting():
        enqueued = await service.jobs.enqueue(CALLER, read_envelope(job()))
    assert wire.round_trips == 2, wire.messages
    # One pipeline (BEGIN, SET LOCAL, the enqueue statement), then one query (NOTIFY; COMMIT).
    assert (wire.messages.count("Execute"), wire.messages.count("Query")) == (3, 1)
    found = await service.jobs.get(CALLER, enqueued.id)
    assert found.state == "available"
    events = await service.events.list(CALLER, None, None, None, None, 10)
    assert [event.event.type for event in events] == ["job.enqueued", "job.enqueued"]


async def test_a_batch_enqueue_is_two_round_trips(wired: tuple[Service, Wire]) -> None:
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    requests = [read_envelope(job(queue)) for queue in ["mail", "sms", "mail", "push"] * 25]
    async with wire.counting():
        jobs = await service.jobs.enqueue_batch(CALLER, requests)
    assert wire.round_trips == 2, wire.messages
    assert len(jobs) == 100
    queues = await service.queues.overview(CALLER)
    assert {queue.name for queue in queues} == {"mail", "sms", "push"}


async def test_a_duplicate_enqueue_writes_nothing(wired: tuple[Service, Wire]) -> None:
    service, _ = wired
    first = await service.jobs.enqueue(CALLER, read_envelope(job()))
    again = read_envelope({**job("other"), "id": first.id})
    with pytest.raises(Duplicate):
        await service.jobs.enqueue(CALLER, again)
    events = await service.events.list(CALLER, None, None, None, None, 10)
    assert len(events) == 1
    assert {queue.name for queue in await service.queues.overview(CALLER)} == {"mail"}


async def test_a_subscribed_tenant_adds_one_round_trip_for_its_deliveries(
    wired: tuple[Service, Wire],
) -> None:
    service, wire = wired
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    await service.webhooks.create(CALLER, subscription)
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    async with wire.counting():
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    assert wire.round_trips == 3, wire.messages
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 2


async def test_a_fetch_of_a_hundred_jobs_is_five_round_trips(
    wired: tuple[Service, Wire],
) -> None:
    """Per claimed batch, not per job: promote due jobs (with BEGIN), the claim (which skips
    paused queues itself), the worker's record, the started events, COMMIT."""
    service, wire = wired
    await service.jobs.enqueue_batch(CALLER, [read_envelope(job()) for _ in range(100)])
    request = fetch_request({"queues": ["mail"], "count": 100, "worker_id": "w1"})
    async with wire.counting():
        claimed = await service.workers.fetch(CALLER, request)
    assert len(claimed) == 100
    assert wire.round_trips == 5, wire.messages
