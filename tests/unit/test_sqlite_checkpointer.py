"""The SQLite store's checkpointer: the log checkpointed on its own thread stays bounded under
sustained writes, every committed row is there after close and reopen, and close stops it; past
RESTART_PAGES it asks for a restart, which the store's thread makes between two transactions."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest

from redrive.domain.caller import SYSTEM
from redrive.store.sqlite.checkpointer import BACKSTOP_PAGES, RESTART_PAGES, Checkpointer
from redrive.store.sqlite.store import SqliteStore

pytestmark = pytest.mark.anyio

UNITS = 600
ROWS_PER_UNIT = 4
PAGE_BYTES = 4096
# A frame is a page and its 24-byte header; the log's own header is 32 bytes.
LOG_BOUND_BYTES = 32 + (BACKSTOP_PAGES + 2 * ROWS_PER_UNIT + 16) * (PAGE_BYTES + 24)


def log_bytes(path: Path) -> int:
    log = Path(f"{path}-wal")
    return log.stat().st_size if log.exists() else 0


async def test_the_log_stays_bounded_and_every_row_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    store = SqliteStore(str(path))
    assert store.checkpointer is not None and store.checkpointer.running
    await store.call(
        lambda: store.connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    )
    largest = 0
    for unit in range(UNITS):
        async with store.transaction(SYSTEM):
            first = unit * ROWS_PER_UNIT
            rows = [(first + row, os.urandom(PAGE_BYTES)) for row in range(ROWS_PER_UNIT)]

            def write(rows: list[tuple[int, bytes]] = rows) -> None:
                store.connection.executemany("INSERT INTO t VALUES (?, ?)", rows)

            await store.call(write)
        largest = max(largest, log_bytes(path))
    # ~2,400 pages written: past SQLite's default automatic checkpoint, which now runs beside.
    assert store.checkpointer.checkpoints > 0
    assert largest <= LOG_BOUND_BYTES
    await store.close()
    assert not store.checkpointer.running

    reader = sqlite3.connect(path)
    try:
        count, distinct = reader.execute("SELECT count(*), count(DISTINCT body) FROM t").fetchone()
    finally:
        reader.close()
    assert count == distinct == UNITS * ROWS_PER_UNIT


def log_frames(path: Path) -> int:
    """The frames in the log (a PASSIVE checkpoint's count, on a connection of its own)."""
    connection = sqlite3.connect(path)
    try:
        _, frames, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        connection.close()
    return int(frames)


def checkpointed_once(checkpointer: Checkpointer) -> None:
    """Nudge `checkpointer` and wait (up to 10 s) until it has run a checkpoint."""
    before = checkpointer.checkpoints
    checkpointer.nudge()
    deadline = time.monotonic() + 10
    while checkpointer.checkpoints == before:
        assert time.monotonic() < deadline, "the checkpointer ran no checkpoint"
        time.sleep(0.01)


@pytest.mark.parametrize(("pages", "due"), [(RESTART_PAGES + 50, True), (20, False)])
def test_a_checkpoint_asks_for_a_restart_once_the_log_is_past_its_size(
    tmp_path: Path, pages: int, due: bool
) -> None:
    path = tmp_path / "restart.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # only the checkpointer checkpoints
    writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    writer.executemany(
        "INSERT INTO t VALUES (?, ?)", [(row, os.urandom(PAGE_BYTES)) for row in range(pages)]
    )
    checkpointer = Checkpointer(str(path))
    try:
        checkpointed_once(checkpointer)
        assert checkpointer.restart_due is due
    finally:
        checkpointer.stop()
        writer.close()


async def test_the_store_lets_the_log_restart_before_its_next_transaction(
    tmp_path: Path,
) -> None:
    """What the checkpointer's checkpoint left (the commits made during it, here every frame:
    its thread is stopped) is checkpointed by the store's thread before its next transaction,
    whose frames then start the log again instead of following the old ones."""
    path = tmp_path / "restart.db"
    store = SqliteStore(str(path))
    assert store.checkpointer is not None
    store.checkpointer.stop()
    await store.call(
        lambda: store.connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    )
    async with store.transaction(SYSTEM):
        rows = [(row, os.urandom(PAGE_BYTES)) for row in range(100)]
        await store.call(lambda: store.connection.executemany("INSERT INTO t VALUES (?, ?)", rows))
    store.checkpointer.restart_due = True
    async with store.transaction(SYSTEM):
        await store.call(lambda: store.connection.execute("INSERT INTO t VALUES (100, x'00')"))
    assert not store.checkpointer.restart_due
    # The one-row transaction's few frames, not the 100 pages before them.
    assert log_frames(path) < 10
    await store.close()
    reader = sqlite3.connect(path)
    try:
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (101,)
    finally:
        reader.close()


async def test_close_stops_the_checkpointer_of_an_idle_store(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "idle.db"))
    assert store.checkpointer is not None and store.checkpointer.running
    await store.close()
    assert not store.checkpointer.running


async def test_an_in_memory_store_has_no_checkpointer() -> None:
    store = SqliteStore(":memory:")
    assert store.checkpointer is None
    await store.close()


def test_a_checkpointer_that_cannot_open_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="redrive.store.sqlite.checkpointer"):
        checkpointer = Checkpointer(str(tmp_path / "missing" / "directory.db"))
        checkpointer.stop()
    assert not checkpointer.running
    assert "could not open" in caplog.text
