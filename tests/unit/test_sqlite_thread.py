"""The SQLite store's one thread: calls run on it in order, each answered on the loop that
handed it over (a result, or the error it raised); a call cancelled before it began is not run;
stopping runs what was queued first."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from redrive.store.sqlite.store import SqliteStore
from redrive.store.sqlite.thread import StoreThread

pytestmark = pytest.mark.anyio


@pytest.fixture
def thread() -> Iterator[StoreThread]:
    started = StoreThread("test-sqlite")
    yield started
    started.stop()


async def test_calls_run_on_the_thread_in_order_and_answer_on_the_loop(
    thread: StoreThread,
) -> None:
    ran: list[tuple[int, threading.Thread]] = []

    def call(number: int) -> int:
        ran.append((number, threading.current_thread()))
        return number * 10

    futures = [thread.submit(partial(call, number)) for number in range(5)]
    assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
    assert [number for number, _ in ran] == [0, 1, 2, 3, 4]
    assert {runner.name for _, runner in ran} == {"test-sqlite"}


async def test_an_error_raised_on_the_thread_reaches_its_caller_and_the_thread_goes_on(
    thread: StoreThread,
) -> None:
    def failing() -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        await thread.submit(failing)
    assert await thread.submit(lambda: "after") == "after"


async def test_a_call_cancelled_before_it_began_is_not_run(thread: StoreThread) -> None:
    release = threading.Event()
    ran: list[str] = []
    busy = thread.submit(lambda: release.wait(10))
    cancelled = thread.submit(lambda: ran.append("cancelled"))
    cancelled.cancel()
    release.set()
    assert await busy is True
    await thread.submit(lambda: ran.append("next"))
    assert ran == ["next"]


async def test_stop_runs_the_calls_queued_before_it() -> None:
    thread = StoreThread("test-sqlite-stop")
    ran: list[int] = []

    def run_first() -> str:
        ran.append(1)
        return "first"

    first = thread.submit(run_first)
    counted = thread.submit(lambda: len(ran))
    failed = thread.submit(lambda: 1 // 0)
    thread.stop()  # before any answer is awaited: stop waits for the queued calls to run
    assert ran == [1]
    assert not any(running.name == "test-sqlite-stop" for running in threading.enumerate())
    assert await first == "first"
    assert await counted == 1
    with pytest.raises(ZeroDivisionError):
        await failed


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
