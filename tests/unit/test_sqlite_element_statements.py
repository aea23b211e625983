"""A SQLite statement run once per element of a JSON array binds each element's fields as
`value ->>` and `value ->` would read them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import redrive.store.sqlite.store as store_module
from redrive.store.codec import dump
from redrive.store.sqlite.parts import (
    KEYED_BY_ID,
    TEXT,
    VALUE,
    Records,
    bound_column,
    compile_part,
    execute,
    split_script,
    without_absent,
)
from redrive.store.sqlite.store import SqliteExecutor, SqliteStore
from redrive.store.statements import load_statements


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


@pytest.mark.parametrize("held", [[{}, {}], [{"text": None}, {}], [{}, {"at": 5, "nested": [1]}]])
def test_fields_no_element_holds_are_written_as_null_not_bound(held: list[dict[str, Any]]) -> None:
    """A field no element of the records holds is written into the statement as NULL (sqlite3
    binds None through its adaptation protocol); the rows are those the array's JSON text
    gives, which binds every field, and a field only some elements hold is each one's."""
    sql = (
        "INSERT INTO t VALUES (:rows->>id, :rows->>at, :rows->>nested, :rows->text, :now) "
        "RETURNING :rows->>id AS id"
    )
    part = compile_part(sql)
    elements = [{"id": index, **fields} for index, fields in enumerate(held)]
    found = []
    for given in (dump(elements), Records(elements)):
        connection = sqlite3.connect(":memory:", isolation_level=None)
        connection.execute("CREATE TABLE t (id, at, nested, text, now)")
        assert execute(connection, part, {"rows": given, "now": 7}) == ([{"id": 0}, {"id": 1}], 2)
        found.append(connection.execute("SELECT *, typeof(text) FROM t ORDER BY id").fetchall())
    assert found[0] == found[1]
    variant = without_absent(part, {"rows": Records(elements), "now": 7})
    absent = {"at", "nested", "text"}.difference(*elements)
    assert variant.sql.count("NULL") == len(absent)
    assert [name for _, name in variant.reads] == [
        name for name in ("id", "at", "nested", "text", "now") if name not in absent
    ]
    assert variant is without_absent(part, {"rows": Records(list(elements)), "now": 8})
    assert variant.echoes == part.echoes and variant.one_row_each == part.one_row_each
    assert without_absent(part, {"rows": dump(elements), "now": 7}) is part


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


def test_a_statement_changing_one_row_a_run_is_known_by_its_form() -> None:
    """Only a statement whose runs change one row at most runs its echoed elements in one
    executemany: an INSERT of one VALUES row, an UPDATE or DELETE of a table whose id is unique,
    keyed by the element's id and ANDed with the rest."""
    one_row = [
        "INSERT INTO t (id) VALUES (:rows->>id) ON CONFLICT (id) DO NOTHING "
        "RETURNING :rows->>id AS id",
        "INSERT INTO t (id, x) VALUES (:rows->>id, ')') RETURNING :rows->>id AS id",
        "UPDATE jobs SET x = 1 WHERE id = :rows->>id AND y = 'OR' RETURNING :rows->>id AS id",
        "DELETE FROM jobs WHERE id = :rows->>id RETURNING :rows->>id AS id",
    ]
    more = [
        "INSERT INTO t (id) VALUES (:rows->>id), ('b') RETURNING :rows->>id AS id",
        "INSERT INTO t (id) SELECT :rows->>id RETURNING :rows->>id AS id",
        "UPDATE jobs SET x = 1 WHERE id = :rows->>id OR y = 2 RETURNING :rows->>id AS id",
        "UPDATE jobs SET x = (SELECT 1 FROM t WHERE id = :rows->>id) WHERE y = 1 "
        "RETURNING :rows->>id AS id",
        "UPDATE workers SET x = 1 WHERE id = :rows->>id RETURNING :rows->>id AS id",
        "UPDATE jobs SET x = 1 WHERE id = :rows->>identity RETURNING :rows->>id AS id",
        "UPDATE jobs SET x = :rows->>x WHERE id = :rows->>id",  # nothing echoed
    ]
    assert [compile_part(sql).one_row_each for sql in one_row] == [True] * len(one_row)
    assert [compile_part(sql).one_row_each for sql in more] == [False] * len(more)


def test_the_job_writes_run_as_one_row_a_run() -> None:
    statements = load_statements(Path(store_module.__file__).parent / "statements.sql")
    for name in ("update_jobs", "insert_jobs"):
        (part,) = [compile_part(sql) for sql in split_script(statements[name])]
        assert part.one_row_each and part.echoes, name


def test_the_tables_keyed_by_id_have_a_unique_id(tmp_path: Path) -> None:
    """KEYED_BY_ID (an UPDATE keyed by an element's id changes one row at most) holds in the
    migrated schema: each table's id alone is its primary key or has a unique index."""
    store = SqliteStore(str(tmp_path / "redrive.db"))
    try:
        asyncio.run(store.migrate())
        connection = store.connection
        for table in KEYED_BY_ID:
            columns = connection.execute(f"PRAGMA table_info({table})").fetchall()
            keys = [column[1] for column in columns if column[5]]
            unique = [
                [entry[2] for entry in connection.execute(f"PRAGMA index_info({index[1]})")]
                for index in connection.execute(f"PRAGMA index_list({table})")
                if index[2]
            ]
            assert keys == ["id"] or ["id"] in unique, table
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize("in_transaction", [False, True])
def test_one_row_runs_echo_what_a_run_at_a_time_echoes(in_transaction: bool) -> None:
    """All written: one executemany, every element echoed. One lost (its guard refused it):
    the executemany is undone and the runs are made one at a time, so the echoes and the rows
    are those of a run at a time (nothing written twice, nothing of the undone attempt kept)."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT, n INTEGER)")
    connection.executemany(
        "INSERT INTO jobs VALUES (?, 'active', 0)", [("a",), ("b",), ("c",), ("d",)]
    )
    connection.execute("UPDATE jobs SET state = 'done' WHERE id = 'c'")
    part = compile_part(
        "UPDATE jobs SET state = :rows->>state, n = n + 1 WHERE id = :rows->>id "
        "AND state = 'active' RETURNING :rows->>id AS id"
    )
    assert part.one_row_each
    if in_transaction:
        connection.execute("BEGIN IMMEDIATE")
    written = {"rows": Records([{"id": "a", "state": "done"}, {"id": "b", "state": "done"}])}
    assert execute(connection, part, written) == ([{"id": "a"}, {"id": "b"}], 2)
    raced = Records([{"id": "c", "state": "failed"}, {"id": "d", "state": "done"}])
    assert execute(connection, part, {"rows": raced}) == ([{"id": "d"}], 1)
    assert connection.in_transaction is in_transaction
    if in_transaction:
        connection.execute("COMMIT")
    assert connection.execute("SELECT * FROM jobs ORDER BY id").fetchall() == [
        ("a", "done", 1), ("b", "done", 1), ("c", "done", 0), ("d", "done", 1),
    ]  # fmt: skip


@pytest.mark.parametrize(("before", "kept"), [(0, 1), (2, 0), (4, 5)])
def test_a_failing_batch_raises_and_leaves_what_came_before_its_statement(
    before: int, kept: int
) -> None:
    """A batch whose statement raises (a constraint) raises, that statement's rows undone (it
    writes a chunk of the batch's elements), its savepoint gone; the chunks before it stay, as
    the runs before a failing one did, for the unit's savepoint to undo."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL)")
    part = compile_part(
        "INSERT INTO t (id, n) VALUES (:rows->>id, :rows->>n) ON CONFLICT (id) DO NOTHING "
        "RETURNING :rows->>id AS id"
    )
    connection.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.IntegrityError):
        elements = [{"id": str(index), "n": index} for index in range(before)]
        execute(connection, part, {"rows": Records([*elements, {"id": "a", "n": 1}, {"id": "b"}])})
    assert connection.in_transaction
    # 2 elements: a chunk each ("a" kept); 4: one chunk; 6: a chunk of 4, then one each.
    written = [*((str(index), index) for index in range(before)), ("a", 1)][:kept]
    assert connection.execute("SELECT * FROM t ORDER BY rowid").fetchall() == written
    with pytest.raises(sqlite3.OperationalError, match="no such savepoint"):
        connection.execute("RELEASE SAVEPOINT one_row_runs")
    connection.execute("ROLLBACK")


@pytest.mark.parametrize(
    "values",
    [[], ["a", "b"], ["é", "日本", 'quote " and \\ slash'], ["lone \ud800 surrogate"], None],
)
def test_a_list_parameter_reads_back_as_the_list(tmp_path: Path, values: list[str] | None) -> None:
    """A list bound as JSON text (orjson's, the standard library's for what orjson refuses)
    reads back in SQL as the standard library's text of it did."""
    store = SqliteStore(str(tmp_path / "redrive.db"))
    try:
        text = SqliteExecutor(store).list_parameter(values)
        if values is None:
            assert text is None
            return
        read = "SELECT key, hex(value), type FROM json_each(?) ORDER BY key"
        connection = store.connection
        assert (
            connection.execute(read, (text,)).fetchall()
            == connection.execute(read, (json.dumps(values),)).fetchall()
        )
        assert json.loads(text) == values
    finally:
        asyncio.run(store.close())


# A script whose second statement writes only when the first changed no rows, as claim_jobs' and
# complete_jobs' event rows of unlike jobs do; the third reads what was written.
USUAL_THEN_ELSE = [
    "INSERT INTO t SELECT :id, 'usual' WHERE :usual",
    "INSERT INTO t SELECT :id, 'else' FROM (SELECT 1 WHERE changes() = 0) AS pending",
    "SELECT id, kind FROM t ORDER BY rowid",
]


def run_script(
    tmp_path: Path, script: list[str], parameters: dict[str, Any], way: str
) -> tuple[list[tuple[Any, ...]], list[str]]:
    """Run `script` through the executor (`rows`, `table` or `run`): the rows of t after it,
    and the statements SQLite was given."""
    store = SqliteStore(str(tmp_path / "redrive.db"))
    given: list[str] = []
    try:
        store.connection.execute("CREATE TABLE t (id, kind)")
        store.scripts["probe"] = [compile_part(sql) for sql in script]
        store.connection.set_trace_callback(given.append)
        executor = SqliteExecutor(store)
        asyncio.run(getattr(executor, way)("probe", parameters))
        store.connection.set_trace_callback(None)
        return store.connection.execute("SELECT id, kind FROM t ORDER BY rowid").fetchall(), given
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize("way", ["rows", "table", "run"])
@pytest.mark.parametrize("usual", [True, False])
def test_an_else_statement_is_left_out_when_the_one_before_changed_rows(
    tmp_path: Path, way: str, usual: bool
) -> None:
    """Left out, it writes what SQLite would have written: nothing after a usual row; the else
    row when there was none."""
    written, given = run_script(tmp_path, USUAL_THEN_ELSE, {"id": 1, "usual": usual}, way)
    assert written == ([(1, "usual")] if usual else [(1, "else")])
    ran_else = any("changes() = 0" in statement for statement in given)
    assert ran_else is not usual


def test_an_else_statement_runs_when_what_changes_counts_is_unknown(tmp_path: Path) -> None:
    """After a part run once per element (changes() counts its last run only, here none) or a
    SELECT (changes() still counts the statement before it), SQLite decides."""
    per_element = [
        "INSERT INTO t SELECT :rows->>id, 'usual' WHERE :rows->>usual",
        USUAL_THEN_ELSE[1],
    ]
    rows = Records([{"id": 1, "usual": True}, {"id": 2, "usual": False}])
    written, _ = run_script(tmp_path / "each", per_element, {"rows": rows, "id": 3}, "run")
    assert written == [(1, "usual"), (3, "else")]
    after_select = [USUAL_THEN_ELSE[0], "SELECT 1", USUAL_THEN_ELSE[1]]
    written, given = run_script(tmp_path / "select", after_select, {"id": 1, "usual": True}, "rows")
    assert written == [(1, "usual")]
    assert any("changes() = 0" in statement for statement in given)


def test_the_event_rows_of_unlike_jobs_are_an_else() -> None:
    """claim_jobs' and complete_jobs' second event insert (a row a run of alike jobs) is the one
    part of each left out when the usual row was written."""
    statements = load_statements(Path(store_module.__file__).parent / "statements.sql")
    for name in ("claim_jobs", "complete_jobs"):
        parts = [compile_part(sql) for sql in split_script(statements[name])]
        flagged = [index for index, part in enumerate(parts) if part.unless_changed]
        assert len(flagged) == 1, name
        (index,) = flagged
        assert parts[index - 1].sql.startswith("INSERT INTO events"), name
        assert parts[index].sql.startswith("INSERT INTO events"), name


def test_the_ack_reads_the_jobs_it_writes_before_writing_them() -> None:
    """complete_jobs' jobs come from a SELECT under the update's guard, run just before it, not
    from a RETURNING clause (whose rows SQLite keeps in a scratch b-tree); the behaviour suites
    check which acks are written and reported."""
    statements = load_statements(Path(store_module.__file__).parent / "statements.sql")
    parts = [compile_part(sql) for sql in split_script(statements["complete_jobs"])]
    assert not any(part.returns_rows or "RETURNING" in part.sql.upper() for part in parts)
    (update,) = [index for index, part in enumerate(parts) if part.sql.startswith("UPDATE jobs")]
    assert parts[update - 1].sql.startswith("SELECT 'job' AS kind")
    guard = parts[update].sql.split("WHERE jobs.sequence = ack.sequence AND ", 1)[1].rstrip(";")
    assert parts[update - 1].sql.split("WHERE ", 1)[1].startswith(guard)


@pytest.mark.parametrize(
    "elements",
    [
        [{"id": "a", "flag": True, "at": 5}, {"id": "b", "at": 2.5}, {}],
        [{"id": "a", "nested": {"b": [1, 10**20]}}, {"id": "b", "nested": None}],
        [],
    ],
)
def test_the_runs_of_plain_fields_bind_what_each_run_binds(elements: list[dict[str, Any]]) -> None:
    """A statement reading every field with `->>` has its runs' values made in one pass; they
    are the values `runs` binds, element by element (an absent field as NULL, an object or an
    array as its JSON text), for records and for the array's JSON text alike."""
    plain = compile_part(
        "INSERT INTO t VALUES (:rows->>id, :rows->>flag, :rows->>at, :rows->>nested, "
        "(SELECT 1 WHERE :rows->>id IS NOT NULL))"
    )
    mixed = compile_part("INSERT INTO t VALUES (:rows->>id, :rows->nested, :now)")
    for given in (Records(elements), dump(elements)):
        for part in (plain, mixed):
            parameters = {"rows": given, "now": 7}
            assert part.bindings(parameters) == [run for _, run in part.runs(parameters)]
    assert plain.bindings({"rows": Records(elements)}) == [
        tuple(
            dump(value) if isinstance(value, dict) else value
            for value in map(element.get, ("id", "flag", "at", "nested", "id"))
        )
        for element in elements
    ]


def test_a_batch_runs_as_a_few_statements_binding_alike_fields_once() -> None:
    """A batch of 85 elements is written by five statements (64, 16, 4, 1 elements: each a
    VALUES row of the elements it takes), a field every element holds alike bound once, and
    the rows are those the array's JSON text gives a run at a time: 1 and 1.0 stay an INTEGER
    and a REAL, True and 1 are both 1, equal lists of other numbers are their own texts, a
    list of the same items in each is one text, a null held is 'null' and one absent NULL."""
    shared_error = {"message": "boom", "attempt": 1}
    elements: list[dict[str, Any]] = [
        {
            "id": index,
            "queue": "default",
            "at": 1 if index % 2 else 1.0,
            "flag": True if index % 2 else 1,
            "errors": [shared_error],
            "numbers": [1.0] if index == 3 else [1],
            **({"text": None} if index % 3 else {}),
        }
        for index in range(85)
    ]
    sql = (
        "INSERT INTO t VALUES (:rows->>id, :rows->>queue, :rows->>at, :rows->>flag, "
        ":rows->errors, :rows->numbers, :rows->text, :now)"
    )
    part = compile_part(sql)
    assert part.in_sets
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (id, queue, at, flag, errors, numbers, text, now)")
    traced: list[str] = []
    connection.set_trace_callback(traced.append)
    assert execute(connection, part, {"rows": Records(elements), "now": 7}) == ([], 85)
    connection.set_trace_callback(None)
    assert [statement.count("), (") + 1 for statement in traced] == [64, 16, 4, 1]
    readings = [(VALUE, "queue"), (VALUE, "at"), (VALUE, "flag"), (TEXT, "errors"),
                (TEXT, "numbers"), (TEXT, "text")]  # fmt: skip
    alike = [
        bound_column(reading, [element.get(reading[1]) for element in elements], elements)[0]
        for reading in readings
    ]
    assert alike == [True, False, True, True, False, False]
    by_sqlite = connection.execute(
        "SELECT value ->> '$.id', value ->> '$.queue', value ->> '$.at', value ->> '$.flag', "
        "value -> '$.errors', value -> '$.numbers', value -> '$.text', 7 FROM json_each(?)",
        (dump(elements),),
    ).fetchall()
    columns = "id, queue, at, flag, errors, numbers, text, now"
    typed = f"{columns}, typeof(at), typeof(flag), typeof(text)"
    assert connection.execute(f"SELECT {typed} FROM t ORDER BY id").fetchall() == [
        (*row, "integer" if row[0] % 2 else "real", "integer", "text" if row[0] % 3 else "null")
        for row in by_sqlite
    ]


def test_an_update_of_a_batch_whose_element_repeats_an_id_is_made_a_run_at_a_time() -> None:
    """Two elements of one id: the batch's one statement changes the row once, so it is undone
    and the runs are made one at a time (the second refused by the guard the first changed)."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT, n INTEGER)")
    connection.executemany("INSERT INTO jobs VALUES (?, 'active', 0)", [("a",), ("b",)])
    part = compile_part(
        "UPDATE jobs SET state = :rows->>state, n = n + 1 WHERE id = :rows->>id "
        "AND state = 'active' RETURNING :rows->>id AS id"
    )
    assert part.in_sets and part.one_row_each
    rows = Records([{"id": "a", "state": "done"}, {"id": "b", "state": "x"},
                    {"id": "a", "state": "failed"}])  # fmt: skip
    assert execute(connection, part, {"rows": rows}) == ([{"id": "a"}, {"id": "b"}], 2)
    assert connection.execute("SELECT * FROM jobs ORDER BY id").fetchall() == [
        ("a", "done", 1), ("b", "x", 1),
    ]  # fmt: skip
