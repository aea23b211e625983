"""Long-poll fetch (`wait_ms`) wakes when work arrives, in the same process or another replica."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from redrive.api.worker_requests import fetch_request
from redrive.domain.envelope import read_envelope
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.conftest import open_test_store
from tests.support.callers import CALLER
from tests.support.postgres import database_from_template

pytestmark = pytest.mark.anyio

# Far longer than the wake-up needs; the test fails if the fetch only returns at its deadline.
WAIT_MS = 20_000
PATIENCE_SECONDS = 10


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


@pytest.mark.postgres
async def test_an_enqueue_notifies_a_listening_connection_once_it_commits(
    postgres_template: str,
) -> None:
    """The enqueue's NOTIFY goes out with its one statement (no COMMIT to carry it), for an
    available job only: a LISTEN on a connection of its own hears the available job's queue
    and nothing for the scheduled one enqueued before it (notifications arrive in commit
    order; no re-check stands in for them here)."""
    with database_from_template(postgres_template) as database_url:
        store = await open_test_store(database_url)
        listener = await asyncpg.connect(database_url)
        heard: asyncio.Queue[str] = asyncio.Queue()
        try:
            await listener.add_listener(
                "redrive_jobs",
                lambda _connection, _pid, _channel, payload: heard.put_nowait(payload),
            )
            service = Service(Runtime(store))
            later = {"queue": "later", "delay_until": "2099-01-01T00:00:00Z"}
            await service.jobs.enqueue(
                CALLER, read_envelope({"type": "mail.send", "args": [], "options": later})
            )
            await service.jobs.enqueue(
                CALLER,
                read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}}),
            )
            assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == "mail"
        finally:
            await listener.close()
            await store.close()
