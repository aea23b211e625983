"""The PostgreSQL store: a psycopg 3 connection pool; each transaction takes one connection.

Row-level security (migration 0007) binds every pooled connection: each one acts as the
application role (SET ROLE once, when the pool makes it), and each transaction names its tenant
in the transaction-local setting `redrive.tenant_id` (SET LOCAL), sent with its BEGIN and its
first statement in one round trip. The LISTEN connection and the migrations connect as the
configured user, the tables' owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool

from redrive.domain.caller import Caller
from redrive.store.statements import (
    load_statements,
    migration_files,
    split_script,
    to_pyformat,
)
from redrive.store.transaction import SqlTransaction
from redrive.store.wakeups import Wakeups

HERE = Path(__file__).parent
DEFAULT_ROLE = "redrive_app"
# The transaction-local setting the policies read, and its value for a caller spanning tenants.
TENANT_SETTING = "redrive.tenant_id"
ALL_TENANTS = "*"
BEGIN_CACHE_SIZE = 10_000
MIGRATION_LOCK_KEY = 0x7265647269766500  # "redrive\0"
CHANNEL = "redrive_jobs"
log = logging.getLogger("redrive.store.postgres")
# Filter queries keep custom plans: a generic prepared plan is slow on skewed data.
UNPREPARED = frozenset(
    {
        "select_dead_letters",
        "count_dead_letters",
        "move_dead_letters",
        "retry_dead_letters",
        "select_jobs",
        "count_jobs",
        "select_events",
        "select_audit_records",
        "select_incidents_recent",
        "select_incidents_by_count",
        "select_webhook_deliveries",
        "pin_redrive_items",
    }
)


class PostgresExecutor:
    """Runs one transaction's statements on its connection, saving round trips: BEGIN and the
    tenant go out in one pipeline with the first statement, and the wake-ups (NOTIFY) in one
    simple query with the COMMIT. A transaction that runs no statement sends nothing."""

    def __init__(
        self, connection: psycopg.AsyncConnection[dict[str, Any]], store: PostgresStore,
        begin: list[bytes],
    ) -> None:  # fmt: skip
        self.connection = connection
        self.store = store
        self.begin = begin
        self.wake: set[str] = set()

    async def _execute(
        self, query: str, parameters: dict[str, Any], prepare: bool | None = None
    ) -> psycopg.AsyncCursor[dict[str, Any]]:
        if not self.begin:
            return await self.connection.execute(query, parameters, prepare=prepare)
        begin, self.begin = self.begin, []
        async with self.connection.pipeline():
            for part in begin:
                await self.connection.execute(part, prepare=False)
            cursor = await self.connection.execute(query, parameters, prepare=prepare)
        return cursor

    async def begun(self) -> psycopg.AsyncConnection[dict[str, Any]]:
        """The connection, inside this transaction (BEGIN and the tenant sent if not yet)."""
        if self.begin:
            begin, self.begin = self.begin, []
            async with self.connection.pipeline():
                for part in begin:
                    await self.connection.execute(part, prepare=False)
        return self.connection

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        cursor = await self._execute(
            self.store.statements[name], parameters, False if name in UNPREPARED else None
        )
        if cursor.description is None:
            return []
        return await cursor.fetchall()

    async def run(self, name: str, parameters: dict[str, Any]) -> int:
        changed = 0
        for part in self.store.scripts[name]:
            cursor = await self._execute(part, parameters)
            changed += max(cursor.rowcount, 0)
        return changed

    def list_parameter(self, values: list[str] | None) -> Any:
        return values

    async def notify(self, queues: set[str]) -> None:
        """Sent with the COMMIT (PostgreSQL delivers a NOTIFY on commit either way)."""
        self.wake |= queues

    async def commit(self) -> None:
        """The wake-ups and COMMIT in one simple query (one round trip, no pipeline to set up);
        nothing when no statement ran."""
        if self.begin and not self.wake:
            return
        parts = [*self.begin]
        parts.extend(
            sql.SQL("SELECT pg_notify({}, {})")
            .format(sql.Literal(CHANNEL), sql.Literal(queue))
            .as_bytes(self.connection)
            for queue in sorted(self.wake)
        )
        parts.append(b"COMMIT")
        self.begin = []
        await self.connection.execute(b"; ".join(parts), prepare=False)


def _load_json_as_text(connection: psycopg.AsyncConnection[Any]) -> None:
    # JSON columns come back as text; the codec decodes them the same way for both dialects.
    connection.adapters.register_loader("jsonb", TextLoader)
    connection.adapters.register_loader("json", TextLoader)


def tenant_setting(caller: Caller) -> str:
    """What `redrive.tenant_id` holds in the caller's transactions: its tenant, or the explicit
    marker of a caller that spans every tenant (tenant ids cannot be `*`)."""
    scope = caller.tenant_scope
    return ALL_TENANTS if scope is None else scope


class PostgresStore:
    backend = "postgres"

    def __init__(
        self, url: str, min_size: int = 1, max_size: int = 10, role: str = DEFAULT_ROLE
    ) -> None:
        self.url = url
        self.role = role
        # Bulk chunks side by side: the server's cores share the work; a quarter of the pool
        # (at most 4) leaves the rest of it to workers and producers meanwhile.
        self.write_lanes = max(1, min(4, max_size // 4))
        self.wakeups = Wakeups()
        self._listener: asyncio.Task[None] | None = None
        raw = load_statements(HERE / "statements.sql")
        self.statements = {name: to_pyformat(sql) for name, sql in raw.items()}
        self.scripts = {name: split_script(sql) for name, sql in self.statements.items()}
        self.pool: AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]] = (
            AsyncConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                open=False,
                configure=self._configure,
                kwargs={"row_factory": dict_row, "autocommit": True},
            )
        )
        # The pool opens on first use: its connections SET ROLE to the application role, which
        # `migrate` creates, so a fresh database is migrated (on a connection of its own) first.
        self._pool_opened = False
        self._begins: dict[str, bytes] = {}
        self._pool_opening = asyncio.Lock()

    async def open(self) -> None:
        self._listener = asyncio.create_task(self._listen())

    async def _configure(self, connection: psycopg.AsyncConnection[Any]) -> None:
        _load_json_as_text(connection)
        await self.act_as_application_role(connection)

    async def act_as_application_role(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """SET ROLE for the rest of the session (a pooled connection outside any transaction
        is bound by row-level security too, and sees nothing: no tenant is set)."""
        await connection.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.role)))

    async def opened_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]:
        if not self._pool_opened:
            async with self._pool_opening:
                if not self._pool_opened:
                    await self.pool.open(wait=True, timeout=30)
                    self._pool_opened = True
        return self.pool

    async def _listen(self) -> None:
        """LISTEN on a connection of its own; a NOTIFY from any replica wakes local waiters."""
        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                async with connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    async for notice in connection.notifies():
                        self.wakeups.signal([notice.payload])
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError) as error:
                log.warning("LISTEN connection lost (%s); reconnecting", error)
                await asyncio.sleep(1)

    async def wait_for_work(self, queues: list[str], timeout: float) -> bool:
        return await self.wakeups.wait(queues, timeout)

    @asynccontextmanager
    async def transaction(self, caller: Caller) -> AsyncIterator[SqlTransaction]:
        """BEGIN and the tenant (SET LOCAL) go out with the first statement, COMMIT (with the
        wake-ups) on success and ROLLBACK on any error; SET LOCAL ends with the transaction, so
        the pooled connection goes back to the pool with no tenant set."""
        pool = await self.opened_pool()
        async with pool.connection() as connection:
            executor = PostgresExecutor(
                connection, self, [b"BEGIN", self._begin(caller, connection)]
            )
            transaction = SqlTransaction(executor)
            try:
                yield transaction
                await transaction.finish()
                await executor.commit()
            except BaseException:
                # A broken connection cannot roll back; the pool discards it (and rolls back
                # any connection handed back inside a transaction).
                if connection.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        await connection.execute(b"ROLLBACK", prepare=False)
                raise

    def _begin(self, caller: Caller, connection: psycopg.AsyncConnection[Any]) -> bytes:
        """`SET LOCAL redrive.tenant_id = <tenant>`, quoted by psycopg once per tenant (a few
        tenants make up most transactions). SET LOCAL, not `SELECT set_config(..., true)`: the
        same effect, without a statement to plan and a row to send back (measured about 40 us
        less per transaction)."""
        scope = tenant_setting(caller)
        begin = self._begins.get(scope)
        if begin is None:
            if len(self._begins) >= BEGIN_CACHE_SIZE:
                self._begins.clear()
            begin = (
                sql.SQL("SET LOCAL {} = {}")
                .format(sql.SQL(TENANT_SETTING), sql.Literal(scope))
                .as_bytes(connection)
            )
            self._begins[scope] = begin
        return begin

    async def migrate(self, until: str | None = None) -> list[str]:
        """Apply the migrations not applied yet, in order; with `until` (a version, the file's
        name without .sql) only up to and including that one, as tests build older schemas.
        Then (re)apply the application role and its grants (access.sql). Runs on a connection
        of its own, as the configured user: the tables' owner, not the application role."""
        files = migration_files(HERE / "migrations")
        if until is not None and until not in {file.stem for file in files}:
            raise ValueError(f"no migration {until!r}")
        done: list[str] = []
        connection = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, row_factory=dict_row
        )
        async with connection:
            await connection.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                await connection.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                cursor = await connection.execute("SELECT version FROM schema_migrations")
                applied = {row["version"] for row in await cursor.fetchall()}
                for file in files:
                    if until is not None and file.stem > until:
                        break
                    if file.stem in applied:
                        continue
                    async with connection.transaction():
                        # A migration that changes rows sees them all once RLS is forced.
                        await connection.execute(
                            "SELECT set_config(%s, %s, true)", (TENANT_SETTING, ALL_TENANTS)
                        )
                        await connection.execute(file.read_text(encoding="utf-8").encode())
                        await connection.execute(
                            "INSERT INTO schema_migrations (version) VALUES (%s)", (file.stem,)
                        )
                    done.append(file.stem)
                async with connection.transaction():
                    await connection.execute(
                        "SELECT set_config('redrive.application_role', %s, true)", (self.role,)
                    )
                    await connection.execute((HERE / "access.sql").read_bytes())
            finally:
                await connection.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        return done

    async def ping(self) -> bool:
        try:
            pool = await self.opened_pool()
            async with pool.connection(timeout=5) as connection:
                await connection.execute("SELECT 1")
        except (psycopg.Error, TimeoutError, OSError):
            return False
        return True

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        await self.pool.close()
