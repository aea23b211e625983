"""The SQLite and PostgreSQL schemas, each migrated to head, have the same tables and indexes.

Column types differ by dialect (INTEGER/BIGINT, TEXT/JSONB, INTEGER/BOOLEAN) and are not compared.
Names are: tables, columns (in order), which columns may be NULL, primary and unique keys (by
columns: their index names are made up by each database), and every index a migration names,
with its key columns, their order, uniqueness and whether it is partial (predicates are dialect
text and are not compared). Where the dialects differ on purpose, the difference is listed below
with its reason, and the test checks that each dialect still has exactly what the list says.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.postgres  # compares against a PostgreSQL schema


@dataclass(frozen=True)
class Index:
    """An index as both dialects can describe it: key columns ("x DESC" when descending)."""

    table: str
    columns: tuple[str, ...]
    unique: bool = False
    partial: bool = False


@dataclass
class Schema:
    columns: dict[str, list[str]] = field(default_factory=dict)
    nullable: dict[str, set[str]] = field(default_factory=dict)
    primary_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unique_keys: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)  # by name: CREATE [UNIQUE] INDEX ones


# Keys that differ on purpose: table -> (SQLite, PostgreSQL), each (primary key, unique keys).
# SQLite hands out increasing numbers only to an INTEGER PRIMARY KEY, so it numbers jobs (the
# claim's FIFO order) with `sequence` as the rowid and keeps the job id UNIQUE. PostgreSQL numbers
# them with an identity column and keys the table by the job id. (events does the same in both.)
KEY_DIFFERENCES: dict[str, tuple[tuple[tuple[str, ...], set[tuple[str, ...]]], ...]] = {
    "jobs": ((("sequence",), {("id",)}), (("id",), set())),
}


# Indexes only PostgreSQL has, on purpose. SQLite's plans never read these dead-letter search
# indexes (its filters are `(:queue IS NULL OR queue = :queue)`, planned once for any value: it
# scans dead_letters_by_time or the table), and each cost every dead letter entering a b-tree
# entry and WAL pages; SQLite's migration 0032 drops them. PostgreSQL's plans use them. SQLite's
# 0041 drops two more no SQLite plan reads, which every claimed job (jobs_lease) or dead letter
# (dead_letters_by_tenant) paid for.
POSTGRES_ONLY_INDEXES = {
    "dead_letters_by_queue", "dead_letters_by_type", "dead_letters_by_error",
    "dead_letters_by_incident", "jobs_lease", "dead_letters_by_tenant",
}  # fmt: skip


def sqlite_schema(path: Path) -> Schema:
    schema = Schema()
    connection = sqlite3.connect(path)
    try:
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            info = connection.execute(f"PRAGMA table_info('{table}')").fetchall()
            schema.columns[table] = [row[1] for row in info]
            keyed = sorted((row[5], row[1]) for row in info if row[5])
            schema.primary_keys[table] = tuple(name for _, name in keyed)
            # A primary key column is never NULL, whatever SQLite's pragma says of it.
            schema.nullable[table] = {
                row[1] for row in info if not row[3] and row[1] not in schema.primary_keys[table]
            }
            schema.unique_keys[table] = set()
            for _, name, unique, origin, partial in connection.execute(
                f"PRAGMA index_list('{table}')"
            ):
                columns = tuple(
                    f"{row[2]} DESC" if row[3] else row[2]
                    for row in connection.execute(f"PRAGMA index_xinfo('{name}')")
                    if row[5]  # key columns, not the rowid SQLite appends
                )
                if origin == "c":
                    schema.indexes[name] = Index(table, columns, bool(unique), bool(partial))
                elif origin == "u":
                    schema.unique_keys[table].add(columns)
                else:
                    assert origin == "pk" and columns == schema.primary_keys[table], name
    finally:
        connection.close()
    return schema


POSTGRES_INDEXES = """
SELECT i.tablename, i.indexname, x.indisunique, x.indisprimary, x.indpred IS NOT NULL AS partial,
       c.contype,
       ARRAY(
           SELECT pg_get_indexdef(x.indexrelid, k, true)
                  || CASE WHEN x.indoption[k - 1] & 1 = 1 THEN ' DESC' ELSE '' END
           FROM generate_series(1, x.indnkeyatts) AS k ORDER BY k
       ) AS columns
FROM pg_indexes AS i
JOIN pg_index AS x ON x.indexrelid = format('%I.%I', i.schemaname, i.indexname)::regclass
LEFT JOIN pg_constraint AS c ON c.conindid = x.indexrelid
WHERE i.schemaname = 'public'
"""


def postgres_schema(url: str) -> Schema:
    schema = Schema()
    with psycopg.connect(url) as connection:
        for table, column, nullable in connection.execute(
            "SELECT table_name, column_name, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        ):
            schema.columns.setdefault(table, []).append(column)
            schema.nullable.setdefault(table, set())
            schema.unique_keys.setdefault(table, set())
            schema.primary_keys.setdefault(table, ())
            if nullable == "YES":
                schema.nullable[table].add(column)
        for table, name, unique, primary, partial, constraint, columns in connection.execute(
            POSTGRES_INDEXES
        ):
            keys = tuple(column.replace('"', "") for column in columns)
            if primary:
                schema.primary_keys[table] = keys
            elif constraint == "u":
                schema.unique_keys[table].add(keys)
            else:
                assert constraint is None, (name, constraint)
                schema.indexes[name] = Index(table, keys, unique, partial)
    return schema


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Schema, Schema]]:
    """(SQLite, PostgreSQL): a fresh database of each, migrated to head by its store."""
    path = tmp_path_factory.mktemp("parity") / "redrive.db"
    with fresh_database("redrive_parity") as url:

        async def migrate() -> None:
            sqlite = SqliteStore(str(path))
            await sqlite.migrate()
            await sqlite.close()
            postgres = PostgresStore(url, max_size=1)
            await postgres.migrate()
            await postgres.close()

        asyncio.run(migrate())
        yield sqlite_schema(path), postgres_schema(url)


def test_both_dialects_have_the_same_tables(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    assert set(sqlite.columns) - set(postgres.columns) == set(), "tables only in SQLite"
    assert set(postgres.columns) - set(sqlite.columns) == set(), "tables only in PostgreSQL"
    assert {"jobs", "dead_letters", "crons", "workers", "schema_migrations"} <= set(sqlite.columns)


def test_each_table_has_the_same_columns_in_the_same_order(
    schemas: tuple[Schema, Schema],
) -> None:
    sqlite, postgres = schemas
    for table in sorted(set(sqlite.columns) & set(postgres.columns)):
        assert sqlite.columns[table] == postgres.columns[table], table


def test_the_same_columns_may_be_null(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    for table in sorted(set(sqlite.columns) & set(postgres.columns)):
        assert sqlite.nullable[table] == postgres.nullable[table], table


def test_each_table_has_the_same_primary_and_unique_keys(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    for table in sorted(set(sqlite.columns) & set(postgres.columns)):
        found = (
            (sqlite.primary_keys[table], sqlite.unique_keys[table]),
            (postgres.primary_keys[table], postgres.unique_keys[table]),
        )
        if table in KEY_DIFFERENCES:
            assert found == KEY_DIFFERENCES[table], table
        else:
            assert found[0] == found[1], table
            assert found[0][0], f"{table} has no primary key"
    assert sqlite.primary_keys["crons"] == ("tenant_id", "name")
    assert sqlite.primary_keys["workers"] == ("tenant_id", "id")


def test_both_dialects_name_the_same_indexes(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    assert set(sqlite.indexes) - set(postgres.indexes) == set(), "indexes only in SQLite"
    only_postgres = set(postgres.indexes) - set(sqlite.indexes)
    assert only_postgres == POSTGRES_ONLY_INDEXES, "indexes only in PostgreSQL"


def test_each_named_index_has_the_same_shape(schemas: tuple[Schema, Schema]) -> None:
    """Partial where PostgreSQL's is, too: SQLite's job indexes became so in 0030, and its
    jobs_tenant in 0047 (its predicate leaves active jobs out as well as available ones, which
    PostgreSQL's 0045 leaves out: predicates are not compared)."""
    sqlite, postgres = schemas
    for name in sorted(set(sqlite.indexes) & set(postgres.indexes)):
        assert sqlite.indexes[name] == postgres.indexes[name], name
    assert sqlite.indexes["jobs_tenant"].partial


def test_the_reader_sees_what_the_migrations_wrote(schemas: tuple[Schema, Schema]) -> None:
    """The schema readers themselves: a few facts written plainly in the migrations."""
    for schema in schemas:
        assert schema.indexes["dead_letters_one_dead_per_job"] == Index(
            "dead_letters", ("job_id",), unique=True, partial=True
        )
        assert schema.indexes["dead_letters_by_time"] == Index(
            "dead_letters", ("discarded_at DESC", "id DESC"), partial=True
        )
        assert schema.primary_keys["events"] == ("sequence",)
        assert schema.unique_keys["events"] == {("id",)}
        assert "moved_by" in schema.nullable["dead_letters"]
        assert "tenant_id" not in schema.nullable["dead_letters"]
