"""A SQLite statement run once per element of a JSON array binds each element's fields as
`value ->>` and `value ->` would read them."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from redrive.store.codec import dump
from redrive.store.sqlite.store import Records, compile_part, execute


def test_fields_are_read_as_json_operators_read_them(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "elements.db", isolation_level=None)
    connection.execute("CREATE TABLE t (id, flag, nested, text, at)")
    part = compile_part(
        "INSERT INTO t VALUES (:rows->>id, :rows->>flag, :rows->>nested, "
        "NULLIF(:rows->text, 'null'), :now)"
    )
    elements = [
        {"id": 1, "flag": True, "nested": {"a": [1, 10**20]}, "text": "ok"},
        {"id": 2, "flag": False, "text": None},
        {"id": 3},
    ]
    parameters = {"rows": dump(elements), "now": 7}
    assert execute(connection, part, parameters) == ([], 3)
    by_sqlite = connection.execute(
        "SELECT value ->> '$.id', value ->> '$.flag', value ->> '$.nested', "
        "NULLIF(value -> '$.text', 'null'), ? FROM json_each(?)",
        (7, parameters["rows"]),
    ).fetchall()
    assert connection.execute("SELECT * FROM t ORDER BY id").fetchall() == by_sqlite
    returning = compile_part("UPDATE t SET at = :now WHERE id = :rows->>id RETURNING id")
    assert execute(connection, returning, parameters) == ([{"id": 1}, {"id": 2}, {"id": 3}], 3)


def test_quoted_text_is_not_a_parameter() -> None:
    part = compile_part("SELECT ':now', :rows->>id")
    assert part.sql == "SELECT ':now', ?"
    assert part.reads == ((1, "id"),)


def test_one_statement_runs_over_one_array() -> None:
    with pytest.raises(ValueError, match="one array"):
        compile_part("SELECT :rows->>id, :events->>id")


def test_a_returning_clause_of_element_fields_is_answered_as_sqlite_would(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "echo.db", isolation_level=None)
    connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY, state TEXT)")
    connection.executemany("INSERT INTO t VALUES (?, ?)", [("a", "old"), ("b", "new")])
    parameters = {"rows": dump([{"id": "a", "flag": True}, {"id": "b"}, {"id": "c"}])}
    by_sqlite = compile_part(
        "UPDATE t SET state = 'new' WHERE id = :rows->>id AND state = 'old' "
        "RETURNING 'job' AS kind, id AS id, NULL AS events, :rows->>flag AS flag"
    )
    echoed = compile_part(
        "UPDATE t SET state = 'new' WHERE id = :rows->>id AND state = 'old' "
        "RETURNING 'job' AS kind, :rows->>id AS id, NULL AS events, :rows->>flag AS flag;"
    )
    assert by_sqlite.echoes == () and "RETURNING" in by_sqlite.sql
    assert "RETURNING" not in echoed.sql
    assert echoed.echoes == (("kind", None, "job"), ("id", "id", None), ("events", None, None),
                             ("flag", "flag", None))  # fmt: skip
    expected = ([{"kind": "job", "id": "a", "events": None, "flag": 1}], 1)
    assert execute(connection, echoed, parameters) == expected
    connection.execute("UPDATE t SET state = 'old' WHERE id = 'a'")
    assert execute(connection, by_sqlite, parameters) == expected


def test_an_insert_skipped_on_conflict_returns_no_row(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "skip.db", isolation_level=None)
    connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY)")
    connection.execute("INSERT INTO t VALUES ('a')")
    part = compile_part(
        "INSERT INTO t (id) VALUES (:rows->>id) ON CONFLICT (id) DO NOTHING "
        "RETURNING :rows->>id AS id"
    )
    assert execute(connection, part, {"rows": dump([{"id": "a"}, {"id": "b"}])}) == (
        [{"id": "b"}],
        1,
    )


def test_an_echoed_field_of_another_array_is_refused() -> None:
    with pytest.raises(ValueError, match="one array"):
        compile_part("UPDATE t SET x = 1 WHERE id = :rows->>id RETURNING :events->>id AS id")


def test_records_bind_as_their_json_text_would(tmp_path: Path) -> None:
    """An array given as its records (no JSON written and read back) binds each element's
    fields as the array's JSON text does; a statement reading the array whole gets that text."""
    elements: list[dict[str, Any]] = [
        {"id": 1, "flag": True, "nested": {"a": [1, 10**20]}, "pair": ("x", 2), "text": "ok"},
        {"id": 2, "flag": False, "text": None},
        {"id": 3},
    ]
    insert = compile_part(
        "INSERT INTO t VALUES (:rows->>id, :rows->>flag, :rows->>nested, :rows->>pair, "
        "NULLIF(:rows->text, 'null'), :now) RETURNING :rows->>id AS id"
    )
    whole = compile_part("SELECT count(*) AS n FROM json_each(:rows) WHERE :now = 7")
    found = []
    for given in (dump(elements), Records(elements)):
        connection = sqlite3.connect(":memory:", isolation_level=None)
        connection.execute("CREATE TABLE t (id, flag, nested, pair, text, at)")
        parameters = {"rows": given, "now": 7}
        assert execute(connection, insert, parameters) == ([{"id": 1}, {"id": 2}, {"id": 3}], 3)
        assert execute(connection, whole, parameters) == ([{"n": 3}], -1)
        found.append(connection.execute("SELECT * FROM t ORDER BY id").fetchall())
    assert found[0] == found[1]


def test_records_are_written_as_json_only_for_a_statement_reading_them_whole() -> None:
    """The parts of a script that run once per element, or read other parameters, never have
    the array written out as JSON text (a nack batch's dead letters and snapshots were, whole,
    for every part); the first part that reads it whole does, once."""
    elements: list[dict[str, Any]] = [{"id": 1, "nested": {"a": [1]}}, {"id": 2}]
    records, others = Records(elements), Records([{"id": 9}])
    parameters = {"rows": records, "others": others, "now": 7}
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (id, nested, at)")
    insert = compile_part("INSERT INTO t VALUES (:rows->>id, :rows->nested, :now)")
    plain = compile_part("UPDATE t SET at = :now + 1 WHERE at = :now")
    assert execute(connection, insert, parameters) == ([], 2)
    assert execute(connection, plain, parameters) == ([], 2)
    assert (records._text, others._text) == (None, None)
    whole = compile_part("SELECT count(*) AS n FROM json_each(:rows) WHERE :now = 7")
    assert execute(connection, whole, parameters) == ([{"n": 2}], -1)
    assert (records._text, others._text) == (dump(elements), None)
