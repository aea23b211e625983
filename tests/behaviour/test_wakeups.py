"""Long-poll fetch (`wait_ms`) wakes when work arrives, in the same process or another replica; the
webhook delivery loop listens for other replicas only while a subscription is active."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import psycopg
import pytest

from redrive.api.app import create_app
from redrive.api.worker_requests import fetch_request
from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import read_envelope
from redrive.domain.webhooks import SubscriptionChanges, SubscriptionRequest
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.service.webhooks import WEBHOOK_CALLER
from tests.conftest import open_test_store
from tests.support.callers import CALLER
from tests.support.options import service_options
from tests.support.postgres import database_from_template

pytestmark = pytest.mark.anyio

# Far longer than the wake-up needs; the test fails if the fetch only returns at its deadline.
WAIT_MS = 20_000
PATIENCE_SECONDS = 10
ACME = Caller.for_tenant("acme", "test", Role.ADMIN)
Payloads = asyncio.Queue[str]


@asynccontextmanager
async def listening_service(postgres_template: str) -> AsyncIterator[tuple[Service, Payloads]]:
    """A service on a fresh copy of the template, and what a LISTEN on `redrive_jobs` on a
    connection of its own hears, payload by payload."""
    with database_from_template(postgres_template) as database_url:
        store = await open_test_store(database_url)
        listener = await asyncpg.connect(database_url)
        heard: Payloads = asyncio.Queue()
        try:
            await listener.add_listener(
                "redrive_jobs",
                lambda _connection, _pid, _channel, payload: heard.put_nowait(payload),
            )
            yield Service(Runtime(store)), heard
        finally:
            await listener.close()
            await store.close()


async def test_waiting_fetch_wakes_on_enqueue(service: Service) -> None:
    waiting = asyncio.create_task(
        service.workers.fetch(CALLER, fetch_request({"queues": ["mail"], "wait_ms": WAIT_MS}))
    )
    await asyncio.sleep(0.2)
    assert not waiting.done(), "an empty fetch with wait_ms must wait"
    job = await service.jobs.enqueue(
        CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
    )
    claimed = await asyncio.wait_for(waiting, PATIENCE_SECONDS)
    assert [found.id for found in claimed] == [job.id]


async def test_a_waiting_fetch_whose_worker_is_gone_claims_nothing(service: Service) -> None:
    """Once `abandoned` says the worker hung up, the wake-up of an enqueue ends the wait with
    nothing claimed, and the job stays available for the next worker."""
    gone = False

    async def abandoned() -> bool:
        return gone

    waiting = asyncio.create_task(
        service.workers.fetch(
            CALLER, fetch_request({"queues": ["mail"], "wait_ms": WAIT_MS}), abandoned
        )
    )
    await asyncio.sleep(0.2)
    assert not waiting.done(), "an empty fetch with wait_ms must wait"
    gone = True
    job = await service.jobs.enqueue(
        CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
    )
    assert await asyncio.wait_for(waiting, PATIENCE_SECONDS) == []
    taken = await service.workers.fetch(CALLER, fetch_request({"queues": ["mail"]}))
    assert [found.id for found in taken] == [job.id]


async def test_a_long_poll_over_http_stops_claiming_when_its_worker_hangs_up(
    service: Service,
) -> None:
    """The fetch route asks the connection: a worker that hung up mid-poll (the ASGI server's
    `http.disconnect`) leaves the job it would have leased to the next worker."""
    hung_up = asyncio.Event()
    body = json.dumps({"queues": ["mail"], "wait_ms": WAIT_MS}).encode()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/ojs/v1/workers/fetch", "raw_path": b"/ojs/v1/workers/fetch",
        "query_string": b"", "root_path": "", "server": ("redrive.test", 80),
        "client": ("127.0.0.1", 50_000),
        "headers": [(b"host", b"redrive.test"), (b"content-type", b"application/json")],
    }  # fmt: skip
    polling = asyncio.create_task(create_app(service)(scope, receive, send))
    await asyncio.sleep(0.3)
    assert not polling.done(), "the long poll must wait"
    hung_up.set()
    job = await service.jobs.enqueue(
        CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
    )
    await asyncio.wait_for(polling, PATIENCE_SECONDS)
    assert sent[0]["status"] == 200  # an empty answer for nobody, never an error
    assert json.loads(b"".join(part.get("body", b"") for part in sent[1:])) == {"jobs": []}
    taken = await service.workers.fetch(CALLER, fetch_request({"queues": ["mail"]}))
    assert [found.id for found in taken] == [job.id]


async def test_waiting_fetch_ignores_other_queues(service: Service) -> None:
    waiting = asyncio.create_task(
        service.workers.fetch(CALLER, fetch_request({"queues": ["mail"], "wait_ms": 600}))
    )
    await service.jobs.enqueue(
        CALLER, read_envelope({"type": "sms.send", "args": [], "options": {"queue": "sms"}})
    )
    assert await asyncio.wait_for(waiting, PATIENCE_SECONDS) == []


async def test_fetch_without_wait_returns_at_once(service: Service) -> None:
    assert (
        await asyncio.wait_for(
            service.workers.fetch(CALLER, fetch_request({"queues": ["mail"]})), 2
        )
        == []
    )


@pytest.mark.postgres
async def test_enqueue_on_one_replica_wakes_a_fetch_on_another(postgres_template: str) -> None:
    """Two stores on one PostgreSQL database stand for two replicas: NOTIFY crosses between them."""
    with database_from_template(postgres_template) as database_url:
        await _wake_across_replicas(database_url)


async def _wake_across_replicas(database_url: str) -> None:
    first = await open_test_store(database_url)
    second = await open_test_store(database_url)
    try:
        waiting_side, enqueuing_side = Service(Runtime(first)), Service(Runtime(second))
        waiting = asyncio.create_task(
            waiting_side.workers.fetch(
                CALLER, fetch_request({"queues": ["mail"], "wait_ms": WAIT_MS})
            )
        )
        await asyncio.sleep(0.3)
        job = await enqueuing_side.jobs.enqueue(
            CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
        )
        claimed = await asyncio.wait_for(waiting, PATIENCE_SECONDS)
        assert [found.id for found in claimed] == [job.id]
    finally:
        await first.close()
        await second.close()


def listening_backends(database_url: str) -> int:
    """How many of the database's backends last ran LISTEN."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
async def test_the_listen_connection_opens_when_something_first_waits(
    postgres_template: str,
) -> None:
    """A producer never waits for work and starts without a LISTEN connection; a waiting
    fetch opens it, and still claims a job enqueued meanwhile."""
    with database_from_template(postgres_template) as database_url:
        store = await open_test_store(database_url)
        try:
            service = Service(Runtime(store))
            mail = {"queue": "mail"}
            await service.jobs.enqueue(
                CALLER, read_envelope({"type": "mail.send", "args": [], "options": mail})
            )
            assert listening_backends(database_url) == 0
            claimed = await service.workers.fetch(
                CALLER, fetch_request({"queues": ["mail"], "wait_ms": WAIT_MS})
            )
            assert len(claimed) == 1
            assert listening_backends(database_url) == 0
            waiting = asyncio.create_task(
                service.workers.fetch(
                    CALLER, fetch_request({"queues": ["mail"], "wait_ms": WAIT_MS})
                )
            )
            await asyncio.sleep(0.3)
            assert listening_backends(database_url) == 1
            job = await service.jobs.enqueue(
                CALLER, read_envelope({"type": "mail.send", "args": [], "options": mail})
            )
            claimed = await asyncio.wait_for(waiting, PATIENCE_SECONDS)
            assert [found.id for found in claimed] == [job.id]
        finally:
            await store.close()


@pytest.mark.postgres
async def test_an_enqueue_notifies_a_listening_connection_once_it_commits(
    postgres_template: str,
) -> None:
    """The enqueue's NOTIFY goes out with its one statement (no COMMIT to carry it), for an
    available job only: a LISTEN on a connection of its own hears the available job's queue
    and nothing for the scheduled one enqueued before it (notifications arrive in commit
    order; no re-check stands in for them here)."""
    async with listening_service(postgres_template) as (service, heard):
        later = {"queue": "later", "delay_until": "2099-01-01T00:00:00Z"}
        await service.jobs.enqueue(
            CALLER, read_envelope({"type": "mail.send", "args": [], "options": later})
        )
        await service.jobs.enqueue(
            CALLER, read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
        )
        assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == "mail"


@pytest.mark.postgres
async def test_an_enqueue_to_a_known_queue_notifies_too(postgres_template: str) -> None:
    """The second enqueue to a queue runs the known queue's statement (no queues insert): its
    NOTIFY, from the job insert's RETURNING, goes out as the first's does; a scheduled job's
    does not."""
    async with listening_service(postgres_template) as (service, heard):
        mail = {"type": "mail.send", "args": [], "options": {"queue": "mail"}}
        later = {"queue": "mail", "delay_until": "2099-01-01T00:00:00Z"}
        await service.jobs.enqueue(CALLER, read_envelope(mail))
        assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == "mail"
        await service.jobs.enqueue(
            CALLER, read_envelope({"type": "mail.send", "args": [], "options": later})
        )
        await service.jobs.enqueue(CALLER, read_envelope({**mail, "options": {"queue": "b"}}))
        await service.jobs.enqueue(CALLER, read_envelope(mail))
        assert (CALLER.tenant_id, "mail") in service.jobs.known_queues
        assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == "b"
        assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == "mail"


@pytest.mark.postgres
async def test_a_batch_enqueue_notifies_the_queues_of_its_available_jobs(
    postgres_template: str,
) -> None:
    """A batch's NOTIFY goes out with its one statement too, once for each queue of an
    available job: the scheduled job's queue is never heard."""
    async with listening_service(postgres_template) as (service, heard):
        later = {"queue": "later", "delay_until": "2099-01-01T00:00:00Z"}
        bodies = [
            {"type": "mail.send", "args": [], "options": later},
            {"type": "mail.send", "args": [], "options": {"queue": "mail"}},
            {"type": "sms.send", "args": [], "options": {"queue": "sms"}},
            {"type": "mail.send", "args": [], "options": {"queue": "mail"}},
        ]
        await service.jobs.enqueue_batch(CALLER, [read_envelope(body) for body in bodies])
        woken = {await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) for _ in range(2)}
        assert woken == {"mail", "sms"}
        await asyncio.sleep(0.2)  # anything else the commit sent has arrived by now
        assert heard.empty()


async def test_a_commit_wakes_this_process_s_local_waiters(service: Service, store: Store) -> None:
    """`wait_for_local_work` hears this process's own commits, with no LISTEN connection: an
    enqueue of one job and a batch (on PostgreSQL each statement commits alone)."""
    for payload in ({"queue": "mail"}, None):
        waiting = asyncio.create_task(store.wait_for_local_work(["mail"], WAIT_MS / 1000))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        envelope = {"type": "mail.send", "args": [], "options": {"queue": "mail"}}
        if payload is None:
            await service.jobs.enqueue_batch(CALLER, [read_envelope(envelope)] * 2)
        else:
            await service.jobs.enqueue(CALLER, read_envelope(envelope))
        assert await asyncio.wait_for(waiting, PATIENCE_SECONDS) is True


async def test_a_delivery_queued_here_wakes_the_delivery_loop_before_it_listens(
    service: Service,
) -> None:
    """With no active subscription the delivery loop waits for this process's commits only; a
    subscription made here and a job enqueued for it wake it at once (the delivery queued with
    the job), not at its next look."""
    waiting = asyncio.create_task(service.webhooks.wait_for_work(WAIT_MS / 1000))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    request = SubscriptionRequest("http://127.0.0.1:9/hook", ("job.enqueued",), None)
    await service.webhooks.create(ACME, request)
    await service.jobs.enqueue(ACME, read_envelope({"type": "mail.send", "args": []}))
    await asyncio.wait_for(waiting, PATIENCE_SECONDS)
    assert len(await service.webhooks.claim(10)) == 1


@pytest.mark.postgres
async def test_the_delivery_loop_listens_only_while_a_subscription_is_active(
    postgres_template: str,
) -> None:
    """Every NOTIFY wakes each listening backend of the database, so a server with no
    subscription keeps no LISTEN connection for its delivery loop: it opens once one exists."""
    with database_from_template(postgres_template) as database_url:
        store = await open_test_store(database_url)
        try:
            service = Service(Runtime(store, options=service_options()))
            await service.webhooks.wait_for_work(0.05)
            assert listening_backends(database_url) == 0
            request = SubscriptionRequest("http://127.0.0.1:9/hook", ("job.enqueued",), None)
            made = await service.webhooks.create(ACME, request)
            await service.webhooks.wait_for_work(0.05)
            await asyncio.sleep(0.1)
            assert listening_backends(database_url) == 1
            inactive = SubscriptionChanges(active=False)
            await service.webhooks.update(ACME, made.subscription.id, inactive)
            assert not await _any_active(service)
        finally:
            await store.close()


async def _any_active(service: Service) -> bool:
    async with service.runtime.store.transaction(WEBHOOK_CALLER) as transaction:
        return await transaction.any_active_subscription()
