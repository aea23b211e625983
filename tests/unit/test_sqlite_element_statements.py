"""A SQLite statement run once per element of a JSON array binds each element's fields as
`value ->>` and `value ->` would read them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from redrive.store.codec import dump
from redrive.store.sqlite.store import compile_part, execute


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
