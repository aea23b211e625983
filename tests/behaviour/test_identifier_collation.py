"""Identifiers order bytewise in both stores: PostgreSQL's migration 0039 gives them the "C"
collation, SQLite compares text BINARY. Checked on a PostgreSQL database whose own collation
(ICU en-US) orders case and punctuation otherwise, as en_US.UTF-8 does."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.support.postgres import admin_url, database_url, require_postgres

pytestmark = pytest.mark.postgres

# Identifiers differing in case, digits and punctuation: bytewise "1" < "B" < "_" < "a", where
# en-US puts "_" first and "a" before "B".
IDS = ["a", "B", "_", "1", "a-b", "aB", "ab", "a_b", "A", "0190-x", "0190x"]
# Columns the migration gives "C": ids, foreign ids, tenant ids, queue names (a sample of each).
IDENTIFIERS = {
    ("jobs", "id"), ("jobs", "tenant_id"), ("jobs", "queue"), ("jobs", "state"),
    ("dead_letters", "id"), ("dead_letters", "job_id"), ("dead_letters", "tenant_id"),
    ("events", "id"), ("incidents", "id"), ("queues", "name"),
    ("redrive_task_items", "task_id"), ("redrive_task_items", "dead_letter_id"),
    ("redrive_task_items", "job_id"), ("redrive_tasks", "moved_through"),
    ("api_keys", "id"), ("dashboard_sessions", "key_id"), ("jobs", "redrive_dead_letter_id"),
}  # fmt: skip
# Text people write, kept in the database's collation.
PEOPLES_TEXT = {("api_keys", "name"), ("replay_rules", "name"), ("dead_letters", "reason")}
ITEMS = "INSERT INTO redrive_task_items (task_id, tenant_id, dead_letter_id, job_id, queue, state) "


@pytest.fixture(scope="module")
def icu_database() -> Iterator[str]:
    """A fresh database collated ICU en-US, migrated to head."""
    require_postgres()
    name = f"redrive_collation_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(
            f'CREATE DATABASE "{name}" TEMPLATE template0 '
            "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    url = database_url(name)
    try:
        asyncio.run(_migrate(PostgresStore(url, max_size=1)))
        yield url
    finally:
        with psycopg.connect(admin_url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _migrate(store: PostgresStore | SqliteStore, until: str | None = None) -> None:
    try:
        await store.migrate(until)
    finally:
        await store.close()


def _add_items(connection: psycopg.Connection | sqlite3.Connection, placeholder: str) -> None:
    values = ", ".join([placeholder] * 6)
    for index, dead_letter_id in enumerate(IDS):
        connection.execute(
            f"{ITEMS} VALUES ({values})",
            ("task", "default", dead_letter_id, f"job{index}", "default", "pending"),
        )


def test_identifier_columns_are_collated_c_and_peoples_text_is_not(icu_database: str) -> None:
    with psycopg.connect(icu_database) as connection:
        found = {
            (table, column): collation
            for table, column, collation in connection.execute(
                "SELECT table_name, column_name, collation_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND data_type = 'text'"
            )
        }
    assert {column: found[column] for column in IDENTIFIERS} == dict.fromkeys(IDENTIFIERS, "C")
    assert {column: found[column] for column in PEOPLES_TEXT} == dict.fromkeys(PEOPLES_TEXT)


def test_ids_order_bytewise_in_both_stores(icu_database: str, tmp_path: Path) -> None:
    """Ordered by id, and read on from a keyset cursor (`dead_letter_id > :after`, as the redrive
    reads its pending items), the rows come in Python's (bytewise) order on both stores; the
    database's own collation would not give it."""
    bytewise = sorted(IDS)
    after = "B"
    path = tmp_path / "redrive.db"
    asyncio.run(_migrate(SqliteStore(str(path))))
    sqlite = sqlite3.connect(path)
    try:
        _add_items(sqlite, "?")
        in_sqlite = [row[0] for row in sqlite.execute(
            "SELECT dead_letter_id FROM redrive_task_items ORDER BY dead_letter_id"
        )]  # fmt: skip
        sqlite_after = [row[0] for row in sqlite.execute(
            "SELECT dead_letter_id FROM redrive_task_items WHERE dead_letter_id > ? "
            "ORDER BY dead_letter_id", (after,),
        )]  # fmt: skip
    finally:
        sqlite.close()
    with psycopg.connect(icu_database) as connection:
        connection.execute("SELECT set_config('redrive.tenant_id', '*', false)")
        _add_items(connection, "%s")
        in_postgres = [row[0] for row in connection.execute(
            "SELECT dead_letter_id FROM redrive_task_items ORDER BY dead_letter_id"
        )]  # fmt: skip
        postgres_after = [row[0] for row in connection.execute(
            "SELECT dead_letter_id FROM redrive_task_items WHERE dead_letter_id > %s "
            "ORDER BY dead_letter_id", (after,),
        )]  # fmt: skip
        in_locale = [row[0] for row in connection.execute(
            "SELECT dead_letter_id FROM redrive_task_items "
            'ORDER BY dead_letter_id COLLATE "default"'
        )]  # fmt: skip
        connection.rollback()
    assert in_sqlite == in_postgres == bytewise
    assert sqlite_after == postgres_after == [key for key in bytewise if key > after]
    assert in_locale != bytewise  # the database's collation alone orders them otherwise


def test_migrating_keeps_the_rows_files_statistics_and_policies() -> None:
    """0039 on a database with rows: only the indexes are rebuilt (the table's file stays), the
    analysed columns have statistics again, every tenant table has its policy back, and the
    foreign key from dashboard_sessions to api_keys still holds."""
    require_postgres()
    name = f"redrive_collation_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = database_url(name)
    files = (
        "SELECT pg_relation_filenode('redrive_task_items'), "
        "pg_relation_filenode('redrive_task_items_pkey')"
    )
    try:
        asyncio.run(_migrate(PostgresStore(url, max_size=1), "0038_tenant_policy_read_once"))
        with psycopg.connect(url, autocommit=True) as connection:
            _add_items(connection, "%s")
            connection.execute("ANALYZE redrive_task_items")
            before = connection.execute(files).fetchone()
            policies = connection.execute(
                "SELECT tablename, qual, with_check FROM pg_policies ORDER BY tablename"
            ).fetchall()
        # Up to 0039 only: a later migration (0042) rewrites the policies on purpose.
        asyncio.run(_migrate(PostgresStore(url, max_size=1), "0039_identifiers_collate_c"))
        with psycopg.connect(url, autocommit=True) as connection:
            after = connection.execute(files).fetchone()
            assert before is not None and after is not None
            assert after[0] == before[0] and after[1] != before[1]
            assert connection.execute(
                "SELECT pg_relation_filenode('redrive_task_items'), count(*) "
                "FROM redrive_task_items"
            ).fetchone() == (before[0], len(IDS))
            analysed = connection.execute(
                "SELECT attname FROM pg_stats WHERE tablename = 'redrive_task_items' "
                "AND attname = 'dead_letter_id'"
            ).fetchall()
            assert analysed == [("dead_letter_id",)]
            assert (
                connection.execute(
                    "SELECT tablename, qual, with_check FROM pg_policies ORDER BY tablename"
                ).fetchall()
                == policies
            )
            with pytest.raises(psycopg.errors.ForeignKeyViolation):
                connection.execute(
                    "INSERT INTO dashboard_sessions (token_hash, tenant_id, key_id, created_at, "
                    "expires_at) VALUES ('h', 'default', 'no such key', 0, 1)"
                )
    finally:
        with psycopg.connect(admin_url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
