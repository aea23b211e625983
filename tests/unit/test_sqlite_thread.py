"""The SQLite store's one thread: calls run on it in order, each answered on the loop that
handed it over (a result, or the error it raised); a call cancelled before it began is not run;
stopping runs what was queued first."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from functools import partial
from pathlib import Path

import pytest

from redrive.store.sqlite.store import SqliteStore
from redrive.store.sqlite.thread import StoreThread

pytestmark = pytest.mark.anyio


async def test_calls_run_on_the_thread_in_order_and_answer_on_the_loop() -> None:
    thread = StoreThread("test-sqlite")
    try:
        loop = asyncio.get_running_loop()
        ran: list[tuple[int, threading.Thread]] = []

        def call(number: int) -> int:
            ran.append((number, threading.current_thread()))
            return number * 10

        futures = [thread.submit(loop, partial(call, number)) for number in range(5)]
        assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
        assert [number for number, _ in ran] == [0, 1, 2, 3, 4]
        assert {runner.name for _, runner in ran} == {"test-sqlite"}
    finally:
        thread.stop()


async def test_an_error_raised_on_the_thread_reaches_its_caller_and_the_thread_goes_on() -> None:
    thread = StoreThread("test-sqlite")
    try:
        loop = asyncio.get_running_loop()

        def failing() -> None:
            raise sqlite3.OperationalError("database is locked")

        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            await thread.submit(loop, failing)
        assert await thread.submit(loop, lambda: "after") == "after"
    finally:
        thread.stop()


async def test_a_call_cancelled_before_it_began_is_not_run() -> None:
    thread = StoreThread("test-sqlite")
    try:
        loop = asyncio.get_running_loop()
        release = threading.Event()
        ran: list[str] = []
        busy = thread.submit(loop, lambda: release.wait(10))
        cancelled = thread.submit(loop, lambda: ran.append("cancelled"))
        cancelled.cancel()
        release.set()
        assert await busy is True
        await thread.submit(loop, lambda: ran.append("next"))
        assert ran == ["next"]
    finally:
        thread.stop()


def test_stop_runs_the_calls_queued_before_it() -> None:
    thread = StoreThread("test-sqlite")
    ran: list[int] = []
    thread.run(lambda: ran.append(1))
    assert thread.run(lambda: len(ran)) == 1
    with pytest.raises(ZeroDivisionError):
        thread.run(lambda: 1 // 0)
    thread.stop()
    assert ran == [1]
    assert not any(running.name == "test-sqlite" for running in threading.enumerate())


async def test_the_store_answers_its_statements_and_its_errors_then_stops_its_thread(
    tmp_path: Path,
) -> None:
    before = set(threading.enumerate())
    store = SqliteStore(str(tmp_path / "redrive.db"))
    (started,) = {
        running for running in threading.enumerate() if running.name == "redrive-sqlite"
    } - before
    connection = store.connection
    assert await store.call(lambda: connection.execute("SELECT 41 + 1").fetchone()) == (42,)
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await store.call(lambda: connection.execute("SELECT * FROM nowhere").fetchall())
    assert await store.ping()
    await store.close()
    assert not started.is_alive()
