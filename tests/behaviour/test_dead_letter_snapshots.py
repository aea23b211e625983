"""Each dead letter's job snapshot in a table of its own (migration 0025): written as the episode
enters, read with it in every status, gone with it when pruned, and moved there by the migration
from the rows that carried it."""

from __future__ import annotations

import json
import sqlite3

import httpx
import psycopg
import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.ports import Page
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import count_rows, explain_all
from tests.behaviour.test_cron_tenants import empty_database, open_store
from tests.behaviour.test_dead_letter_retention import kill_labelled, prune_now, put_policy
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
__all__ = ["empty_database"]  # a fixture used below
BEFORE_SNAPSHOTS = "0023_dead_letter_tombstones"
ORPHANS = (
    "SELECT COUNT(*) FROM dead_letter_snapshots AS snapshot "
    "WHERE NOT EXISTS (SELECT 1 FROM dead_letters WHERE dead_letters.id = snapshot.id)"
)
WITHOUT_SNAPSHOT = (
    "SELECT COUNT(*) FROM dead_letters "
    "WHERE NOT EXISTS (SELECT 1 FROM dead_letter_snapshots AS snapshot "
    "WHERE snapshot.id = dead_letters.id)"
)


async def test_a_moved_episode_keeps_its_snapshot_and_a_pruned_one_takes_it_along(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    retried = await kill_labelled(client, clock, "bulk", "r1")
    single = await kill_labelled(client, clock, "single", "s1")
    pruned = await kill_labelled(client, clock, "mail", "p1")
    kept = await kill_labelled(client, clock, "mail", "k1")
    await explain_all(service, SYSTEM)
    request = BulkRequest(parse_filter({"queue": "bulk"}, clock.now_ms(), prefix=""), confirm=True)
    assert (await service.dead_letters.bulk_retry(SYSTEM, request)).succeeded == 1
    assert (await client.post(f"/ojs/v1/dead-letter/{single}/retry")).status_code == 200
    await put_policy(client, {"max_count": 1, "min_age": "P0D"}, queue="mail")
    assert (await prune_now(client))["deleted"] == 1

    async with service.runtime.store.transaction(SYSTEM) as transaction:
        for job_id, label, status in (
            (retried, "r1", "retried"), (single, "s1", "retried"), (kept, "k1", "dead"),
        ):  # fmt: skip
            [episode] = await transaction.dead_letter_episodes(job_id, None)
            assert (episode.status, episode.job.args) == (status, [label])
            assert [error["type"] for error in episode.job.errors] == ["Boom"]
        [tombstone] = await transaction.dead_letter_episodes(pruned, None)
        assert (tombstone.status, tombstone.job.id) == ("pruned", pruned)
        [dead] = await transaction.list_dead_letters(
            parse_filter({}, clock.now_ms()), Page(limit=10)
        )
        assert (dead.job_id, dead.job.args) == (kept, ["k1"])
    assert await count_rows(service, ORPHANS) == 0
    assert await count_rows(service, WITHOUT_SNAPSHOT) == 0
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letter_snapshots") == 3


INSERT_IN_PLACE = {
    "sqlite": "INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, discarded_at, "
    "status, job, moved_at, moved_by) VALUES (?, ?, '_default', 'mail', 'mail.job', "
    "'max_attempts_exhausted', 1000, ?, ?, 2000, 'system')",
    "postgres": "INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, "
    "discarded_at, status, job, moved_at, moved_by) VALUES (%s, %s, '_default', 'mail', "
    "'mail.job', 'max_attempts_exhausted', 1000, %s, %s, 2000, 'system')",
}


def job_document(job_id: str, label: str) -> str:
    return json.dumps({
        "id": job_id, "tenant_id": "_default", "type": "mail.job", "queue": "mail",
        "args": [label], "meta": {"label": label}, "state": "discarded", "created_at": 500,
        "discarded_at": 1000,
    })  # fmt: skip


def write_rows_with_snapshots(backend: str, location: str) -> None:
    """Schema 23's episodes, each carrying its snapshot: a dead letter and a retried one."""
    rows = [(f"e{status}", f"j{status}", status, job_document(f"j{status}", status))
            for status in ("dead", "retried")]  # fmt: skip
    if backend == "sqlite":
        with sqlite3.connect(location) as connection:
            connection.executemany(INSERT_IN_PLACE[backend], rows)
        connection.close()
        return
    with psycopg.connect(location) as postgres, postgres.cursor() as cursor:
        cursor.executemany(INSERT_IN_PLACE[backend], rows)


async def test_migration_0025_moves_every_snapshot_to_its_table(
    backend: str, empty_database: str
) -> None:
    store: SqliteStore | PostgresStore = await open_store(backend, empty_database)
    try:
        await store.migrate(until=BEFORE_SNAPSHOTS)
        write_rows_with_snapshots(backend, empty_database)
        await store.migrate()
        async with store.transaction(SYSTEM) as transaction:
            for status in ("dead", "retried"):
                [episode] = await transaction.dead_letter_episodes(f"j{status}", None)
                assert (episode.id, episode.status) == (f"e{status}", status)
                assert (episode.job.args, episode.job.meta) == ([status], {"label": status})
            [dead] = await transaction.dead_letters_by_id(["edead"])
            assert dead.job.args == ["dead"]
    finally:
        await store.close()
