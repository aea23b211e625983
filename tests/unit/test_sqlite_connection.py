"""The SQLite store's connection settings: WAL, every commit synced (FULL), scratch b-trees in
memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redrive.store.sqlite.store import SqliteStore

FULL = 2
MEMORY = 2


def test_commits_are_synced_and_scratch_data_stays_in_memory(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "redrive.db"))
    try:
        pragma = store.connection.execute
        assert pragma("PRAGMA journal_mode").fetchone() == ("wal",)
        assert pragma("PRAGMA synchronous").fetchone() == (FULL,)
        assert pragma("PRAGMA temp_store").fetchone() == (MEMORY,)
    finally:
        asyncio.run(store.close())
