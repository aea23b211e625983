"""The peer rounds' SQLite column: a fresh file per round, counted read-only while a writer holds
it (bench/peers/rounds.py)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from bench.peers.rounds import SqliteCounter, counter_for, environment_for, fresh_sqlite
from bench.peers.tools import PROGRAMS, TOOLS, Place, Tool

import redrive
from redrive.composition import sqlite_path


def writer(url: str) -> sqlite3.Connection:
    connection = sqlite3.connect(sqlite_path(url), isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("CREATE TABLE jobs (state TEXT NOT NULL)")
    connection.executemany("INSERT INTO jobs VALUES (?)", [("completed",)] * 3)
    return connection


def test_each_round_gets_a_fresh_file_removed_afterwards(tmp_path: Path) -> None:
    with fresh_sqlite(tmp_path, "round") as first, fresh_sqlite(tmp_path, "round") as second:
        assert first.startswith("sqlite:///") and first != second
        writer(first).close()
        assert Path(sqlite_path(first)).exists()
    assert list(tmp_path.iterdir()) == []


def test_the_counter_reads_commits_while_a_writer_holds_its_transaction(tmp_path: Path) -> None:
    with fresh_sqlite(tmp_path, "round") as url:
        connection = writer(url)
        counter = SqliteCounter(url)
        try:
            query = "SELECT count(*) FROM jobs WHERE state = 'completed'"
            assert counter.count(query, 3) == 3
            assert counter.count("SELECT %(jobs)s - count(*) FROM jobs", 5) == 2
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO jobs VALUES ('completed')")
            assert counter.count(query, 3) == 3  # the uncommitted row is not seen, nor waited on
            connection.execute("COMMIT")
            assert counter.count(query, 3) == 4
            # no read transaction is left open between counts to hold back a checkpoint
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            assert busy == 0
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                counter.connection.execute("DELETE FROM jobs")
        finally:
            counter.close()
            connection.close()


def test_the_sqlite_column_is_counted_from_its_file(tmp_path: Path) -> None:
    sqlite = next(tool for tool in TOOLS if tool.store == "sqlite")
    with fresh_sqlite(tmp_path, "round") as url:
        writer(url).close()
        counter = counter_for(sqlite, url)
        try:
            assert isinstance(counter, SqliteCounter)
        finally:
            counter.close()


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_redrive_processes_import_the_checkout_the_benchmark_runs_from(tool: Tool) -> None:
    place = Place("postgresql://postgres@127.0.0.1:5432/private", "http://127.0.0.1:9999")
    paths = environment_for(tool, place, 100)["PYTHONPATH"].split(os.pathsep)
    source = str(Path(redrive.__file__).resolve().parent.parent)
    # A worktree's run (PYTHONPATH=its src) times its own code, not the editable install's.
    assert paths[0] == str(PROGRAMS)
    assert (source in paths) is (tool.peer is None)
