"""The SQLite store's group commit: units that queue up behind one share its commit, a failing
unit is undone alone, and every unit returns only once its writes are committed."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from redrive.domain.caller import SYSTEM
from redrive.store.sqlite.store import SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "group.db"))
    await opened.call(lambda: opened.connection.execute("CREATE TABLE t (name TEXT PRIMARY KEY)"))
    yield opened
    await opened.close()


def committed(store: SqliteStore) -> list[str]:
    """What another connection reads: only committed rows."""
    reader = sqlite3.connect(store.path, isolation_level=None)
    try:
        return [row[0] for row in reader.execute("SELECT name FROM t ORDER BY name")]
    finally:
        reader.close()


async def insert(store: SqliteStore, name: str) -> None:
    await store.call(lambda: store.connection.execute("INSERT INTO t VALUES (?)", (name,)))


async def test_a_unit_returns_once_its_write_is_committed(store: SqliteStore) -> None:
    async with store.transaction(SYSTEM):
        await insert(store, "a")
        assert committed(store) == []
    assert committed(store) == ["a"]


async def test_units_queued_behind_a_unit_share_its_commit(store: SqliteStore) -> None:
    first_inside = asyncio.Event()
    seen_by_second: list[str] = []

    async def first() -> None:
        async with store.transaction(SYSTEM):
            await insert(store, "a")
            first_inside.set()
            while not store._waiting:  # the second unit has queued behind this one
                await asyncio.sleep(0)

    async def second() -> None:
        await first_inside.wait()
        async with store.transaction(SYSTEM):
            seen_by_second.extend(committed(store))
            await insert(store, "b")

    leading = asyncio.create_task(first())
    await second()
    await leading
    assert seen_by_second == [], "the first unit's write waited for the shared commit"
    assert committed(store) == ["a", "b"]


async def test_a_failing_unit_is_undone_alone(store: SqliteStore) -> None:
    first_inside = asyncio.Event()

    async def first() -> None:
        async with store.transaction(SYSTEM):
            await insert(store, "a")
            first_inside.set()
            while store._waiting < 2:  # both later units have queued behind this one
                await asyncio.sleep(0)

    async def failing() -> None:
        await first_inside.wait()
        async with store.transaction(SYSTEM):
            await insert(store, "b")
            await insert(store, "a")  # a duplicate key: this unit fails

    async def last() -> None:
        await first_inside.wait()
        await asyncio.sleep(0)
        async with store.transaction(SYSTEM):
            await insert(store, "c")

    results = await asyncio.gather(first(), failing(), last(), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert committed(store) == ["a", "c"]


async def test_a_unit_may_not_nest_in_its_own(store: SqliteStore) -> None:
    async with store.transaction(SYSTEM):
        with pytest.raises(RuntimeError, match="nested transaction"):
            async with store.transaction(SYSTEM):
                pass
        await insert(store, "a")
    assert committed(store) == ["a"]


async def test_units_that_ran_nothing_share_a_group_without_failing(store: SqliteStore) -> None:
    """A unit that runs no statement leaves no savepoint; two of them in one group (the second
    queued behind the first) commit nothing and return, and the store goes on writing."""
    first_inside = asyncio.Event()

    async def first() -> None:
        async with store.transaction(SYSTEM):
            first_inside.set()
            while not store._waiting:  # the second unit has queued behind this one
                await asyncio.sleep(0)

    async def second() -> None:
        await first_inside.wait()
        async with store.transaction(SYSTEM):
            pass

    leading = asyncio.create_task(first())
    await second()
    await leading
    async with store.transaction(SYSTEM):
        await insert(store, "after")
    assert committed(store) == ["after"]


async def test_a_unit_s_deferred_work_runs_once_before_it_returns(store: SqliteStore) -> None:
    """What a unit defers runs once its statements are done, beside its commit, before the unit
    returns."""
    ran: list[str] = []
    async with store.transaction(SYSTEM) as transaction:
        await insert(store, "a")
        transaction.defer(lambda: ran.append("work"))
        assert ran == []
    assert ran == ["work"]
    assert committed(store) == ["a"]


async def test_units_queued_behind_a_unit_run_their_deferred_work_with_its_commit(
    store: SqliteStore,
) -> None:
    """A group's units each run their deferred work once, with the group's one commit; a
    failing unit's work does not run, and work that raises fails nothing."""
    first_inside = asyncio.Event()
    ran: list[str] = []

    def failing_work() -> None:
        ran.append("raising")
        raise ValueError("dropped: the caller's own read raises it again")

    async def first() -> None:
        async with store.transaction(SYSTEM) as transaction:
            await insert(store, "a")
            transaction.defer(lambda: ran.append("first"))
            transaction.defer(failing_work)
            first_inside.set()
            while store._waiting < 2:  # both later units have queued behind this one
                await asyncio.sleep(0)
        assert ran == ["first", "raising", "last"], "the group's work runs before any returns"

    async def failing() -> None:
        await first_inside.wait()
        async with store.transaction(SYSTEM) as transaction:
            transaction.defer(lambda: ran.append("failed unit"))
            await insert(store, "a")  # a duplicate key: this unit fails

    async def last() -> None:
        await first_inside.wait()
        await asyncio.sleep(0)
        async with store.transaction(SYSTEM) as transaction:
            await insert(store, "c")
            transaction.defer(lambda: ran.append("last"))

    results = await asyncio.gather(first(), failing(), last(), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert ran == ["first", "raising", "last"]
    assert committed(store) == ["a", "c"]
