"""The SQLite store: a single connection served by one thread, one transaction at a time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from redrive.domain.caller import Caller
from redrive.domain.job import Job
from redrive.store.base import Table
from redrive.store.codec import event_blocks
from redrive.store.sqlite.checkpointer import BACKSTOP_PAGES, Checkpointer
from redrive.store.sqlite.parts import (
    Records,
    changed_by,
    compile_part,
    execute,
    execute_table,
    skipped,
    split_script,
)
from redrive.store.sqlite.thread import StoreThread
from redrive.store.statements import ParsedOnUse, load_statements, migration_files
from redrive.store.transaction import SqlTransaction
from redrive.store.wakeups import Wakeups

HERE = Path(__file__).parent
CLOSE_WAIT_SECONDS = 10.0
# How long the event loop's thread waits for the store's to begin a COMMIT before it runs the
# units' deferred work beside it (`_commit_beside`): the GIL's switch interval, which bounds the
# wait the other way round.
HANDOFF_SECONDS = 0.005
# A unit's savepoint, opened (and the write transaction begun, if none is) with the unit's first
# statement, on the same trip to the store's thread.
OPEN_UNIT = "SAVEPOINT unit"
RELEASE_UNIT = "RELEASE SAVEPOINT unit"
Result = TypeVar("Result")


class SqliteExecutor:
    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of the named statement; one that holds several (SQLite runs one statement
        per call) runs them in order in the same call and returns the rows of each that has
        any (a SELECT, or a RETURNING clause), in order."""
        parts = self.store.scripts[name]
        connection = self.store.connection

        def query() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            before = 0
            for part in parts:
                if skipped(part, before):
                    continue
                rows, changed = execute(connection, part, parameters)
                found.extend(rows)
                before = changed_by(part, changed)
            return found

        return await self.store.call(query)

    async def table(self, name: str, parameters: dict[str, Any]) -> Table:
        parts = self.store.scripts[name]
        connection = self.store.connection

        def query() -> Table:
            columns: tuple[str, ...] | None = None
            found: list[Any] = []
            before = 0
            for part in parts:
                if skipped(part, before):
                    continue
                table, changed = execute_table(connection, part, parameters)
                before = changed_by(part, changed)
                if table is None:
                    continue
                if columns is not None and table[0] != columns:
                    raise ValueError(f"the parts of {name} return different columns")
                columns = table[0]
                found.extend(table[1])
            return (columns or ()), found

        return await self.store.call(query)

    async def run_at_commit(self, name: str, parameters: dict[str, Any]) -> None:
        """Now: the store's thread runs it with no round trip to save."""
        await self.run(name, parameters)

    async def run(self, name: str, parameters: dict[str, Any]) -> int:
        parts = self.store.scripts[name]
        connection = self.store.connection

        def changes() -> int:
            total = before = 0
            for part in parts:
                if skipped(part, before):
                    continue
                changed = execute(connection, part, parameters)[1]
                total += changed
                before = changed_by(part, changed)
            return total

        return await self.store.call(changes)

    def list_parameter(self, values: list[str] | None) -> Any:
        """The list as JSON text, which the statements read with json_each or json_extract,
        written by orjson; what it refuses (a lone surrogate) by the standard library, as
        before. Its encoder took ~7.5k instructions a failed job of the worker's main thread
        (callgrind): every claim's :event_ids (:limit of them, however few it claims) and
        update_jobs' :ids."""
        if values is None:
            return None
        try:
            return orjson.dumps(values).decode()
        except TypeError:
            return json.dumps(values)

    def ids_parameter(self, ids: list[str]) -> Any:
        return self.list_parameter(ids)

    def records_parameter(self, records: list[dict[str, Any]]) -> Any:
        return Records(records)

    def shared_records_parameter(
        self, shared: dict[str, Any], records: list[dict[str, Any]]
    ) -> Any:
        return Records([{**shared, **record} for record in records])

    def event_blocks_parameter(self, jobs: list[Job], event_ids: list[str] | None) -> Any:
        return Records(event_blocks(jobs, event_ids))

    def notify(self, queues: set[str]) -> None:
        """Nothing to send: the store wakes in-process waiters once the transaction commits."""


class Group:
    """The units one write transaction holds: they return when its commit is durable (`done`),
    which `committer` makes once the units queued behind them have run, if any were."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.committer: asyncio.Task[None] | None = None
        self.notified: set[str] = set()
        # What its units deferred (SqlBase.defer), run while the store's thread commits.
        self.deferred: list[Callable[[], object]] = []


class SqliteStore:
    backend = "sqlite"
    write_lanes = 1  # one connection, one writer at a time

    def __init__(self, path: str) -> None:
        self.path = path
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.statements = load_statements(HERE / "statements.sql")
        self.scripts = ParsedOnUse(
            self.statements, lambda name, sql: [compile_part(part) for part in split_script(sql)]
        )
        # Opened here (any thread may use it: check_same_thread is off), then only on the thread.
        self.connection = self._connect()
        self._thread = StoreThread("redrive-sqlite")
        self._lock = asyncio.Lock()
        # Units waiting for the lock; the open write transaction's group of units, if any.
        self._waiting = 0
        self._group: Group | None = None
        # What units left to run before the next call (OPEN_UNIT, RELEASE_UNIT), in order: a
        # trip to the store's thread each cost both threads more than the statement (one
        # unit's savepoint opened and released around an ack: 3 trips, now 1).
        self._pending: list[str] = []
        self.wakeups = Wakeups()
        self._owner: asyncio.Task[Any] | None = None
        # A file's log is checkpointed beside the writer (an in-memory database has none).
        self.checkpointer = Checkpointer(path) if self._on_file() else None

    def _on_file(self) -> bool:
        # ("" is a private temporary database, which has no log another connection can reach.)
        return self.path not in (":memory:", "")

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30
        )
        connection.execute("PRAGMA journal_mode = WAL")
        # FULL: every commit syncs the WAL, so an acknowledged write survives a power loss
        # (NORMAL in WAL mode could lose the last commits).
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA foreign_keys = ON")
        # Scratch b-trees in memory: a RETURNING clause (update_jobs runs one per job) collects
        # its rows in one, which the default puts in a temporary file: 57 -> 23 us per job's
        # update. Only scratch data lives there; what is committed goes through the WAL, synced.
        connection.execute("PRAGMA temp_store = MEMORY")
        if self._on_file():
            # Checkpoints run on the checkpointer's thread; the writer's own is the backstop.
            connection.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
        return connection

    async def call(self, function: Callable[[], Result]) -> Result:
        """Run `function` on the store's thread, after what units left pending."""
        return await self._submit(function)

    def _submit(self, function: Callable[[], Result]) -> asyncio.Future[Result]:
        """`call`'s work, handed to the store's thread now; its future."""
        if not self._pending:
            return self._thread.submit(function)
        pending, self._pending = self._pending, []

        def after_pending() -> Result:
            for step in pending:
                if step is OPEN_UNIT:
                    self._open_unit()
                else:
                    self.connection.execute(step)
            return function()

        return self._thread.submit(after_pending)

    async def _call_alone(self, function: Callable[[], Result]) -> Result:
        """Run `function` on the store's thread, leaving what units left pending for them."""
        return await self._thread.submit(function)

    @asynccontextmanager
    async def transaction(
        self, caller: Caller, one_statement: bool = False
    ) -> AsyncIterator[SqlTransaction]:
        """One unit of work, a savepoint of the open write transaction (BEGIN IMMEDIATE): a unit
        that fails is undone alone. The units that queue up while one runs share its commit
        (one fsync for all); each returns only once that commit is durable."""
        task = asyncio.current_task()
        if self._lock.locked() and self._owner is task:
            raise RuntimeError("nested transaction: this task already holds the SQLite store")
        await self._acquire()
        self._owner = task
        try:
            group = self._group
            if group is None:
                group = self._group = Group(asyncio.get_running_loop().create_future())
            try:
                self._pending.append(OPEN_UNIT)
                transaction = SqlTransaction(SqliteExecutor(self))
                yield transaction
                if transaction.waiting():
                    await transaction.finish()
            except BaseException as error:
                await self._undo_unit(group, error)
                raise
            group.notified |= transaction.notified
            if transaction.deferred:
                group.deferred.extend(transaction.deferred)
            if group.committer is None and not self._waiting:
                await self._commit(group)  # COMMIT releases the unit's savepoint too
                return
            self._release_unit()
            if group.committer is None:
                group.committer = asyncio.create_task(self._commit_when_free(group))
        finally:
            self._owner = None
            if self._lock.locked():
                self._lock.release()
        await asyncio.shield(group.done)

    async def _acquire(self) -> None:
        self._waiting += 1
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1

    def _open_unit(self) -> None:
        """(On the store's thread.) A savepoint for the next unit in the write transaction,
        begun if none is open (first letting the log restart if the checkpointer asked)."""
        if not self.connection.in_transaction:
            if self.checkpointer is not None:
                self.checkpointer.restart_log(self.connection)
            self.connection.execute("BEGIN IMMEDIATE")
        self.connection.execute(OPEN_UNIT)

    def _unit_unopened(self) -> bool:
        """Whether the unit at hand ran nothing yet (its savepoint still pending): then it has
        nothing to release or undo, and its savepoint is dropped."""
        if self._pending and self._pending[-1] is OPEN_UNIT:
            self._pending.pop()
            return True
        return False

    def _release_unit(self) -> None:
        """Release the unit's savepoint with the next call (a commit, or the next unit's first
        statement)."""
        if not self._unit_unopened():
            self._pending.append(RELEASE_UNIT)

    async def _undo_unit(self, group: Group, error: BaseException) -> None:
        """Undo the failed unit alone; if SQLite rolled back the whole transaction (an I/O
        error, a full disk), the units before it in the group fail too. Then commit what the
        group holds unless a unit still queued will."""

        def undo() -> bool:
            if self.connection.in_transaction:
                self.connection.execute("ROLLBACK TO SAVEPOINT unit")
                self.connection.execute("RELEASE SAVEPOINT unit")
                return True
            return False

        try:
            kept = self._unit_unopened() or await self.call(undo)
        except BaseException:
            await self._roll_back()
            kept = False
        if not kept:
            self._fail(group, error)
        elif group.committer is None:
            with contextlib.suppress(Exception):
                await self._commit(group)

    async def _commit_when_free(self, group: Group) -> None:
        """Commit `group` after the units queued when it was left open have run in it."""
        await self._acquire()
        try:
            if self._group is group:
                with contextlib.suppress(Exception):  # its units raise it
                    await self._commit(group)
        finally:
            self._lock.release()

    async def _commit_open(self) -> None:
        """(Holding the lock.) Commit the group left open for units queued behind this one."""
        if self._group is not None:
            await self._commit(self._group)

    async def _commit(self, group: Group) -> None:
        """(Holding the lock.) COMMIT the open transaction: every unit of the group returns,
        or raises if the commit failed (then nothing of the group was written)."""
        try:
            if group.deferred:
                await self._commit_beside(group.deferred)
            else:
                await self.call(self._commit_open_transaction)
        except BaseException as error:
            await self._roll_back()
            self._fail(group, error)
            raise
        self._group = None
        group.done.set_result(None)
        self.wakeups.signal(group.notified)
        if self.checkpointer is not None:
            self.checkpointer.nudge()

    async def _commit_beside(self, deferred: list[Callable[[], object]]) -> None:
        """COMMIT on the store's thread and, meanwhile, the units' deferred work on this one.
        This thread waits (up to HANDOFF_SECONDS) until the store's has begun the COMMIT, inside
        SQLite without the GIL: the store's thread needs the GIL to start, and work begun at
        once held it (~0.7 ms a claim of 100 jobs: the COMMIT waited for it)."""
        began = threading.Event()

        def commit() -> None:
            began.set()
            self._commit_open_transaction()

        committed = self._submit(commit)
        began.wait(HANDOFF_SECONDS)
        for work in deferred:
            with contextlib.suppress(Exception):  # the caller's own read raises it again
                work()
        await committed

    def _commit_open_transaction(self) -> None:
        # None is open when every unit of the group ran nothing (each dropped its savepoint).
        if self.connection.in_transaction:
            self.connection.execute("COMMIT")

    async def _roll_back(self) -> None:
        """Roll the open transaction back, with what its units left pending."""
        self._pending.clear()
        await self._call_alone(self._rollback)

    def _rollback(self) -> None:
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")

    def _fail(self, group: Group, error: BaseException) -> None:
        if self._group is group:
            self._group = None
        if not group.done.done():
            failure = sqlite3.OperationalError(
                f"the transaction was rolled back ({type(error).__name__}: {error})"
            )
            group.done.set_exception(failure)
            group.done.exception()  # raised by the units awaiting it; none may be left

    async def wait_for_work(self, queues: list[str], timeout: float) -> bool:
        return await self.wakeups.wait(queues, timeout)

    def open_lanes(self, statement: str | None = None) -> None:
        """One lane, on the one connection: nothing to make."""

    async def wait_for_local_work(self, queues: list[str], timeout: float) -> bool:
        """The same wait: this store's wake-ups are this process's own commits either way."""
        return await self.wakeups.wait(queues, timeout)

    async def migrate(self, until: str | None = None) -> list[str]:
        """Apply the migrations not applied yet, in order; with `until` (a version, the file's
        name without .sql) only up to and including that one, as tests build older schemas."""
        files = migration_files(HERE / "migrations")
        if until is not None and until not in {file.stem for file in files}:
            raise ValueError(f"no migration {until!r}")

        def apply() -> list[str]:
            connection = self.connection
            connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version TEXT PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            )
            applied = {
                row[0] for row in connection.execute("SELECT version FROM schema_migrations")
            }
            done = []
            for file in files:
                if until is not None and file.stem > until:
                    break
                if file.stem in applied:
                    continue
                connection.execute("BEGIN IMMEDIATE")
                try:
                    for statement in split_script(file.read_text(encoding="utf-8")):
                        connection.execute(statement)
                    connection.execute(
                        "INSERT INTO schema_migrations (version) VALUES (?)", (file.stem,)
                    )
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
                done.append(file.stem)
            return done

        await self._acquire()
        try:
            await self._commit_open()
            return await self.call(apply)
        finally:
            self._lock.release()

    async def ping(self) -> bool:
        try:
            await self._call_alone(lambda: self.connection.execute("SELECT 1").fetchone())
        except sqlite3.Error:
            return False
        return True

    async def close(self) -> None:
        """Commit what units left open for a committer, then close; a unit that holds the store
        past CLOSE_WAIT_SECONDS is rolled back with the connection. The checkpointer stops
        first: the writer's close then checkpoints the whole log, as it did alone."""
        if self.checkpointer is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.checkpointer.stop)
        try:
            await asyncio.wait_for(self._acquire(), CLOSE_WAIT_SECONDS)
        except TimeoutError:
            await self._call_alone(self.connection.close)
        else:
            try:
                with contextlib.suppress(Exception):  # its units raise it
                    await self._commit_open()
                await self._call_alone(self.connection.close)
            finally:
                self._lock.release()
        self._thread.stop()
