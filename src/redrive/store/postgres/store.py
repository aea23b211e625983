"""The PostgreSQL store: a psycopg 3 connection pool; each transaction takes one connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
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
MIGRATION_LOCK_KEY = 0x7265647269766500  # "redrive\0"
CHANNEL = "redrive_jobs"
log = logging.getLogger("redrive.store.postgres")
# Filter queries keep custom plans: a generic prepared plan is slow on skewed data.
UNPREPARED = frozenset(
    {
        "select_dead_letters",
        "count_dead_letters",
        "move_dead_letters",
        "select_jobs",
        "count_jobs",
        "select_events",
        "select_audit_records",
    }
)


class PostgresExecutor:
    def __init__(self, connection: psycopg.AsyncConnection[dict[str, Any]], store: PostgresStore):
        self.connection = connection
        self.store = store

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        cursor = await self.connection.execute(
            self.store.statements[name], parameters, prepare=False if name in UNPREPARED else None
        )
        if cursor.description is None:
            return []
        return await cursor.fetchall()

    async def run(self, name: str, parameters: dict[str, Any]) -> int:
        changed = 0
        for part in self.store.scripts[name]:
            cursor = await self.connection.execute(part, parameters)
            changed += max(cursor.rowcount, 0)
        return changed

    def list_parameter(self, values: list[str] | None) -> Any:
        return values

    async def notify(self, queues: set[str]) -> None:
        for queue in sorted(queues):
            await self.connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, queue))


async def _configure(connection: psycopg.AsyncConnection[Any]) -> None:
    # JSON columns come back as text; the codec decodes them the same way for both dialects.
    connection.adapters.register_loader("jsonb", TextLoader)
    connection.adapters.register_loader("json", TextLoader)


class PostgresStore:
    backend = "postgres"

    def __init__(self, url: str, min_size: int = 1, max_size: int = 10) -> None:
        self.url = url
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
                configure=_configure,
                kwargs={"row_factory": dict_row, "autocommit": True},
            )
        )

    async def open(self) -> None:
        await self.pool.open(wait=True, timeout=30)
        self._listener = asyncio.create_task(self._listen())

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
        async with self.pool.connection() as connection, connection.transaction():
            transaction = SqlTransaction(PostgresExecutor(connection, self))
            yield transaction
            await transaction.finish()

    async def migrate(self, until: str | None = None) -> list[str]:
        """Apply the migrations not applied yet, in order; with `until` (a version, the file's
        name without .sql) only up to and including that one, as tests build older schemas."""
        files = migration_files(HERE / "migrations")
        if until is not None and until not in {file.stem for file in files}:
            raise ValueError(f"no migration {until!r}")
        done: list[str] = []
        async with self.pool.connection() as connection:
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
                        await connection.execute(file.read_text(encoding="utf-8").encode())
                        await connection.execute(
                            "INSERT INTO schema_migrations (version) VALUES (%s)", (file.stem,)
                        )
                    done.append(file.stem)
            finally:
                await connection.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        return done

    async def ping(self) -> bool:
        try:
            async with self.pool.connection(timeout=5) as connection:
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
