"""PostgreSQL connections made and closed in the background, beside what a start or a bulk retry
does meanwhile: the pool's first connection while the start migrates and checks (it takes the
application role only once the migrations have made it; its migration connection is closed
without waiting for the server), and a bulk retry's lane connections while its ids are read; an
opening that fails is the next unit's error, as it would have been."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator

import asyncpg
import psycopg
import pytest

from redrive.composition import ConfigurationError, open_ready_store
from redrive.settings import Settings
from redrive.store.postgres.store import MIGRATION_LOCK_KEY, PostgresStore
from tests.support.callers import CALLER
from tests.support.postgres import admin_url, database_from_template, fresh_database

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def database(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        yield url


@pytest.fixture
def database_url() -> Iterator[str]:
    """An empty database: never migrated."""
    with fresh_database() as url:
        yield url


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within 5 s")


def backends(url: str, condition: str = "TRUE") -> int:
    """The server's connections to the database but this one (those meeting `condition`)."""
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity "
            f"WHERE datname = current_database() AND pid <> pg_backend_pid() AND {condition}"
        ).fetchone()
    return int(row[0]) if row else 0


async def test_a_start_opens_the_pool_and_closes_its_migration_connection_unasked(
    database: str,
) -> None:
    store, _ = await open_ready_store(Settings(database_url=database))
    assert isinstance(store, PostgresStore)
    try:
        await until(lambda: store.pool is not None and store.pool.get_size() == 1)
        await until(lambda: backends(database) == 1)  # the pool's; the migration's is closed
        async with store.transaction(CALLER) as transaction:  # on it: no other is made
            await transaction.dead_letter_stats(CALLER.tenant_scope)
        assert store.pool is not None and store.pool.get_size() == 1
    finally:
        await store.close()
    await until(lambda: backends(database) == 0)


@pytest.fixture
def role_name() -> Iterator[str]:
    """A cluster-wide role of the test's own; dropped after the test's databases are."""
    name = f"redrive_test_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'DROP ROLE IF EXISTS "{name}"')


def holding_the_migration_lock(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A session holding the migrations' advisory lock: a start's migrations wait for it."""
    connection = psycopg.connect(url, autocommit=True)
    connection.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    return connection


async def test_a_start_makes_the_pools_connection_while_it_migrates_and_only_then_uses_it(
    role_name: str, database_url: str
) -> None:
    """On a database never migrated, with a role that does not exist yet: the pool's first
    connection is made while the migrations wait (for the lock here), the store is handed out
    only once they and the check are done, and the connection then acts as the role the
    migrations made."""
    holder = holding_the_migration_lock(database_url)
    starting = asyncio.create_task(
        open_ready_store(Settings(database_url=database_url, database_role=role_name))
    )
    try:
        # The holder's, the migrations' and the pool's (made early, waiting for the role).
        await until(lambda: backends(database_url) == 3)
        assert not starting.done()
    finally:
        holder.close()
    store, applied = await starting
    assert isinstance(store, PostgresStore)
    try:
        assert applied  # all of them, before any unit ran
        async with store.transaction(CALLER) as transaction:
            await transaction.dead_letter_stats(CALLER.tenant_scope)
        async with store.connection() as connection:
            assert await connection.fetchval("SELECT current_user") == role_name
        assert store.pool is not None and store.pool.get_size() == 1  # the one made early
    finally:
        await store.close()
    await until(lambda: backends(database_url) == 0)


async def test_a_start_whose_isolation_check_fails_refuses_and_closes_the_early_pool(
    database: str,
) -> None:
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("ALTER TABLE events DISABLE ROW LEVEL SECURITY")
    with pytest.raises(ConfigurationError, match="row-level security is disabled on events"):
        await open_ready_store(Settings(database_url=database))
    await until(lambda: backends(database) == 0)


async def test_a_start_cancelled_while_it_migrates_leaves_no_connection(database_url: str) -> None:
    """On a database never migrated, so that the start must migrate and waits for the lock (a
    migrated copy of the template may be up to date, and then a start takes no lock: whether it
    is depends on roles other tests make in the cluster)."""
    holder = holding_the_migration_lock(database_url)
    starting = asyncio.create_task(open_ready_store(Settings(database_url=database_url)))
    try:
        # The holder's, the migrations' (waiting for the lock) and the pool's (for the role).
        await until(lambda: backends(database_url) == 3)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
    finally:
        holder.close()
        if not starting.done():  # the test failed before its cancel: leave no connection
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
    await until(lambda: backends(database_url) == 0)


async def test_a_pool_that_fails_to_open_in_the_background_fails_the_next_unit(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStore(database, role="redrive_no_such_role")
    store.open_soon()  # its connections cannot SET ROLE
    with pytest.raises(asyncpg.PostgresError, match="redrive_no_such_role"):
        async with store.transaction(CALLER) as transaction:
            await transaction.dead_letter_stats(CALLER.tenant_scope)
    await store.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # nothing unretrieved


async def test_a_store_closes_while_its_pool_is_opening(database: str) -> None:
    store = PostgresStore(database)
    store.open_soon()
    await store.close()
    assert store.pool is not None and store.pool.is_closing()
    await until(lambda: backends(database) == 0)


async def test_the_lanes_connections_are_made_while_the_caller_reads(database: str) -> None:
    store = PostgresStore(database, max_size=8)
    assert store.write_lanes == 2
    try:
        async with store.transaction(CALLER) as transaction:
            store.open_lanes()
            await transaction.dead_letter_stats(CALLER.tenant_scope)
            pool = store.pool
            assert pool is not None
            await until(lambda: pool.get_size() == 2)  # before any lane asked for one

        async def lane() -> None:
            async with store.transaction(CALLER) as transaction:
                await transaction.dead_letter_stats(CALLER.tenant_scope)
                await asyncio.sleep(0.05)

        await asyncio.gather(lane(), lane())
        assert pool.get_size() == 2  # the two lanes took them: none was made for them
    finally:
        await store.close()


def last_queries(url: str) -> list[str]:
    """The last statement of each of the server's other connections to the database."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT query FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [str(row[0]) for row in rows]


async def test_a_unit_waits_for_the_lanes_connection_being_readied(database: str) -> None:
    """Asked for while the lane's connection is being made and readied, a unit takes it once
    ready: the pool makes no third connection (new, its catalogue not loaded)."""
    store = PostgresStore(database, max_size=8)
    try:
        async with store.transaction(CALLER) as transaction:
            await transaction.dead_letter_stats(CALLER.tenant_scope)
            store.open_lanes("retry_dead_letters")
            async with store.transaction(CALLER) as lane:  # at once, as a lane would
                assert await lane.dead_letter_stats(CALLER.tenant_scope) is not None
        assert store.pool is not None and store.pool.get_size() == 2
    finally:
        await store.close()


async def test_a_lanes_connection_plans_the_named_statement_and_runs_nothing(
    database: str,
) -> None:
    store = PostgresStore(database, max_size=8)
    try:
        async with store.transaction(CALLER) as transaction:
            store.open_lanes("retry_dead_letters")
            before = await transaction.dead_letter_stats(CALLER.tenant_scope)
            await until(
                lambda: any(q.startswith("EXPLAIN WITH chosen") for q in last_queries(database))
            )
        async with store.transaction(CALLER) as transaction:
            assert await transaction.dead_letter_stats(CALLER.tenant_scope) == before
    finally:
        await store.close()


async def test_a_unit_takes_an_idle_pooled_connection_rather_than_wait_for_the_lanes(
    database: str,
) -> None:
    """While the lane's connection is being readied (its plan held up here behind a lock on
    dead_letters), a unit that finds a connection idle in the pool takes it at once: only a unit
    that would have the pool make a new one waits for the readying."""
    store = PostgresStore(database, max_size=8)
    held = asyncio.Event()

    async def unit() -> None:
        async with store.transaction(CALLER) as transaction:
            await transaction.get_redrive_task("rdt_none", None)
            await held.wait()

    locker = psycopg.connect(database)
    try:
        units = [asyncio.create_task(unit()) for _ in range(3)]
        await until(lambda: store.pool is not None and store.pool.get_size() == 3)
        held.set()
        await asyncio.gather(*units)  # one kept as the spare, two idle in the pool
        locker.execute("LOCK TABLE dead_letters IN ACCESS EXCLUSIVE MODE")
        async with store.transaction(CALLER) as transaction:
            await transaction.get_redrive_task("rdt_none", None)
            store.open_lanes("retry_dead_letters")
            await until(
                lambda: backends(database, "wait_event_type = 'Lock'") > 0
            )  # the lane's plan, held up
            assert store.pool is not None and store.pool.get_idle_size() == 1
            async with asyncio.timeout(5), store.transaction(CALLER) as other:
                assert await other.get_redrive_task("rdt_none", None) is None
            readying = store._readying
            assert readying is not None and not readying.done()
    finally:
        locker.rollback()  # the lane's plan goes on
        locker.close()
        await store.close()
