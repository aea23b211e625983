"""The SQLite store's connection settings: WAL, every commit synced (FULL), scratch b-trees in
memory; None and bools bound without sqlite3's adaptation protocol."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from redrive.store.sqlite.parts import NULL_ADAPTER, bind_plainly
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


def test_none_and_bools_bind_as_the_adaptation_protocol_binds_them(tmp_path: Path) -> None:
    """The store's adapters (None, bool: found by one dict lookup, no AttributeError formatted
    and dropped a parameter) bind what sqlite3's protocol binds without them: NULL, 1 and 0."""
    store = SqliteStore(str(tmp_path / "redrive.db"))
    try:
        assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)] is NULL_ADAPTER
        assert sqlite3.adapters[(bool, sqlite3.PrepareProtocol)] is int
        row = store.connection.execute(
            "SELECT ? IS NULL, typeof(?), ?, typeof(?), ?", (None, None, True, True, False)
        ).fetchone()
        assert row == (1, "null", 1, "integer", 0)
    finally:
        asyncio.run(store.close())


def test_an_adapter_the_application_registered_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    def mine(value: bool) -> str:
        return "yes" if value else "no"

    key: tuple[type[Any], type[Any]] = (bool, sqlite3.PrepareProtocol)
    monkeypatch.setitem(sqlite3.adapters, key, mine)
    bind_plainly()
    assert sqlite3.adapters[key] is mine
