"""Row-level security on PostgreSQL: the server's own connections see and write one tenant only.

Deliberately unfiltered SQL runs through the store's own transactions (and on a bare pooled
connection) of a pool of one connection, so the connection another tenant just used is the one
reused. The serve-time check is driven with a superuser, a BYPASSRLS role, the tables' owner and
tables whose row-level security is off; and every table with a tenant_id column must have it
forced, whichever migration added the table. Global retention data works from any tenant on both
stores.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import asyncpg
import httpx
import psycopg
import pytest
from asyncpg.pool import PoolConnectionProxy

from redrive.api.app import create_app
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.envelope import read_envelope
from redrive.domain.retention import parse_policy_changes
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.archive import FileArchive
from redrive.store.postgres.isolation import isolation_problems, migrated_and_isolated
from redrive.store.postgres.store import (
    HERE,
    MIGRATION_LOCK_KEY,
    Connection,
    PostgresExecutor,
    PostgresStore,
    TenantConnection,
)
from redrive.store.transaction import SqlTransaction
from tests.behaviour.ojs_http import enqueue, kill_job
from tests.support.clock import ManualClock
from tests.support.options import service_options
from tests.support.postgres import admin_url, database_from_template

pytestmark = pytest.mark.anyio

ACME = Caller.for_tenant("acme", "test", Role.ADMIN)
GLOBEX = Caller.for_tenant("globex", "test", Role.ADMIN)
# Tenants without a webhook subscription: their enqueues are units of one statement, which run
# under the session's tenant (acme's and globex's find their subscription and write nothing).
INITECH = Caller.for_tenant("initech", "test", Role.ADMIN)
UMBRELLA = Caller.for_tenant("umbrella", "test", Role.ADMIN)
# Tables the seeding below fills for both tenants (every table that holds tenant data is checked;
# these must be among those that hold rows of both, or the test proves nothing).
SEEDED = {"jobs", "dead_letters", "dead_letter_tallies", "events", "queues", "incidents"}
SEEDED = {
    "jobs", "dead_letters", "dead_letter_tallies", "events", "queues", "webhook_subscriptions",
    "job_schemas",
    "alerts",
    "legal_holds",
}  # fmt: skip
TENANT_TABLES = """
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
  AND EXISTS (SELECT FROM pg_attribute AS a
              WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
ORDER BY c.relname
"""


def owner_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """As the tables' owner (a superuser here), which row-level security does not bind."""
    with psycopg.connect(url) as connection:
        return list(connection.execute(query).fetchall())


def owner_run(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


async def connection_of(transaction: SqlTransaction) -> Connection:
    executor = transaction.executor
    assert isinstance(executor, PostgresExecutor)
    return await executor.begun()


async def tenants_seen(store: PostgresStore, caller: Caller, table: str) -> set[str]:
    """Every tenant_id an unfiltered SELECT of the whole table returns to the caller."""
    async with store.transaction(caller) as transaction:
        rows = await (await connection_of(transaction)).fetch(f"SELECT tenant_id FROM {table}")
        return {row["tenant_id"] for row in rows}


async def backend_pid(store: PostgresStore, caller: Caller) -> int:
    async with store.transaction(caller) as transaction:
        return (await connection_of(transaction)).get_server_pid()


@dataclass
class Isolated:
    url: str
    store: PostgresStore
    tables: list[str]  # every table with a tenant_id column


@pytest.fixture
def database(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        yield url


@pytest.fixture
async def isolated(database: str) -> AsyncIterator[Isolated]:
    """Rows of tenants acme and globex in every seeded table; a store with one pooled
    connection, so each transaction reuses the connection the one before it used."""
    seeding = PostgresStore(database, max_size=2)
    await seeding.migrate()
    service = Service(
        Runtime(seeding, clock=ManualClock(), options=service_options(), rng=random.Random(7))
    )
    transport = httpx.ASGITransport(app=create_app(service, max_body_bytes=64_000))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        for tenant in ("acme", "globex"):
            headers = {"X-OJS-Tenant": tenant}
            hook = {"url": "https://hooks.example.com/x", "events": ["dead_letter.*"]}
            made = await client.post("/ojs/v1/webhooks/subscriptions", json=hook, headers=headers)
            assert made.status_code == 201, made.text
            schema = {"schema": {"type": "array"}}
            registered = await client.put(
                "/ojs/v1/admin/schemas/a.b/1", json=schema, headers=headers
            )
            assert registered.status_code == 200, registered.text
            await enqueue(client, "test.live", headers=headers, queue="mail")
            await kill_job(client, headers=headers)
            hold = {"filter": {"queue": "mail"}, "reason": f"case of {tenant}"}
            held = await client.post("/ojs/v1/admin/legal-holds", json=hold, headers=headers)
            assert held.status_code == 201, held.text
        await service.sweeper.evaluate_alerts()  # each tenant's new dead letter fires one
    await seeding.close()
    store = PostgresStore(database, min_size=1, max_size=1)
    tables = [row[0] for row in owner_rows(database, TENANT_TABLES)]
    yield Isolated(database, store, tables)
    await store.close()


@pytest.mark.postgres
async def test_the_seeded_tables_hold_rows_of_both_tenants(isolated: Isolated) -> None:
    for table in SEEDED:
        found = {row[0] for row in owner_rows(isolated.url, f"SELECT tenant_id FROM {table}")}
        assert found == {"acme", "globex"}, table


@pytest.mark.postgres
async def test_an_unfiltered_select_sees_only_the_callers_tenant(isolated: Isolated) -> None:
    for table in isolated.tables:
        assert await tenants_seen(isolated.store, ACME, table) <= {"acme"}, table
        assert await tenants_seen(isolated.store, GLOBEX, table) <= {"globex"}, table
    for table in SEEDED:
        assert await tenants_seen(isolated.store, ACME, table) == {"acme"}, table


@pytest.mark.postgres
async def test_a_pooled_connection_just_used_by_another_tenant_shows_none_of_its_rows(
    isolated: Isolated,
) -> None:
    store = isolated.store
    first = await backend_pid(store, GLOBEX)
    for table in SEEDED:
        assert await tenants_seen(store, GLOBEX, table) == {"globex"}, table
        assert await tenants_seen(store, ACME, table) == {"acme"}, table
    assert await backend_pid(store, ACME) == first  # one connection throughout


@pytest.mark.postgres
async def test_a_tenant_transaction_that_failed_leaves_nothing_on_the_connection(
    isolated: Isolated,
) -> None:
    store = isolated.store
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with store.transaction(GLOBEX) as transaction:
            await (await connection_of(transaction)).execute("SELECT 1 / 0")
    assert await tenants_seen(store, ACME, "jobs") == {"acme"}
    async with store.connection() as connection:
        setting = await connection.fetchval("SELECT current_setting('redrive.tenant_id', true)")
        assert setting in ("", None)


@pytest.mark.postgres
async def test_a_pooled_connection_outside_any_transaction_sees_nothing(
    isolated: Isolated,
) -> None:
    store = isolated.store
    assert await tenants_seen(store, GLOBEX, "jobs") == {"globex"}
    async with store.connection() as connection:
        assert await connection.fetchval("SELECT current_user") == "redrive_app"
        for table in isolated.tables:
            assert await connection.fetchval(f"SELECT COUNT(*) FROM {table}") == 0, table


@pytest.mark.postgres
async def test_a_unit_runs_on_the_pooled_connection_and_a_failed_one_gives_it_back(
    isolated: Isolated,
) -> None:
    """A unit's statements go to the connection behind the pool's proxy (not through it); a
    clean unit keeps it as the spare for the next, a failed one gives it back to the pool,
    which rolls it back, and the next unit takes a connection from the pool again."""
    store = isolated.store
    pool = await store.opened_pool()
    async with store.transaction(GLOBEX) as transaction:
        connection = await connection_of(transaction)
        assert isinstance(connection, TenantConnection)
        assert not isinstance(connection, PoolConnectionProxy)
        first = connection.get_server_pid()
    assert await backend_pid(store, ACME) == first  # the spare, again
    idle = pool.get_idle_size()
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with store.transaction(GLOBEX) as transaction:
            await (await connection_of(transaction)).execute("SELECT 1 / 0")
    assert pool.get_idle_size() == idle + 1  # back in the pool, not kept as the spare
    assert await tenants_seen(store, ACME, "jobs") == {"acme"}
    async with store.transaction(GLOBEX) as transaction:
        assert await (await connection_of(transaction)).fetchval("SELECT 1") == 1


async def session_tenant(store: PostgresStore) -> tuple[str | None, str | None]:
    """What the pooled connection remembers of its session tenant, and what the session holds."""
    async with store.connection() as proxy:
        remembered = cast(TenantConnection, proxy).session_tenant
        held = await proxy.fetchval("SELECT current_setting('redrive.tenant_id', true)")
        return remembered, held


def job_tenants(url: str) -> dict[str, str]:
    return dict(owner_rows(url, "SELECT id, tenant_id FROM jobs"))


@pytest.mark.postgres
async def test_units_of_one_statement_alternating_tenants_on_one_connection_stay_apart(
    isolated: Isolated,
) -> None:
    """Each enqueue sets the session's tenant when the connection holds another: every job
    lands in its caller's tenant (WITH CHECK would refuse another), acme's and globex's
    enqueues find their own subscription (so go on in a transaction), and transactions still
    see their own tenant only, whatever the session holds."""
    store = isolated.store
    service = Service(Runtime(store, ManualClock(), service_options(), random.Random(13)))
    callers = [INITECH, UMBRELLA, INITECH, ACME, UMBRELLA, GLOBEX, INITECH, UMBRELLA]
    enqueued = {}
    for caller in callers:
        job = await service.jobs.enqueue(caller, read_envelope({"type": "a.b", "args": []}))
        enqueued[job.id] = caller.tenant_id
        expected = caller.tenant_id if caller in (INITECH, UMBRELLA) else None
        if expected is not None:
            assert await session_tenant(store) == (expected, expected)
    tenants = job_tenants(isolated.url)
    assert {job_id: tenants[job_id] for job_id in enqueued} == enqueued
    assert service.jobs.listened == {"acme", "globex"}
    assert await session_tenant(store) == ("umbrella", "umbrella")
    for table in SEEDED:
        assert await tenants_seen(store, ACME, table) == {"acme"}, table
    assert await tenants_seen(store, INITECH, "jobs") == {"initech"}
    assert await session_tenant(store) == ("umbrella", "umbrella")


@pytest.mark.postgres
async def test_a_failed_unit_of_one_statement_leaves_nothing_and_forgets_the_tenant(
    isolated: Isolated,
) -> None:
    store = isolated.store
    service = Service(Runtime(store, ManualClock(), service_options(), random.Random(13)))
    await service.jobs.enqueue(INITECH, read_envelope({"type": "a.b", "args": []}))
    bad = '{"shared": {}, "rows": [{"id": "bad", "tenant_id": "umbrella", "queue": "q", ' + (
        '"priority": "high", "event_id": "evt_bad", "event_type": "job.enqueued"}]}'
    )
    with pytest.raises(asyncpg.InvalidTextRepresentationError):
        async with store.transaction(UMBRELLA, one_statement=True) as transaction:
            await transaction.executor.rows("enqueue_jobs", {"rows": bad, "now": 0, "alone": True})
    assert await session_tenant(store) == (None, "umbrella")  # set, then the statement failed
    for table in ("jobs", "queues", "events"):
        found = owner_rows(
            isolated.url, f"SELECT COUNT(*) FROM {table} WHERE tenant_id = 'umbrella'"
        )
        assert found == [(0,)], table
    job = await service.jobs.enqueue(INITECH, read_envelope({"type": "a.b", "args": []}))
    assert job_tenants(isolated.url)[job.id] == "initech"
    assert await session_tenant(store) == ("initech", "initech")


@pytest.mark.postgres
async def test_a_unit_of_one_statement_runs_one_statement_made_to_run_alone(
    isolated: Isolated,
) -> None:
    store = isolated.store
    with pytest.raises(RuntimeError, match="cannot run alone"):
        async with store.transaction(INITECH, one_statement=True) as transaction:
            await transaction.get_job("nothing", "initech")
    with pytest.raises(RuntimeError, match="then"):
        async with store.transaction(INITECH, one_statement=True) as transaction:
            await transaction.enqueue_jobs([], [], 0, alone=True)
            await transaction.enqueue_jobs([], [], 0, alone=True)


@pytest.mark.postgres
async def test_the_server_and_callers_spanning_tenants_see_every_tenant(
    isolated: Isolated,
) -> None:
    spanning = Caller.across_tenants("test", Role.VIEWER)
    for table in SEEDED:
        assert await tenants_seen(isolated.store, SYSTEM, table) == {"acme", "globex"}, table
        assert await tenants_seen(isolated.store, spanning, table) == {"acme", "globex"}, table


@pytest.mark.postgres
async def test_writing_a_row_for_another_tenant_is_refused_by_with_check(
    isolated: Isolated,
) -> None:
    store = isolated.store
    writes = [
        "INSERT INTO queues (name, tenant_id, created_at) VALUES ('stolen', 'globex', 0)",
        "UPDATE jobs SET tenant_id = 'globex' WHERE tenant_id = 'acme'",
        "UPDATE dead_letters SET tenant_id = 'globex'",
        "INSERT INTO events (id, tenant_id, type, time, data) "
        "VALUES ('forged', 'globex', 'job.completed', 0, '{}')",
    ]
    for write in writes:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with store.transaction(ACME) as transaction:
                await (await connection_of(transaction)).execute(write)
    # Another tenant's rows are out of reach of UPDATE and DELETE as well: none match.
    async with store.transaction(ACME) as transaction:
        connection = await connection_of(transaction)
        updated = await connection.execute(
            "UPDATE jobs SET priority = 9 WHERE tenant_id = 'globex'"
        )
        deleted = await connection.execute("DELETE FROM dead_letters WHERE tenant_id = 'globex'")
        assert (updated, deleted) == ("UPDATE 0", "DELETE 0")
    assert await tenants_seen(store, SYSTEM, "queues") == {"acme", "globex"}
    globex_jobs = owner_rows(isolated.url, "SELECT priority FROM jobs WHERE tenant_id = 'globex'")
    assert globex_jobs and all(row[0] != 9 for row in globex_jobs)
    assert owner_rows(isolated.url, "SELECT COUNT(*) FROM queues WHERE name = 'stolen'") == [(0,)]


@pytest.mark.postgres
async def test_truncate_is_not_granted_to_the_application_role(isolated: Isolated) -> None:
    """TRUNCATE ignores row-level security; the server's role may not run it."""
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with isolated.store.transaction(SYSTEM) as transaction:
            await (await connection_of(transaction)).execute("TRUNCATE jobs")


# --- every tenant table is covered ---------------------------------------------------------


@pytest.mark.postgres
def test_every_table_with_a_tenant_id_has_forced_row_level_security_and_the_policy(
    database: str,
) -> None:
    """Fails when a migration adds a tenant table without enabling and forcing RLS on it."""
    tables = owner_rows(database, TENANT_TABLES)
    names = {row[0] for row in tables}
    assert {"jobs", "dead_letters", "events", "queues", "dead_letter_policies", "api_keys",
            "incidents", "redrive_tasks", "redrive_task_items", "redrive_task_queues",
            "legal_holds", "alerts", "root_causes"} <= names  # fmt: skip
    unprotected = sorted(name for name, enabled, forced in tables if not (enabled and forced))
    assert unprotected == [], "tenant tables without forced row-level security"
    policies = owner_rows(
        database,
        "SELECT tablename, qual, with_check FROM pg_policies "
        "WHERE schemaname = 'public' AND policyname = 'tenant_isolation'",
    )
    assert {row[0] for row in policies} == names
    for table, using, with_check in policies:
        assert "redrive.tenant_id" in using and "redrive.tenant_id" in with_check, table


@pytest.mark.postgres
def test_the_policy_reads_the_tenant_once_per_statement_not_per_row(database: str) -> None:
    """Migrations 0038 and 0042: each policy reads the setting in one sub-select (an InitPlan
    run once per statement; a bare current_setting in the per-row test ran for every row
    scanned), and each statement plans one InitPlan a table, not two."""
    policies = owner_rows(
        database,
        "SELECT tablename, qual, with_check FROM pg_policies "
        "WHERE schemaname = 'public' AND policyname = 'tenant_isolation'",
    )
    assert policies
    for table, using, with_check in policies:
        for rule in (using, with_check):
            assert rule.count("SELECT current_setting('redrive.tenant_id'") == 1, table
    with psycopg.connect(database) as connection:
        connection.execute("SET ROLE redrive_app")
        connection.execute("SELECT set_config('redrive.tenant_id', 'acme', true)")
        plan = "\n".join(
            str(row[0])
            for row in connection.execute("EXPLAIN SELECT COUNT(*) FROM dead_letters").fetchall()
        )
    filters = [line for line in plan.splitlines() if "Filter:" in line]
    assert plan.count("InitPlan") == 1 and filters, plan
    assert not any("current_setting" in line for line in filters), plan


@pytest.mark.postgres
def test_the_application_role_cannot_bypass_anything(database: str) -> None:
    rows = owner_rows(
        database,
        "SELECT rolsuper, rolbypassrls, rolcanlogin, rolcreaterole, rolcreatedb FROM pg_roles "
        "WHERE rolname = 'redrive_app'",
    )
    assert rows == [(False, False, False, False, False)]
    owned = owner_rows(
        database,
        "SELECT COUNT(*) FROM pg_class WHERE pg_has_role('redrive_app', relowner, 'MEMBER')",
    )
    assert owned == [(0,)]


@pytest.mark.postgres
async def test_the_audit_log_is_granted_to_read_and_append_only(database: str) -> None:
    """Whichever migration adds audit_log, the grants `migrate` applies keep it append-only."""
    owner_run(
        database,
        "CREATE TABLE IF NOT EXISTS audit_log (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL)",
    )
    store = PostgresStore(database, max_size=1)
    try:
        await store.migrate()
    finally:
        await store.close()
    privileges = owner_rows(
        database,
        "SELECT p, has_table_privilege('redrive_app', 'audit_log', p) "
        "FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p",
    )
    assert dict(privileges) == {
        "SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False,
    }  # fmt: skip
    jobs = owner_rows(database, "SELECT has_table_privilege('redrive_app', 'jobs', 'DELETE')")
    assert jobs == [(True,)]


@pytest.mark.postgres
async def test_dashboard_sessions_are_made_and_deleted_never_changed(database: str) -> None:
    """No query of the server can extend a session or move it to another key."""
    privileges = owner_rows(
        database,
        "SELECT p, has_table_privilege('redrive_app', 'dashboard_sessions', p) "
        "FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p",
    )
    assert dict(privileges) == {
        "SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": True, "TRUNCATE": False,
    }  # fmt: skip


CATALOGUE_ROW_VERSIONS = (
    "SELECT relname, xmin::text FROM pg_class "
    "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S') ORDER BY relname"
)


async def migrated_again(url: str) -> list[str]:
    store = PostgresStore(url, max_size=1)
    try:
        return await store.migrate()
    finally:
        await store.close()


@pytest.mark.postgres
async def test_migrating_an_unchanged_database_again_rewrites_no_grant(database: str) -> None:
    """Every process migrates as it opens: with nothing to change, no table's catalogue row is
    rewritten (a committed GRANT would, and every other connection would reload the table)."""
    before = owner_rows(database, CATALOGUE_ROW_VERSIONS)
    assert await migrated_again(database) == []
    assert owner_rows(database, CATALOGUE_ROW_VERSIONS) == before


@pytest.mark.postgres
async def test_migrating_again_restores_a_grant_taken_away(database: str) -> None:
    """A privilege revoked by hand (or a narrowed one widened) is put back by the next open."""
    owner_run(
        database,
        "REVOKE INSERT ON jobs FROM redrive_app",
        "GRANT UPDATE ON audit_log TO redrive_app",
        "REVOKE USAGE ON SCHEMA public FROM redrive_app",
    )
    await migrated_again(database)
    granted = owner_rows(
        database,
        "SELECT has_table_privilege('redrive_app', 'jobs', 'INSERT'), "
        "has_table_privilege('redrive_app', 'audit_log', 'UPDATE'), "
        "has_schema_privilege('redrive_app', 'public', 'USAGE')",
    )
    assert granted == [(True, False, True)]


async def opened(url: str) -> tuple[list[str], list[str]]:
    """What every start on the database does (composition.open_ready_store): migrate, then
    check; the migrations applied and the problems found."""
    store = PostgresStore(url, max_size=1)
    try:
        return await migrated_and_isolated(store)
    finally:
        await store.close()


ACCESS_RECORDS = "SELECT version FROM schema_migrations WHERE version LIKE 'access.sql %'"


@pytest.mark.postgres
async def test_an_up_to_date_database_opens_without_the_migration_lock(database: str) -> None:
    """Every migration applied and the grants as access.sql last left them (its record): a
    start finds it so without the lock, so a migration running elsewhere does not hold it up,
    and access.sql is not run again."""
    holding = await asyncpg.connect(database)
    try:
        await holding.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
        assert await asyncio.wait_for(opened(database), 30) == ([], [])
        assert await asyncio.wait_for(migrated_again(database), 30) == []
    finally:
        await holding.close()


@pytest.mark.postgres
async def test_opening_restores_a_grant_changed_by_hand_then_records_it(database: str) -> None:
    """A grant changed by hand since access.sql's record: the next start applies the script
    again (as `redrive migrate` does) and records the state it left, which the start after
    it finds in place."""
    owner_run(
        database,
        "REVOKE INSERT ON jobs FROM redrive_app",
        "GRANT UPDATE ON audit_log TO redrive_app",
    )
    recorded = owner_rows(database, ACCESS_RECORDS)
    assert await opened(database) == ([], [])
    granted = owner_rows(
        database,
        "SELECT has_table_privilege('redrive_app', 'jobs', 'INSERT'), "
        "has_table_privilege('redrive_app', 'audit_log', 'UPDATE')",
    )
    assert granted == [(True, False)]
    assert owner_rows(database, ACCESS_RECORDS) == recorded  # the same grants, the same record
    before = owner_rows(database, CATALOGUE_ROW_VERSIONS)
    assert await opened(database) == ([], [])
    assert owner_rows(database, CATALOGUE_ROW_VERSIONS) == before


@pytest.mark.postgres
async def test_a_database_without_the_record_is_recorded_rewriting_no_grant(database: str) -> None:
    """No record of access.sql (a database migrated before it was kept, or a script changed
    since): the script runs, changes nothing here, and only the record is written."""
    recorded = owner_rows(database, ACCESS_RECORDS)
    assert len(recorded) == 1
    owner_run(database, "DELETE FROM schema_migrations WHERE version LIKE 'access.sql %'")
    before = owner_rows(database, CATALOGUE_ROW_VERSIONS)
    assert await opened(database) == ([], [])
    assert owner_rows(database, CATALOGUE_ROW_VERSIONS) == before
    assert owner_rows(database, ACCESS_RECORDS) == recorded


@pytest.mark.postgres
async def test_a_record_made_for_another_role_does_not_stand_for_this_one(
    postgres_template: str, role_name: str
) -> None:
    """The record names the configured role: a start with another one creates and grants it."""
    with database_from_template(postgres_template) as url:
        store = PostgresStore(url, max_size=1, role=role_name)
        try:
            assert await migrated_and_isolated(store) == ([], [])
            async with store.connection() as connection:
                assert await connection.fetchval("SELECT current_user") == role_name
        finally:
            await store.close()


@pytest.mark.postgres
def test_the_application_role_cannot_write_the_table_of_versions(database: str) -> None:
    """Nor, so, forge access.sql's record there."""
    granted = owner_rows(
        database,
        "SELECT has_table_privilege('redrive_app', 'schema_migrations', privilege) "
        "FROM unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS privilege",
    )
    assert granted == [(False,)] * 4


# --- the application role: made by migrate, race-safe -------------------------------------


@pytest.fixture
def role_name() -> Iterator[str]:
    """A cluster-wide role of the test's own; dropped after the test's databases are."""
    name = f"redrive_test_{uuid.uuid4().hex[:10]}"
    yield name
    owner_run(admin_url(), f'DROP ROLE IF EXISTS "{name}"')


async def wait_for_lock_wait(url: str) -> None:
    """Until a session of the database waits for a lock (the second CREATE ROLE)."""
    name = url.rsplit("/", 1)[1]
    for _ in range(200):
        waiting = owner_rows(
            admin_url(),
            "SELECT COUNT(*) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND wait_event_type = 'Lock'",
        )
        if waiting[0][0]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the second migration never waited for the first one's role")


@pytest.mark.postgres
async def test_migrate_creates_a_configured_role_while_another_database_does_the_same(
    postgres_template: str, role_name: str
) -> None:
    """Two databases migrated at once both create the role: the later one finds it made."""
    with (
        database_from_template(postgres_template) as first,
        database_from_template(postgres_template) as second,
    ):
        holding = await psycopg.AsyncConnection.connect(first)
        async with holding:
            # The first database's access script has created the role, not yet committed.
            await holding.execute(
                "SELECT set_config('redrive.application_role', %s, true)", (role_name,)
            )
            await holding.execute((HERE / "access.sql").read_bytes())
            store = PostgresStore(second, max_size=1, role=role_name)
            try:
                migrating = asyncio.create_task(store.migrate())
                await wait_for_lock_wait(second)
                await holding.commit()
                assert await migrating == []
                async with store.connection() as connection:
                    assert await connection.fetchval("SELECT current_user") == role_name
                assert await isolation_problems(store) == []
            finally:
                await store.close()


# --- serve refuses to start when row-level security would be bypassed ----------------------


async def problems_for(url: str, role: str = "redrive_app") -> list[str]:
    store = PostgresStore(url, max_size=1, role=role)
    try:
        return await isolation_problems(store)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_migrated_database_passes_the_check(database: str) -> None:
    assert await problems_for(database) == []


@pytest.mark.postgres
async def test_the_check_refuses_a_superuser(database: str) -> None:
    assert await problems_for(database, role="postgres") == [
        "the role postgres is a superuser",
        "the role postgres has BYPASSRLS",  # as every superuser made by initdb
    ]


@pytest.mark.postgres
async def test_the_check_refuses_a_role_with_bypassrls(database: str, role_name: str) -> None:
    owner_run(database, f'CREATE ROLE "{role_name}" NOLOGIN BYPASSRLS')
    assert await problems_for(database, role=role_name) == [f"the role {role_name} has BYPASSRLS"]


@pytest.mark.postgres
async def test_the_check_refuses_the_owner_of_a_tenant_table(
    postgres_template: str, role_name: str
) -> None:
    owner_run(admin_url(), f'CREATE ROLE "{role_name}" NOLOGIN')
    with database_from_template(postgres_template) as url:
        owner_run(url, f'ALTER TABLE events OWNER TO "{role_name}"')
        assert await problems_for(url, role=role_name) == [
            f"the role {role_name} owns (or is a member of the owner of) events"
        ]


@pytest.mark.postgres
async def test_the_check_refuses_tables_without_enabled_and_forced_rls(database: str) -> None:
    owner_run(
        database,
        "ALTER TABLE events DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE jobs NO FORCE ROW LEVEL SECURITY",
    )
    assert await problems_for(database) == [
        "row-level security is disabled on events",
        "row-level security is not forced on jobs",
    ]


@pytest.mark.postgres
async def test_the_check_refuses_a_role_it_cannot_set(database: str, role_name: str) -> None:
    problems = await problems_for(database, role=role_name)
    assert len(problems) == 1
    assert problems[0].startswith(f"cannot SET ROLE {role_name}: ")


WORKERS = Path(__file__).parents[1] / "integration" / "workers"
# Every process that serves or works on the database refuses when row-level security would not
# bind it: the server, the embedded worker and the CLI talking straight to the database.
COMMANDS = {
    "serve": ["serve"],
    "embedded worker": ["worker", "example_tasks:worker", "--embedded"],
    "cli on --database": ["dlq", "ls", "--database", "{url}"],
}


def run(
    command: str, url: str, tmp_path: Path, **settings: str
) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)
    environment.update(
        {
            "REDRIVE_DATABASE_URL": url,
            "REDRIVE_ARCHIVE_DIR": str(tmp_path / "archive"),
            "REDRIVE_CONFIG_FILE": str(tmp_path / "absent.toml"),
            "REDRIVE_PORT": "1",  # never bound: the server must refuse before listening
            "COLUMNS": "400",
            "PYTHONPATH": os.pathsep.join([str(WORKERS), os.environ.get("PYTHONPATH", "")]),
        }
    )
    environment.update({f"REDRIVE_{key.upper()}": value for key, value in settings.items()})
    arguments = [argument.format(url=url) for argument in COMMANDS[command]]
    return subprocess.run(
        [sys.executable, "-m", "redrive", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.postgres
@pytest.mark.parametrize("command", COMMANDS)
def test_every_process_refuses_to_start_as_a_superuser(
    database: str, tmp_path: Path, command: str
) -> None:
    refused = run(command, database, tmp_path, database_role="postgres")
    assert refused.returncode == 2, refused.stderr
    message = " ".join((refused.stderr + refused.stdout).split())
    assert "row-level security would be bypassed on PostgreSQL" in message
    assert "the role postgres is a superuser" in message
    assert "Run `redrive migrate`" in message


@pytest.mark.postgres
@pytest.mark.parametrize("command", COMMANDS)
def test_every_process_refuses_to_start_with_a_table_whose_rls_is_off(
    database: str, tmp_path: Path, command: str
) -> None:
    owner_run(database, "ALTER TABLE dead_letters DISABLE ROW LEVEL SECURITY")
    refused = run(command, database, tmp_path)
    assert refused.returncode == 2, refused.stderr
    message = " ".join((refused.stderr + refused.stdout).split())
    assert "row-level security is disabled on dead_letters" in message


# --- global data stays reachable from every tenant (both stores) ---------------------------


async def test_retention_policies_are_global_whichever_tenant_sets_or_reads_them(
    service: Service,
) -> None:
    """Policies are stored under the default tenant; a tenant's own transaction could neither
    write nor see them on PostgreSQL, so the use-cases act as the server for them."""
    changed = await service.retention.set_policy(
        ACME, "mail", parse_policy_changes({"max_count": 5})
    )
    assert changed.max_count == 5
    seen = await service.retention.policies(GLOBEX)
    assert seen.for_queue("mail").max_count == 5
    await service.retention.remove_policy(GLOBEX, "mail")
    assert "mail" not in (await service.retention.policies(ACME)).queues


async def test_archives_of_every_tenant_are_listed_and_restored_from_any_tenant(
    store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    """Pruning (the server's work) archives dead letters of every tenant under the default
    tenant; a tenant's caller lists the archive and restores each entry under its own tenant."""
    service = Service(
        Runtime(
            store, clock=clock, options=ServiceOptions(), rng=random.Random(9),
            archive=FileArchive(str(tmp_path / "archive")),
        )
    )  # fmt: skip
    transport = httpx.ASGITransport(app=create_app(service, max_body_bytes=64_000))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        for tenant in ("acme", "globex"):
            await kill_job(client, headers={"X-OJS-Tenant": tenant})
        policy = parse_policy_changes({"max_age": "P10D", "pruning_policy": "archive"})
        await service.retention.set_policy(ACME, None, policy)
        clock.advance(11 * 86_400_000)
        report = await service.retention.prune(ACME)
        assert (report.archived, len(report.archives)) == (2, 1)
        assert [archive.name for archive in await service.retention.archives(ACME)] == (
            report.archives
        )
        restored = await service.retention.restore(ACME, report.archives[0])
        assert restored == {"entries": 2, "restored": 2, "skipped": 0}
        for tenant in ("acme", "globex"):
            listed = await client.get("/ojs/v1/dead-letter", headers={"X-OJS-Tenant": tenant})
            assert listed.status_code == 200, listed.text
            assert [job["meta"]["tenant_id"] for job in listed.json()["jobs"]] == [tenant]
