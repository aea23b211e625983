"""Tombstones in a table of their own (migration 0023): what pruning leaves of a dead letter is
still an episode of its job and still an arrival, and the tombstones written in place before
0023 move there."""

from __future__ import annotations

import sqlite3

import httpx
import psycopg
import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.trend import Buckets, Window
from redrive.ports import Page
from redrive.service.facade import Service
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.test_cron_tenants import empty_database, open_store
from tests.behaviour.test_dead_letter_retention import kill_labelled, prune_now, put_policy
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
__all__ = ["empty_database"]  # a fixture used below
BEFORE_TOMBSTONES = "0018_live_dead_letter_indexes"


async def test_a_tombstone_is_still_an_episode_of_its_job_and_an_arrival(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    start = clock.now_ms()
    pruned = await kill_labelled(client, clock, "mail", "m1")
    await kill_labelled(client, clock, "mail", "m2")
    await put_policy(client, {"max_count": 1, "min_age": "P0D"})
    assert (await prune_now(client))["deleted"] == 1
    end = clock.now_ms() + 1

    async with service.runtime.store.transaction(SYSTEM) as transaction:
        [episode] = await transaction.dead_letter_episodes(pruned, None)
        job = episode.job
        assert (episode.status, episode.moved_by, episode.moved_at) == ("pruned", "api", end - 1)
        assert (job.args, job.meta, job.errors, job.error, job.result) == ([], {}, [], None, None)
        assert (job.id, job.queue, job.type) == (pruned, "mail", "mail.job")

        [arrivals] = await transaction.dead_letter_arrivals(start, start)
        assert (arrivals.queue, arrivals.in_quiet_period, arrivals.in_window) == ("mail", 2, 2)
        queues = await transaction.queue_arrivals_between([(DEFAULT_TENANT, "mail")], start, end)
        assert queues == {(DEFAULT_TENANT, "mail"): 2}
        incident = episode.incident_id
        assert incident is not None
        buckets = Buckets(Window.DAY, start, end - start, 1)
        counts = await transaction.count_incident_arrivals([incident], None, buckets)
        assert counts == {incident: {0: 2}}


INSERT_IN_PLACE = {
    "sqlite": "INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, discarded_at, "
    "status, job, moved_at, moved_by) VALUES (?, ?, '_default', 'mail', 'mail.job', "
    "'max_attempts_exhausted', 1000, ?, ?, 2000, 'system')",
    "postgres": "INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, "
    "discarded_at, status, job, moved_at, moved_by) VALUES (%s, %s, '_default', 'mail', "
    "'mail.job', 'max_attempts_exhausted', 1000, %s, %s, 2000, 'system')",
}


def job_document(job_id: str) -> str:
    return (
        f'{{"id": "{job_id}", "tenant_id": "_default", "type": "mail.job", "queue": "mail", '
        '"args": [], "state": "discarded", "created_at": 500, "discarded_at": 1000}'
    )


def write_rows_in_place(backend: str, location: str) -> None:
    """Schema 18's episodes: a tombstone in place, an archived one, and a dead letter."""
    rows = [(f"e{status}", f"j{status}", status, job_document(f"j{status}"))
            for status in ("pruned", "archived", "dead")]  # fmt: skip
    if backend == "sqlite":
        with sqlite3.connect(location) as connection:
            connection.executemany(INSERT_IN_PLACE[backend], rows)
        connection.close()
        return
    with psycopg.connect(location) as postgres, postgres.cursor() as cursor:
        cursor.executemany(INSERT_IN_PLACE[backend], rows)


async def statuses(store: SqliteStore | PostgresStore, status: str) -> list[tuple[str, str]]:
    """The episodes listed with the status, each counted too (a dead one is counted by the
    tallies, which the rows written by hand are not in)."""
    filters = parse_filter({"status": status}, 0)
    async with store.transaction(SYSTEM) as transaction:
        listed = await transaction.list_dead_letters(filters, Page(limit=10))
        counted = await transaction.count_dead_letters(filters)
    assert counted == (len(listed) if status != "dead" else 0)
    return [(episode.id, episode.status) for episode in listed]


async def test_migration_0023_moves_the_tombstones_written_in_place(
    backend: str, empty_database: str
) -> None:
    store = await open_store(backend, empty_database)
    try:
        await store.migrate(until=BEFORE_TOMBSTONES)
        write_rows_in_place(backend, empty_database)
        await store.migrate()
        assert await statuses(store, "pruned") == [("epruned", "pruned")]
        assert await statuses(store, "archived") == [("earchived", "archived")]
        assert await statuses(store, "dead") == [("edead", "dead")]
        async with store.transaction(SYSTEM) as transaction:
            [episode] = await transaction.dead_letter_episodes("jpruned", None)
            assert (episode.moved_at, episode.moved_by) == (2000, "system")
    finally:
        await store.close()
