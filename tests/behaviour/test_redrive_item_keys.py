"""A job a redrive task requeued names its item's dead letter (migration 0044): its end finds the
item by the items' key; the jobs moved before the migration whose end was not recorded yet are
given theirs by it. A task's pending items become its pin blocks (migration 0046)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from redrive.domain import redrive
from redrive.domain.caller import SYSTEM
from redrive.domain.redrive import RedriveOutcome
from tests.behaviour.test_cron_tenants import empty_database, open_store

pytestmark = pytest.mark.anyio
__all__ = ["empty_database"]  # a fixture used below
BEFORE_ITEM_KEYS = "0042_tenant_policy_one_read"
# Schema 42's rows: a running task, its items (one moved whose job has not ended, one whose job
# ended already, one still pending) and their jobs.
ROWS = [
    "INSERT INTO redrive_tasks (id, tenant_id, state, filter, rate_per_minute, critical, "
    "created_by, created_at, updated_at, updated_by, paced_until, to_move, moved, skipped, "
    "succeeded, dead_again, queues) VALUES ('t1', '_default', 'running', '{}', 100, FALSE, "
    "'test', 1, 1, 'test', 0, 3, 2, 0, 1, 0, '[]')",
    "INSERT INTO redrive_task_items (task_id, tenant_id, dead_letter_id, job_id, queue, state) "
    "VALUES ('t1', '_default', 'd1', 'j1', 'mail', 'moved'), "
    "('t1', '_default', 'd2', 'j2', 'mail', 'succeeded'), "
    "('t1', '_default', 'd3', 'j3', 'mail', 'pending')",
    "INSERT INTO jobs (id, tenant_id, queue, type, state, max_attempts, envelope, "
    "visibility_timeout_ms, created_at, redrive_task_id) VALUES "
    "('j1', '_default', 'mail', 'mail.job', 'available', 1, '{}', 1000, 1, 't1'), "
    "('j2', '_default', 'mail', 'mail.job', 'completed', 1, '{}', 1000, 1, 't1'), "
    "('j3', '_default', 'mail', 'mail.job', 'discarded', 1, '{}', 1000, 1, NULL)",
]
NAMED = "SELECT id, redrive_dead_letter_id FROM jobs ORDER BY id"


def write_and_read(backend: str, location: str, statements: list[str]) -> list[tuple[str, ...]]:
    if backend == "sqlite":
        with sqlite3.connect(location) as connection:
            for statement in statements:
                connection.execute(statement.replace("FALSE", "0"))
            rows = connection.execute(NAMED).fetchall() if not statements else []
        connection.close()
        return rows
    with psycopg.connect(location) as postgres:
        for statement in statements:
            postgres.execute(statement)
        return postgres.execute(NAMED).fetchall() if not statements else []


async def test_migration_0044_names_the_item_of_each_job_whose_end_is_not_recorded(
    backend: str, empty_database: str
) -> None:
    store = await open_store(backend, empty_database)
    try:
        await store.migrate(until=BEFORE_ITEM_KEYS)
        write_and_read(backend, empty_database, ROWS)
        await store.migrate()
        assert write_and_read(backend, empty_database, []) == [
            ("j1", "d1"), ("j2", None), ("j3", None),
        ]  # fmt: skip
        async with store.transaction(SYSTEM) as transaction:
            items, _ = await transaction.record_redrive_outcomes(
                [RedriveOutcome("t1", "d1", "j1", redrive.SUCCEEDED)]
            )
            assert [(item.task_id, item.state) for item in items] == [("t1", redrive.SUCCEEDED)]
            succeeded = await transaction.redrive_items("t1", redrive.SUCCEEDED, 10)
            assert sorted(item["job_id"] for item in succeeded) == ["j1", "j2"]
    finally:
        await store.close()


BEFORE_PIN_BLOCKS = "0045_jobs_tenant_without_available_jobs"
# Schema 45's rows: a running task whose items are one moved, one succeeded and two pending.
PINNED_ROWS = [
    ROWS[0].replace("3, 2, 0, 1, 0", "4, 2, 0, 1, 0"),
    "INSERT INTO redrive_task_items (task_id, tenant_id, dead_letter_id, job_id, queue, state) "
    "VALUES ('t1', '_default', 'd1', 'j1', 'mail', 'moved'), "
    "('t1', '_default', 'd2', 'j2', 'mail', 'succeeded'), "
    "('t1', '_default', 'd4', 'j4', 'mail', 'pending'), "
    "('t1', '_default', 'd3', 'j3', 'mail', 'pending')",
]


async def test_migration_0046_makes_the_pending_items_of_a_task_its_pin_blocks(
    backend: str, empty_database: str
) -> None:
    # The pending items become the task's blocks, in id order, each with its job; the others
    # keep their rows: the listing reads each item's state as before, and the next claim takes
    # the pending ones.
    store = await open_store(backend, empty_database)
    try:
        await store.migrate(until=BEFORE_PIN_BLOCKS)
        write_and_read(backend, empty_database, PINNED_ROWS)
        await store.migrate()
        async with store.transaction(SYSTEM) as transaction:
            listed = await transaction.redrive_items("t1", None, 10)
            claimed = await transaction.claim_redrive_items("t1", 10)
            after = await transaction.redrive_items("t1", None, 10)
    finally:
        await store.close()
    assert [(item["dead_letter_id"], item["job_id"], item["state"]) for item in listed] == [
        ("d1", "j1", "moved"), ("d2", "j2", "succeeded"), ("d3", "j3", "pending"),
        ("d4", "j4", "pending"),
    ]  # fmt: skip
    assert list(claimed.items()) == [("d3", "j3"), ("d4", "j4")]
    assert [item["state"] for item in after] == ["moved", "succeeded", "moved", "moved"]
