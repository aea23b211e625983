"""The set-based redrive statement and the domain's redrive() produce the same job."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import batch_items, each_parsed, fetch_request, nack_request
from redrive.domain import dead_letter as episodes
from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.envelope import read_envelope
from redrive.ports import Store
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import explain_all
from tests.support.callers import CALLER, acting_as
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_bulk_redrive_statement_matches_domain_redrive(
    service: Service, store: Store, clock: ManualClock
) -> None:
    policy = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    body = {"type": "billing.charge", "args": [{"amount": 5}], "meta": {"trace": "t1"},
            "options": {"queue": "billing", "retry": policy, "timeout_ms": 9000}}  # fmt: skip
    job = await service.jobs.enqueue(CALLER, read_envelope(body))
    await service.workers.fetch(CALLER, fetch_request({"queues": ["billing"], "worker_id": "w1"}))
    clock.advance(1500)
    await service.workers.nack(
        CALLER, nack_request({"job_id": job.id, "error": {"type": "CardDeclined", "message": "no"}})
    )
    dead, _ = await service.dead_letters.get(CALLER, job.id)
    clock.advance(60_000)
    now = clock.now_ms()
    expected = episodes.redrive(dead.job, now)
    async with store.transaction(SYSTEM) as transaction:
        assert await transaction.redrive_jobs([job.id], now) == {job.id}
        revived = await transaction.get_job(job.id, None)
    assert revived is not None
    assert replace(revived, sequence=None) == replace(expected, sequence=None)


async def test_bulk_retry_revives_in_place_and_from_snapshots_alike(
    service: Service, store: Store, clock: ManualClock
) -> None:
    """Dead jobs whose rows left the jobs table come back from their episode's snapshot, the
    others in place; either way as the domain's redrive() makes them, each once."""
    policy = {"max_attempts": 1, "on_exhaustion": "dead_letter"}

    async def kill(count: int) -> list[str]:
        bodies = [
            {"type": "billing.charge", "args": [{"n": n}], "meta": {"n": n},
             "options": {"queue": "billing", "retry": policy, "priority": n % 3}}
            for n in range(count)
        ]  # fmt: skip
        jobs = await service.jobs.enqueue_batch(CALLER, job_requests({"jobs": bodies}))
        fetched = await service.workers.fetch(
            CALLER, fetch_request({"queues": ["billing"], "count": count})
        )
        nacks = [
            {"job_id": job.id, "lease_token": job.lease_token, "error": {"type": "Declined"}}
            for job in fetched
        ]
        await service.workers.nack_many(
            CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
        )
        return [job.id for job in jobs]

    pruned = await kill(5)
    clock.advance(60_000)
    async with store.transaction(SYSTEM) as transaction:
        assert await transaction.prune_finished_jobs(clock.now_ms(), 100) == 5
        assert all([await transaction.get_job(job_id, None) is None for job_id in pruned])
    in_place = await kill(4)
    dead = {
        job_id: (await service.dead_letters.get(CALLER, job_id))[0] for job_id in pruned + in_place
    }
    clock.advance(1_000)
    now = clock.now_ms()

    await explain_all(service, CALLER)
    request = BulkRequest(parse_filter({"queue": "billing"}, now), confirm=True)
    result = await service.dead_letters.bulk_retry(acting_as("ops"), request)

    assert (result.matched, result.succeeded, result.failed) == (9, 9, 0)
    async with store.transaction(SYSTEM) as transaction:
        for job_id, episode in dead.items():
            revived = await transaction.get_job(job_id, None)
            assert revived is not None, job_id
            expected = episodes.redrive(episode.job, now)
            assert replace(revived, sequence=None) == replace(expected, sequence=None)
    assert (await service.dead_letters.stats(CALLER)).total == 0
    again = await service.dead_letters.bulk_retry(acting_as("ops"), request)
    assert (again.matched, again.succeeded) == (0, 0)
    for job_id in dead:
        history = await service.dead_letters.episodes(CALLER, job_id)
        assert [(e.status, e.moved_by) for e in history] == [(episodes.RETRIED, "ops")]


async def test_bulk_retry_requeues_from_the_job_row_without_reading_the_snapshot(
    service: Service, store: Store, clock: ManualClock
) -> None:
    """Where the dead job's row is still in the jobs table, a bulk retry requeues that row and
    never decodes the episode's snapshot: one no job decodes from does not stop it."""
    policy = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    body = {"type": "billing.charge", "args": [{"amount": 5}],
            "options": {"queue": "billing", "retry": policy}}  # fmt: skip
    job = await service.jobs.enqueue(CALLER, read_envelope(body))
    await service.workers.fetch(CALLER, fetch_request({"queues": ["billing"], "worker_id": "w1"}))
    await service.workers.nack(CALLER, nack_request({"job_id": job.id, "error": {"type": "No"}}))
    dead, _ = await service.dead_letters.get(CALLER, job.id)
    await corrupt_snapshot(store, dead.id)
    clock.advance(1_000)
    now = clock.now_ms()

    await explain_all(service, CALLER)
    request = BulkRequest(parse_filter({"queue": "billing"}, now), confirm=True)
    result = await service.dead_letters.bulk_retry(acting_as("ops"), request)

    assert (result.matched, result.succeeded, result.failed) == (1, 1, 0)
    async with store.transaction(SYSTEM) as transaction:
        revived = await transaction.get_job(job.id, None)
    assert revived is not None
    expected = episodes.redrive(dead.job, now)
    assert replace(revived, sequence=None) == replace(expected, sequence=None)


async def corrupt_snapshot(store: Store, episode_id: str) -> None:
    """Overwrite an episode's job snapshot with JSON no job decodes from, as the tables' owner."""
    if isinstance(store, SqliteStore):
        sqlite = store.connection
        statement = "UPDATE dead_letter_snapshots SET job = '{\"broken\": true}' WHERE id = ?"
        await store.call(lambda: sqlite.execute(statement, (episode_id,)))
        return
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(store.url, autocommit=True) as postgres:
        await postgres.execute(
            "UPDATE dead_letter_snapshots SET job = '{\"broken\": true}' WHERE id = %s",
            (episode_id,),
        )
