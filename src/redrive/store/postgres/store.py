"""The PostgreSQL store: an asyncpg connection pool; each transaction takes one connection (the
spare one the last transaction gave back clean, when there is one, without asking the pool).

Row-level security (migration 0007) binds every pooled connection: each one acts as the
application role (SET ROLE once, when the pool makes it), and each transaction names its tenant
in the transaction-local setting `redrive.tenant_id` (SET LOCAL), sent with its BEGIN in one
simple query before its first statement. A unit of one statement (`one_statement`) has no BEGIN:
it runs in PostgreSQL's implicit transaction, under the session's `redrive.tenant_id`, which its
connection sets (plain SET) only when it holds another tenant or is not known. The LISTEN
connection and the migrations connect as the configured user, the tables' owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from redrive.domain.caller import Caller
from redrive.domain.errors import Duplicate
from redrive.domain.job import Job
from redrive.store.base import Table
from redrive.store.codec import dump
from redrive.store.postgres.statements import Statement, load_scripts
from redrive.store.statements import migration_files
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
CUSTOM_PLANS_QUERY = "SET LOCAL plan_cache_mode = force_custom_plan"
INDEX_ORDER_QUERY = "SET LOCAL enable_bitmapscan = off"
# Room for every named statement (about 150, a few in several parts) on each connection, kept
# prepared for the connection's life.
STATEMENT_CACHE_SIZE = 1_024
MAX_CACHEABLE_STATEMENT_SIZE = 1 << 20
log = logging.getLogger("redrive.store.postgres")
Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"
if TYPE_CHECKING:
    BaseConnection = asyncpg.Connection[asyncpg.Record]
else:
    BaseConnection = asyncpg.Connection


class TenantConnection(BaseConnection):
    """A pooled connection that remembers which tenant its session's `redrive.tenant_id`
    holds (None: not known, so it is set again before the next unit of one statement relies
    on it). SET LOCAL in a transaction overrides it there and ends with the transaction."""

    session_tenant: str | None = None

    def remember_tenant(self, scope: str | None) -> None:
        self.session_tenant = scope

    @property
    def itself(self) -> TenantConnection:
        """This connection, as its pool's proxy passes the attribute on (`pooled`)."""
        return self


Pooled: TypeAlias = "tuple[PoolConnectionProxy[asyncpg.Record], TenantConnection]"


def pooled(proxy: PoolConnectionProxy[asyncpg.Record]) -> Pooled:
    """A connection the pool handed out: its proxy (what goes back to the pool) and the
    connection behind it, which a unit uses while it holds the proxy. Each call through the
    proxy is a wrapper's (positional and keyword arguments repacked) or, for an attribute of
    TenantConnection's own, its `__getattr__` after a failed lookup has raised and formatted an
    AttributeError: five of them per unit of one statement were about 18k instructions of an
    enqueue's 250k. The connection is asked for once, when the pool hands it out (a spare is
    kept with it)."""
    connection: TenantConnection = cast(TenantConnection, proxy).itself
    return proxy, connection


class PostgresParameters:
    """How PostgreSQL's statements take lists and records (store/base.py `Executor`): a list as
    an array, records as the JSON text the statement reads whole."""

    def list_parameter(self, values: list[str] | None) -> Any:
        return values

    def ids_parameter(self, ids: list[str]) -> Any:
        """asyncpg encodes a text[] element by element, checking each one's type: a list of
        5,000 ids took 2.3 ms of the caller's CPU, their joined text 0.2 (and less of the
        server's to split than to decode the array)."""
        joined = ",".join(ids)
        if joined.count(",") != max(len(ids) - 1, 0):
            raise ValueError("an id holds a comma: it cannot be bound as comma-separated text")
        return joined

    def records_parameter(self, records: list[dict[str, Any]]) -> Any:
        return dump(records)

    def shared_records_parameter(
        self, shared: dict[str, Any], records: list[dict[str, Any]]
    ) -> Any:
        return dump({"shared": shared, "rows": records})

    def event_blocks_parameter(self, jobs: list[Job], event_ids: list[str] | None) -> Any:
        return None


class StatementExecutor(PostgresParameters):
    """Runs a unit of one statement in PostgreSQL's implicit transaction, which commits it
    (durably, before the reply) or undoes it whole: one extended-protocol round trip, after a
    SET of the session's tenant only when the connection holds another one. The statement must
    take `:alone` and be given true: such a statement sends its own wake-ups (NOTIFY inside it),
    as there is no COMMIT to send them with."""

    def __init__(self, connection: TenantConnection, store: PostgresStore, scope: str) -> None:
        self.connection = connection
        self.store = store
        self.scope = scope
        self.ran: str | None = None
        self.woke = False

    async def _statement(self, name: str, parameters: dict[str, Any]) -> Statement:
        statement = self._checked(name, parameters)
        if self.connection.session_tenant != self.scope:
            await self._set_tenant()
        return statement

    def _checked(self, name: str, parameters: dict[str, Any]) -> Statement:
        """The unit's one statement: its first, of one part, taking :alone as true, on a
        connection outside a transaction (the session's tenant is set apart, when it differs)."""
        if self.ran is not None:
            raise RuntimeError(f"a unit of one statement ran {self.ran}, then {name}")
        self.ran = name
        parts = self.store.scripts[name]
        if (
            len(parts) != 1 or parts[0].custom_plans or parts[0].index_order
            or parameters.get("alone") is not True
        ):  # fmt: skip
            raise RuntimeError(f"{name} cannot run alone (one part, taking :alone as true)")
        if self.connection.is_in_transaction():  # never: the pool rolls back what it gets back
            raise RuntimeError("a unit of one statement on a connection inside a transaction")
        self.woke = True
        return parts[0]

    async def _set_tenant(self) -> None:
        self.connection.remember_tenant(None)
        await self.connection.execute(f"SET {TENANT_SETTING} = {literal(self.scope)}")
        self.connection.remember_tenant(self.scope)

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        """As `fetch_rows` reads them, in this one coroutine: a producer's one-job enqueue runs
        here, and each coroutine between it and asyncpg's fetch (made, awaited, resumed when
        the answer comes) cost ~2k instructions a call."""
        statement = self._checked(name, parameters)
        connection = self.connection
        if connection.session_tenant != self.scope:
            await self._set_tenant()
        try:
            records = await connection.fetch(statement.sql, *statement.arguments(parameters))
        except asyncpg.UniqueViolationError as error:
            raise_job_duplicate(error)
            raise
        return [dict(record) for record in records]

    async def table(self, name: str, parameters: dict[str, Any]) -> Table:
        statement = await self._statement(name, parameters)
        return records_table(await fetch_records(self.connection, statement, parameters))

    async def run(self, name: str, parameters: dict[str, Any]) -> int:
        statement = await self._statement(name, parameters)
        return rowcount(
            await self.connection.execute(statement.sql, *statement.arguments(parameters))
        )

    async def run_at_commit(self, name: str, parameters: dict[str, Any]) -> None:
        """A unit of one statement has no COMMIT to ride with: run (and checked) as any."""
        await self.run(name, parameters)

    def notify(self, queues: set[str]) -> None:
        """Already sent by the statement (run with :alone), in its implicit transaction, which
        has committed: this process's local waiters are woken now."""
        if not self.woke:
            raise RuntimeError("a unit of one statement wakes queues only from its statement")
        self.store.local_wakeups.signal(queues)


class PostgresExecutor(PostgresParameters):
    """Runs one transaction's statements on its connection, saving round trips: BEGIN and the
    tenant go out in one simple query just before the first statement, and the wake-ups
    (NOTIFY) in one simple query with the COMMIT. A transaction that runs no statement sends
    nothing."""

    def __init__(self, connection: Connection, store: PostgresStore, begin: str) -> None:
        self.connection = connection
        self.store = store
        self.begin = begin
        self.custom_plans = False
        self.index_order = False
        self.wake: set[str] = set()
        self.closing: list[str] = []  # statements sent with the COMMIT (run_at_commit)

    async def _ready(self, statement: Statement) -> Connection:
        """The connection, inside this transaction, planning for the values if the statement
        wants it (or walking an index in its order): BEGIN, the tenant and the plan settings go
        out in one simple query if not yet."""
        parts = [self.begin] if self.begin else []
        if statement.custom_plans and not self.custom_plans:
            parts.append(CUSTOM_PLANS_QUERY)
            self.custom_plans = True
        if statement.index_order and not self.index_order:
            parts.append(INDEX_ORDER_QUERY)
            self.index_order = True
        if parts:
            self.begin = ""
            await self.connection.execute("; ".join(parts))
        return self.connection

    async def begun(self) -> Connection:
        """The connection, inside this transaction (BEGIN and the tenant sent if not yet)."""
        if self.begin:
            begin, self.begin = self.begin, ""
            await self.connection.execute(begin)
        return self.connection

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        (statement,) = self.store.scripts[name]
        connection = await self._ready(statement)
        return await fetch_rows(connection, statement, parameters)

    async def table(self, name: str, parameters: dict[str, Any]) -> Table:
        (statement,) = self.store.scripts[name]
        connection = await self._ready(statement)
        return records_table(await fetch_records(connection, statement, parameters))

    async def run(self, name: str, parameters: dict[str, Any]) -> int:
        changed = 0
        for statement in self.store.scripts[name]:
            connection = await self._ready(statement)
            status = await connection.execute(statement.sql, *statement.arguments(parameters))
            changed += rowcount(status)
        return changed

    async def run_at_commit(self, name: str, parameters: dict[str, Any]) -> None:
        """Sent in the COMMIT's simple query, its parameters written as string constants (they
        are text: JSON the statement casts); a statement with other needs runs now."""
        (statement,) = self.store.scripts[name]
        arguments = statement.arguments(parameters)
        if (
            statement.custom_plans
            or statement.index_order
            or not all(isinstance(argument, str) for argument in arguments)
        ):
            await self.run(name, parameters)
            return
        self.closing.append(with_constants(statement.sql, arguments))

    def notify(self, queues: set[str]) -> None:
        """Sent with the COMMIT (PostgreSQL delivers a NOTIFY on commit either way)."""
        self.wake |= queues

    async def commit(self) -> None:
        """The statements left for the end (run_at_commit), the wake-ups and COMMIT in one
        simple query (one round trip); nothing when no statement ran. A failing statement
        there fails the COMMIT (PostgreSQL skips the rest of the query), and the unit rolls
        back as for any statement's error."""
        if self.begin and not self.wake and not self.closing:
            return
        parts = [self.begin] if self.begin else []
        parts.extend(self.closing)
        self.closing = []
        parts.extend(
            f"SELECT pg_notify('{CHANNEL}', {literal(queue)})" for queue in sorted(self.wake)
        )
        parts.append("COMMIT")
        self.begin = ""
        await self.connection.execute("; ".join(parts))
        self.store.local_wakeups.signal(self.wake)


async def fetch_rows(
    connection: Connection | TenantConnection, statement: Statement, parameters: dict[str, Any]
) -> list[dict[str, Any]]:
    """The rows of a statement as dicts."""
    return [dict(record) for record in await fetch_records(connection, statement, parameters)]


def records_table(records: list[asyncpg.Record]) -> Table:
    """Records as a table: their columns (none without a record), and the records themselves,
    which asyncpg indexes by position too (a sequence its stubs do not declare)."""
    return (tuple(records[0].keys()) if records else ()), cast("list[tuple[Any, ...]]", records)


async def fetch_records(
    connection: Connection | TenantConnection, statement: Statement, parameters: dict[str, Any]
) -> list[asyncpg.Record]:
    """The records of a statement. A job's id that exists already (enqueue_jobs inserts
    without ON CONFLICT: unique_violation on jobs_pkey) is the enqueue's Duplicate, naming no
    job (the error's detail leaves the key out under row-level security); the transaction
    cannot go on."""
    try:
        records = await connection.fetch(statement.sql, *statement.arguments(parameters))
    except asyncpg.UniqueViolationError as error:
        raise_job_duplicate(error)
        raise
    return records


def raise_job_duplicate(error: asyncpg.UniqueViolationError) -> None:
    """Raise the enqueue's Duplicate for a unique violation of a job's id (jobs_pkey); return
    for any other constraint, which the caller re-raises."""
    if error.constraint_name == "jobs_pkey":
        raise Duplicate(
            "a job of the enqueue has an id that exists already", {"field": "jobs"}
        ) from error


def rowcount(status: str) -> int:
    """The rows a command changed (or returned), from its status: `UPDATE 3`, `INSERT 0 1`,
    `SELECT 5`; 0 for a command that counts none (`SAVEPOINT`)."""
    count = status.rpartition(" ")[2]
    return int(count) if count.isdigit() else 0


def literal(text: str) -> str:
    """A string constant, whatever standard_conforming_strings says: an escape string (E'...')
    with its backslashes and quotes doubled."""
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def with_constants(sql: str, arguments: tuple[Any, ...]) -> str:
    """A statement's text with each `$n` replaced by its text argument as a string constant,
    for a simple query (which takes no parameters). Named statements hold `$` only in their
    placeholders (statements.py numbers them; none has a dollar-quoted string)."""
    return re.sub(r"\$(\d+)\b", lambda found: literal(arguments[int(found[1]) - 1]), sql)


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def tenant_setting(caller: Caller) -> str:
    """What `redrive.tenant_id` holds in the caller's transactions: its tenant, or the explicit
    marker of a caller that spans every tenant (tenant ids cannot be `*`)."""
    scope = caller.tenant_scope
    return ALL_TENANTS if scope is None else scope


async def keep_session(connection: asyncpg.Connection[asyncpg.Record]) -> None:
    """What the pool does to a connection handed back, beyond asyncpg's own ROLLBACK of an open
    transaction (never needed: a transaction ends before its connection goes back): nothing. A
    connection keeps its role, its prepared statements and its session tenant (which it
    remembers: every unit sets its own tenant before relying on it); SET LOCAL ended with the
    transaction."""


class PostgresStore:
    backend = "postgres"

    def __init__(
        self, url: str, min_size: int = 1, max_size: int = 10, role: str = DEFAULT_ROLE
    ) -> None:
        self.url = url
        self.role = role
        self.min_size = min_size
        self.max_size = max_size
        # Bulk chunks side by side: the server's cores share the work; a quarter of the pool
        # (at most 4) leaves the rest of it to workers and producers meanwhile.
        self.write_lanes = max(1, min(4, max_size // 4))
        self.wakeups = Wakeups()
        # Woken by this process's own commits, for a waiter that needs no other process's work
        # to wake it (`wait_for_local_work`: the webhook delivery loop of a server with no
        # subscription). A LISTEN connection costs every commit that notifies: PostgreSQL (15)
        # wakes each listening backend of the database for each NOTIFY, whatever the channel,
        # and the backend passes it on to this process (together about 75 us of CPU per
        # enqueue request to `redrive serve` with a producer alone, 9%).
        self.local_wakeups = Wakeups()
        # The LISTEN connection opens when something first waits for work (a producer never
        # does, and starts without it).
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self.scripts = load_scripts(HERE / "statements.sql")
        # The pool opens on first use, or as soon as a start has migrated (`open_soon`): its
        # connections SET ROLE to the application role, which `migrate` creates, so a fresh
        # database is migrated (on a connection of its own) first.
        self.pool: asyncpg.Pool[asyncpg.Record] | None = None
        # A connection the last unit gave back clean, kept out of the pool for the next one:
        # asyncpg's acquire and release (a task to shield the release, the idle timer re-armed
        # and cancelled) cost more instructions than the unit's statement. See `connection`.
        self._spare: Pooled | None = None
        # The units that hold or wait for a connection: with fewer than max_size others, none
        # of them waits on the pool, and the spare may stay out of it.
        self._units = 0
        self._begins: dict[str, str] = {}
        self._pool_opening = asyncio.Lock()
        # While a start migrates beside the pool's opening (`open_while_migrating`): whether
        # the migrations succeeded, awaited by each new pooled connection before its SET ROLE
        # (the role may not exist before the first migration). None otherwise.
        self._migration: asyncio.Future[bool] | None = None
        # What makes or closes connections in the background (`open_soon`, `open_lanes`,
        # `close_soon`), awaited by close.
        self._background: set[asyncio.Task[None]] = set()
        # `open_lanes`' connections while they are made and readied: a unit that finds no
        # spare waits for them rather than have the pool make another.
        self._readying: asyncio.Task[None] | None = None

    async def act_as_application_role(self, connection: Connection) -> None:
        """SET ROLE for the rest of the session (a pooled connection outside any transaction
        is bound by row-level security too, and sees nothing: no tenant is set)."""
        await connection.execute(f"SET ROLE {identifier(self.role)}")

    async def opened_pool(self) -> asyncpg.Pool[asyncpg.Record]:
        if self.pool is None:
            async with self._pool_opening:
                if self.pool is None:
                    self.pool = await asyncpg.create_pool(
                        self.url,
                        min_size=self.min_size,
                        max_size=self.max_size,
                        init=self._init_pooled,
                        reset=keep_session,
                        connection_class=TenantConnection,
                        timeout=30,
                        statement_cache_size=STATEMENT_CACHE_SIZE,
                        max_cached_statement_lifetime=0,
                        max_cacheable_statement_size=MAX_CACHEABLE_STATEMENT_SIZE,
                    )
        return self.pool

    async def _init_pooled(self, connection: Connection) -> None:
        """A new pooled connection's set-up: SET ROLE, once a start migrating meanwhile has
        made the role (`open_while_migrating`); a failed migration fails the opening."""
        migration = self._migration
        if migration is not None and not await asyncio.shield(migration):
            raise RuntimeError("the migrations failed: no pooled connection takes the role")
        await self.act_as_application_role(connection)

    def open_while_migrating(self) -> None:
        """`open_soon` before the migrations run (on a connection of their own): the pool's
        first connection is made (TCP, the backend's start, authentication: no role needed)
        while they run, and takes the application role only once `migrated` says they
        succeeded. Begun after the migrations instead, its start-up waited for the check and
        then for whatever the start did next with the event loop (the producer's service and
        imports): ready 46 ms after the migration connection's connect, now 16 (medians)."""
        if self.pool is None and self._migration is None:
            self._migration = asyncio.get_running_loop().create_future()
            self.open_soon()

    def migrated(self, succeeded: bool) -> None:
        """The end of the migrations `open_while_migrating` opened the pool beside: a pooled
        connection waiting for it takes the role, or (on failure) is closed with its opening's
        error, left to the next unit as any failed opening's is."""
        migration, self._migration = self._migration, None
        if migration is not None and not migration.done():
            migration.set_result(succeeded)

    def open_soon(self) -> None:
        """Start opening the pool (its first connection, as the application role), in the
        background: the caller's next steps (a start's imports and service, its first call's
        own) run while the server starts the backend, and the first unit finds its connection
        made (about 4 ms of wall it waited for before). Called once the migrations have made
        the role; an error is the first unit's to raise (it opens the pool again)."""
        if self.pool is None:
            self._in_background(self._open_pool())

    async def _open_pool(self) -> None:
        await self.opened_pool()

    def open_lanes(self, statement: str | None = None) -> None:
        """Start making, in the background, the connections a bulk operation's other lanes
        will take (`write_lanes` - 1, beside the caller's): called as its unit reads what the
        lanes are to move (a bulk retry's ids, ~10 ms for 20,000), lane 2 found its connection
        made instead of making it (~5 ms) while lane 1 ran its first chunk. A connection the
        pool has idle already is taken and given back as it was. Each also plans `statement`
        (a name), the one the lanes will run, once (see `_plan_once`)."""
        if self.write_lanes > 1:
            self._readying = self._in_background(self._make_lanes(self.write_lanes - 1, statement))

    async def _make_lanes(self, count: int, statement: str | None) -> None:
        made = await asyncio.gather(
            *(self._take_spare_or_from_pool() for _ in range(count)), return_exceptions=True
        )
        taken = [connection for connection in made if not isinstance(connection, BaseException)]
        planned = await asyncio.gather(
            *(self._plan_once(connection, statement) for connection in taken),
            return_exceptions=True,
        )
        for connection, outcome in zip(taken, planned, strict=True):
            await self._give_back(connection, outcome is None)

    async def _take_spare_or_from_pool(self) -> Pooled:
        """As `_take`, but for the lanes' readying itself, which waits for nothing."""
        return self._take_spare() or await self._take_from_pool()

    async def _plan_once(self, taken: Pooled, statement: str | None) -> None:
        """Plan `statement` (EXPLAIN, its parameters NULL: nothing runs) on a lane's connection
        while it waits for its first chunk: a backend's first plan of a statement loads the
        catalogue of every table and index it touches (a bulk retry's chunk on a new backend:
        parse and plan 6 ms at load 2, 27 at load 4; 3 once loaded), which lane 2 did on the
        critical path, after the ids were read. An error here is left to the lane's own
        statement to meet (the connection goes back to the pool, not kept as the spare)."""
        if statement is None:
            return
        (script,) = self.scripts[statement]
        await taken[1].fetch("EXPLAIN " + script.sql, *(None for _ in script.names))

    def close_soon(self, connection: asyncpg.Connection[asyncpg.Record]) -> None:
        """Close a connection of its own (the migrations') in the background: asyncpg's close
        waits for the server to end the backend (3-5 ms a start spent waiting)."""
        self._in_background(connection.close())

    def _in_background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A background task's end: an opening's error (a connection refused, say) is left to
        the unit that next asks for a connection, which meets it again; a closing's has nothing
        left to undo."""
        self._background.discard(task)
        if not task.cancelled():
            task.exception()

    async def _listen(self) -> None:
        """LISTEN on a connection of its own; a NOTIFY from any replica wakes local waiters."""
        while True:
            try:
                await self._listen_until_lost()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
                log.warning("LISTEN connection lost (%s); reconnecting", error)
            else:
                log.warning("LISTEN connection lost; reconnecting")
            await asyncio.sleep(1)

    async def _listen_until_lost(self) -> None:
        connection = await asyncpg.connect(self.url)
        lost = asyncio.Event()
        connection.add_termination_listener(lambda _: lost.set())
        try:
            await connection.add_listener(CHANNEL, self._notified)
            self._listening.set()
            await lost.wait()
        finally:
            connection.terminate()

    def _notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        self.wakeups.signal([str(payload)])

    async def wait_for_work(self, queues: list[str], timeout: float) -> bool:
        """The first wait opens the LISTEN connection and returns True once it listens (or its
        timeout passes): work committed before the LISTEN went out was not heard, so the
        caller looks again before it sleeps on the wake-ups."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._listening.wait(), timeout)
            return True
        return await self.wakeups.wait(queues, timeout)

    async def wait_for_local_work(self, queues: list[str], timeout: float) -> bool:
        return await self.local_wakeups.wait(queues, timeout)

    def _take_spare(self) -> Pooled | None:
        """The spare connection, taken, if there is one (no coroutine: a unit finds it there
        nearly every time, and `_take` awaits the pool only without it)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            self._units += 1
        return spare

    async def _take(self, timeout: float | None = None) -> Pooled:
        """The spare connection if there is one, else one from the pool (once the lanes'
        connections being readied are back if the pool has none idle: it would make another,
        new and unready)."""
        spare = self._take_spare()
        if spare is not None:
            return spare
        readying, pool = self._readying, self.pool
        if (
            readying is not None
            and not readying.done()
            and (pool is None or pool.get_idle_size() == 0)
        ):
            await asyncio.wait({readying}, timeout=timeout)
            spare = self._take_spare()
            if spare is not None:
                return spare
        return await self._take_from_pool(timeout)

    async def _take_from_pool(self, timeout: float | None = None) -> Pooled:
        self._units += 1
        try:
            pool = await self.opened_pool()
            return pooled(await pool.acquire(timeout=timeout))
        except BaseException:
            self._units -= 1
            raise

    async def _give_back(self, taken: Pooled, clean: bool) -> None:
        """Keep a clean connection (its unit succeeded, no transaction open) as the spare if
        there is none and the other units fit in the pool without it (else one may be waiting
        on the pool: it gets this one); anything else goes back to the pool, which rolls back,
        or discards a broken connection. A unit takes the spare before asking the pool, so no
        unit waits on the pool while the spare sits unused."""
        if not self._kept(taken, clean):
            await self._release(taken)

    async def _release(self, taken: Pooled) -> None:
        """A connection `_kept` did not keep, back to the pool (`_kept` keeps any when the
        pool is closed)."""
        pool = self.pool
        if pool is not None:
            await pool.release(taken[0])

    def _kept(self, taken: Pooled, clean: bool) -> bool:
        """The unit's end: True when `_give_back` has nothing to await (the connection kept as
        the spare, or the pool closed), False when it goes back to the pool."""
        self._units -= 1
        if self.pool is None:
            return True
        connection = taken[1]
        if (
            clean and self._spare is None and self._units < self.max_size
            and not connection.is_closed() and not connection.is_in_transaction()
        ):  # fmt: skip
            self._spare = taken
            return True
        return False

    @asynccontextmanager
    async def connection(
        self, timeout: float | None = None
    ) -> AsyncIterator[PoolConnectionProxy[asyncpg.Record]]:
        """A pooled connection outside any transaction, the spare first (the one the last
        unit ran on), given back as a transaction gives its connection back."""
        taken = await self._take(timeout)
        clean = False
        try:
            yield taken[0]
            clean = True
        finally:
            await self._give_back(taken, clean)

    def transaction(self, caller: Caller, one_statement: bool = False) -> Unit:
        """BEGIN and the tenant (SET LOCAL) go out before the first statement, COMMIT (with the
        wake-ups) on success and ROLLBACK on any error; SET LOCAL ends with the transaction, so
        the pooled connection goes back to the pool with its session tenant as it was. A unit
        of one statement sends that statement alone (StatementExecutor). See `Unit`."""
        return Unit(self, caller, one_statement)

    def _begin(self, caller: Caller) -> str:
        """`BEGIN; SET LOCAL redrive.tenant_id = <tenant>`, quoted once per tenant (a few
        tenants make up most transactions). SET LOCAL, not `SELECT set_config(..., true)`: the
        same effect, without a statement to plan and a row to send back."""
        scope = tenant_setting(caller)
        begin = self._begins.get(scope)
        if begin is None:
            if len(self._begins) >= BEGIN_CACHE_SIZE:
                self._begins.clear()
            begin = f"BEGIN; SET LOCAL {TENANT_SETTING} = {literal(scope)}"
            self._begins[scope] = begin
        return begin

    async def migrate(self, until: str | None = None) -> list[str]:
        """Apply the migrations not applied yet, in order; with `until` (a version, the file's
        name without .sql) only up to and including that one, as tests build older schemas.
        Then (re)apply the application role and its grants (access.sql, kept only when it
        changed something). Runs on a connection of its own, as the configured user: the
        tables' owner, not the application role."""
        connection = await asyncpg.connect(self.url)
        try:
            return await self.migrate_on(connection, until)
        finally:
            await connection.close()

    async def migrate_on(
        self, connection: asyncpg.Connection[asyncpg.Record], until: str | None = None
    ) -> list[str]:
        """`migrate` on `connection` (the configured user's), left open for the caller."""
        if until is None and await self.up_to_date(connection):
            return []
        return await self.apply_migrations(connection, until)

    async def up_to_date(
        self, connection: asyncpg.Connection[asyncpg.Record], then_act_as_role: bool = False
    ) -> bool:
        """Whether every migration is applied and access.sql's last application, recorded in
        schema_migrations (`_access_record`), is what the catalogue still shows: then there is
        nothing to apply, and no lock is taken. One round trip, which with `then_act_as_role`
        also sets the application role (on success only). False on any error of the database
        (no schema_migrations yet, a role that cannot be set: the caller applies the
        migrations, which says why)."""
        files = migration_files(HERE / "migrations")
        versions = ", ".join(literal(file.stem) for file in files)
        state = (HERE / "access_state.sql").read_text(encoding="utf-8")
        record = self._access_record(f"({state})")
        check = (
            "DO $$ BEGIN "
            f"PERFORM set_config('redrive.application_role', {literal(self.role)}, true); "
            "IF (SELECT count(*) FROM schema_migrations "
            f"WHERE version IN ({versions}, {record})) <> {len(files) + 1} THEN "
            "RAISE EXCEPTION 'redrive: a migration or the grants to apply'; "
            "END IF; END $$"
        )
        if then_act_as_role:
            check += f"; SET ROLE {identifier(self.role)}"
        try:
            await connection.execute(check)
        except asyncpg.PostgresError:
            return False
        return True

    async def apply_migrations(
        self, connection: asyncpg.Connection[asyncpg.Record], until: str | None = None
    ) -> list[str]:
        """`migrate_on` without asking `up_to_date` first: under the migration lock."""
        files = migration_files(HERE / "migrations")
        if until is not None and until not in {file.stem for file in files}:
            raise ValueError(f"no migration {until!r}")
        done: list[str] = []
        try:
            # The lock and the table of versions in one message (each step below is as few
            # round trips as it can be: every process that opens the database runs them).
            await connection.execute(
                f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY}); "
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            rows = await connection.fetch("SELECT version FROM schema_migrations")
            applied = {row["version"] for row in rows}
            for file in files:
                if until is not None and file.stem > until:
                    break
                if file.stem in applied:
                    continue
                async with connection.transaction():
                    # A migration that changes rows sees them all once RLS is forced.
                    await connection.execute(
                        "SELECT set_config($1, $2, true)", TENANT_SETTING, ALL_TENANTS
                    )
                    await connection.execute(file.read_text(encoding="utf-8"))
                    await connection.execute(
                        "INSERT INTO schema_migrations (version) VALUES ($1)", file.stem
                    )
                done.append(file.stem)
            await self._apply_access(connection)
        finally:  # (a lock not taken is not released: a warning, no error)
            await connection.execute(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
        return done

    def _access_record(self, state: str) -> str:
        """An SQL expression: the schema_migrations version that records access.sql's
        application, `access.sql <md5>` of the script's text, the configured and the
        migrating user, the schema and everything the script can change as it is now
        (access_state.sql, read with redrive.application_role set). A repeatable migration's
        checksum in the table of versions, as Flyway keeps one, and the catalogue's state
        beside it: a grant changed by hand since (or a role made again, a table added) gives
        another record, and the next open applies the script again (`up_to_date`); nothing
        here restates a grant. The state covers all the script writes, and the script reads
        nothing else but the tables that have a tenant_id column, which only a migration
        changes (each is in the table of versions too)."""
        script = hashlib.md5((HERE / "access.sql").read_bytes()).hexdigest()
        return (
            "'access.sql ' || md5(concat_ws(' | ', "
            f"'{script}', current_user, current_schema(), {state}))"
        )

    async def _apply_access(self, connection: asyncpg.Connection[asyncpg.Record]) -> None:
        """Run access.sql, committed only when it changed something (access_state.sql): the
        grants of an unchanged database are not rewritten by every process that opens it.
        Its record (`_access_record`) replaces the last one when it differs. Three round
        trips: the state before and access.sql in one message, then the comparison, then
        COMMIT or ROLLBACK (and the record, when new)."""
        state = (HERE / "access_state.sql").read_text(encoding="utf-8")
        try:
            await connection.execute(
                "BEGIN; "
                f"SELECT set_config('redrive.application_role', {literal(self.role)}, true); "
                f"SELECT set_config('redrive.access_before', ({state}), true); "
                + (HERE / "access.sql").read_text(encoding="utf-8")
            )
            (row,) = await connection.fetch(
                "SELECT current_setting('redrive.access_before') IS DISTINCT FROM now.state "
                "AS changed, record.version AS record, EXISTS (SELECT FROM schema_migrations "
                "WHERE version = record.version) AS recorded "
                f"FROM (SELECT ({state}) AS state) AS now, "
                f"LATERAL (SELECT {self._access_record('now.state')} AS version) AS record"
            )
        except BaseException:
            if not connection.is_closed() and connection.is_in_transaction():
                await connection.execute("ROLLBACK")
            raise
        record = (
            "DELETE FROM schema_migrations WHERE version LIKE 'access.sql %'; "
            f"INSERT INTO schema_migrations (version) VALUES ({literal(row['record'])}); COMMIT"
        )
        if row["changed"]:
            await connection.execute(record)
        elif row["recorded"]:
            await connection.execute("ROLLBACK")
        else:  # the grants as they were (none rewritten), only the record is new
            await connection.execute(f"ROLLBACK; BEGIN; {record}")

    async def ping(self) -> bool:
        try:
            async with self.connection(timeout=5) as connection:
                await connection.execute("SELECT 1")
        except (asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError, OSError):
            return False
        return True

    async def close(self) -> None:
        self.migrated(False)  # a pool opening still waiting for the migrations gives up
        while self._background:  # connections being made (closed with the pool) or closed
            await asyncio.wait(set(self._background))
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self.pool is not None:
            spare, self._spare = self._spare, None
            if spare is not None:
                await self.pool.release(spare[0])
            await self.pool.close()


class Unit:
    """One transaction of `PostgresStore.transaction`, as an async context manager: a class,
    not a generator (asynccontextmanager), whose machinery cost about as many instructions as
    the rest of a unit's own work, and a producer runs one a job it enqueues. Any error forgets
    the connection's session tenant (a failed SET or implicit transaction may have undone it)
    and rolls back an open transaction. Its statements go to the connection behind the pool's
    proxy (`pooled`), held from `_take` until `_give_back`."""

    __slots__ = ("caller", "executor", "one_statement", "store", "taken", "transaction")

    def __init__(self, store: PostgresStore, caller: Caller, one_statement: bool) -> None:
        self.store = store
        self.caller = caller
        self.one_statement = one_statement

    async def __aenter__(self) -> SqlTransaction:
        store = self.store
        # The spare without `_take`'s coroutine (a unit finds it nearly every time).
        taken = store._take_spare()
        self.taken = taken if taken is not None else await store._take()
        connection = self.taken[1]
        executor: StatementExecutor | PostgresExecutor
        if self.one_statement:
            executor = StatementExecutor(connection, store, tenant_setting(self.caller))
        else:
            executor = PostgresExecutor(connection, store, store._begin(self.caller))
        self.executor = executor
        self.transaction = SqlTransaction(executor)
        return self.transaction

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        clean = False
        try:
            if exception is not None:
                await self._undo()
                return
            try:
                transaction = self.transaction
                if transaction.waiting():
                    await transaction.finish()
                executor = self.executor
                if isinstance(executor, PostgresExecutor):
                    await executor.commit()
            except BaseException:
                await self._undo()
                raise
            clean = True
        finally:
            if not self.store._kept(self.taken, clean):
                await self.store._release(self.taken)

    async def _undo(self) -> None:
        connection = self.taken[1]
        connection.remember_tenant(None)
        # A broken connection cannot roll back; the pool discards it (and rolls back any
        # connection handed back inside a transaction).
        if not connection.is_closed() and connection.is_in_transaction():
            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError):
                await connection.execute("ROLLBACK")
