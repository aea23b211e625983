"""The SQLite store's checkpointer: the log checkpointed on its own thread stays bounded under
sustained writes, every committed row is there after close and reopen, and close stops it."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from redrive.domain.caller import SYSTEM
from redrive.store.sqlite.checkpointer import BACKSTOP_PAGES, Checkpointer
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
