"""How a named SQLite statement runs on the connection: its parts compiled (run once or once per
element, echoed, in set form) and executed, their parameters bound."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache
from itertools import chain, repeat
from operator import is_
from typing import Any

from redrive.domain.frozen import frozen_dataclass
from redrive.store.base import Table
from redrive.store.codec import dump, load

# What one part of a script gave: its rows and how many rows it changed.
Executed = tuple[list[dict[str, Any]], int]


def bind_plainly() -> None:
    """Let the sqlite3 module bind None and bools without its adaptation protocol. It binds an
    int, float or str as it is, but sends any other value through the protocol, which first asks
    its PrepareProtocol class for `__adapt__` and so formats an AttributeError, dropped at once,
    for every None parameter (a dead-lettered job's statements bind ~25: ~9% of the store
    thread's instructions). An adapter registered for the type is found first by one dict
    lookup. These bind exactly what the protocol would (NULL; 1 or 0) and stand back for an
    adapter the application registered itself; the registry is the process's (every sqlite3
    connection binds the same values as before, a little faster)."""
    for kind, adapter in ((type(None), NULL_ADAPTER), (bool, int)):
        sqlite3.adapters.setdefault((kind, sqlite3.PrepareProtocol), adapter)


# None for None, in C (a lambda would add a Python frame a parameter): an empty dict's get.
_NOTHING: dict[None, None] = {}
NULL_ADAPTER: Callable[[None], None] = _NOTHING.get
bind_plainly()


class Records:
    """A JSON array parameter kept as its records: a statement run once per element binds their
    fields straight away (no JSON written by the caller and read back here); one that reads the
    array whole gets its text, written once."""

    __slots__ = ("_text", "records")

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self._text: str | None = None

    @property
    def text(self) -> str | None:
        if self._text is None:
            self._text = dump(self.records)
        return self._text


class Bound(dict[str, Any]):
    """Parameters holding an array kept as records, which give it as its JSON text only when
    the statement reads it: sqlite3 asks a dict subclass for each name the statement binds, and
    nothing else. Written out for every part of a script, the arrays the parts run once per
    element (a nack batch's dead letters with their job snapshots, its jobs' errors) were
    serialised whole for nothing: ~6 us of the store thread's time a dead-lettered job."""

    def __getitem__(self, name: str) -> Any:
        value = super().__getitem__(name)
        return value.text if isinstance(value, Records) else value


def bound(parameters: dict[str, Any]) -> dict[str, Any]:
    """The parameters as SQLite binds them: an array kept as records as its JSON text (written
    when a statement reads it)."""
    if not any(isinstance(value, Records) for value in parameters.values()):
        return parameters
    return Bound(parameters)


def split_script(sql: str) -> list[str]:
    """A script's statements in order, a trigger's `BEGIN ... END` body (which holds `;`)
    kept whole: SQLite itself says where each statement is complete."""
    statements: list[str] = []
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \t\n;"):
        statements.append(pending.strip().removesuffix(";"))
    return statements


# `:rows->>id` in a statement: the `id` of each element of the JSON array :rows, as `value ->>
# '$.id'` reads it (a scalar as itself, an object or array as JSON text); `:rows->error` as
# `value -> '$.error'` does (JSON text). Such a statement runs once per element.
# (A quoted literal matches whole, as itself, so nothing inside one is read as a parameter.)
ELEMENT_FIELD = re.compile(r"'[^']*'|:([a-z_][a-z0-9_]*)(?:(->>?)([a-z_][a-z0-9_]*))?")
CONTAINERS = (dict, list, tuple)
# What SQLite binds as it is (a bool as 0 or 1).
BINDABLE = frozenset({type(None), int, float, str, bytes, bool})
# How a parameter of a statement run per element is read: from the call's parameters, or from
# the element as `->>` or as `->` reads a field.
PARAMETER, VALUE, TEXT = 0, 1, 2
# A per-element statement's `RETURNING` clause made only of the element's own fields and
# constants (`RETURNING 'job' AS kind, :rows->>id AS id, NULL AS events`) is not run by SQLite:
# after each run, the executor returns those values once per row the run changed, as SQLite
# would. SQLite collects RETURNING rows in a scratch b-tree per run: ~11 us of a job's ~23 us
# update in update_jobs, with the scratch in memory.
RETURNING = re.compile(r"\bRETURNING\b(?P<items>(?:[^']|'[^']*')*)$", re.IGNORECASE | re.DOTALL)
ECHO = re.compile(
    r"\s*(?:(?P<constant>'[^']*'|NULL)|:(?P<array>[a-z_][a-z0-9_]*)->>(?P<field>[a-z_][a-z0-9_]*))"
    r"\s+AS\s+(?P<name>[a-z_][a-z0-9_]*)\s*",
    re.IGNORECASE,
)
# One item of a RETURNING clause the executor answers: its name, and the element field it reads
# or the text of the constant it is (both None for NULL).
Echo = tuple[str, str | None, str | None]
# An echoed statement that changes at most one row a run: an INSERT of one row of VALUES (no
# SELECT before them), or an UPDATE or DELETE of a table of KEYED_BY_ID whose WHERE (the first,
# no SELECT before it) opens with the element's id, ANDed with the rest (no OR). Such a
# statement runs in one executemany, inside a savepoint: when every run changed a row, each run
# changed its element's row, and the echoes are all of them. Otherwise the savepoint is rolled
# back and the runs are made one at a time, each echoed as it changed rows. A run each, sqlite3
# looked its statement up, reset it and came back to Python between the runs of update_jobs:
# 7.3k of the store thread's 355k instructions a dead-lettered job (callgrind).
ONE_VALUES_ROW = re.compile(r"\s*INSERT\b(?:(?!\bSELECT\b).)*?\bVALUES\s*(?=\()", re.I | re.S)
KEYED_WRITE = re.compile(
    r"\s*(?:UPDATE|DELETE\s+FROM)\s+(?P<table>\w+)\b(?:(?!\bSELECT\b).)*?"
    r"\bWHERE\s+id\s*=\s*:\w+->>id\b(?P<rest>.*)",
    re.I | re.S,
)
OR = re.compile(r"\bOR\b", re.I)
# The tables whose `id` alone is unique (a unit test checks them against the migrated schema):
# an UPDATE or DELETE keyed by an element's id changes one of their rows at most.
KEYED_BY_ID = frozenset({"jobs"})
ONE_ROW_RUNS = "SAVEPOINT one_row_runs"
# A statement that writes only when the one before it changed no rows: an "else" after a usual
# case (claim_jobs' and complete_jobs' event rows of unlike jobs), whose rows all come from
# `(SELECT 1 WHERE changes() = 0) AS pending`. SQLite ran it even when that gave no row: ~36 us
# of the claim's, on a batch of 150 jobs (its windows, groups and sorts set up and torn down).
UNLESS_CHANGED = re.compile(
    r"\(\s*SELECT\s+1\s+WHERE\s+changes\(\)\s*=\s*0\s*\)\s+AS\s+pending\b", re.I
)


@frozen_dataclass
class Part:
    """One statement of a named script, and the JSON array (if any) it runs once per element
    of, with how each of its positional parameters is read (a kind, a name)."""

    sql: str
    each: str | None = None
    reads: tuple[tuple[int, str], ...] = ()
    returns_rows: bool = False
    # The RETURNING clause the executor answers itself (see RETURNING above).
    echoes: tuple[Echo, ...] = ()
    # Whether a run changes one row at most (see ONE_VALUES_ROW).
    one_row_each: bool = False
    # The statement as written, and the element fields it reads (see `without_absent`).
    source: str = ""
    fields: frozenset[str] = frozenset()
    # Whether it writes only when the statement before it changed no rows (see UNLESS_CHANGED).
    unless_changed: bool = False
    # Whether its runs can be one statement over a VALUES list of the elements (see IN_SETS),
    # and the element fields written as NULL in it (see `without_absent`).
    in_sets: bool = False
    absent: frozenset[str] = frozenset()

    def bindings(self, parameters: dict[str, Any]) -> list[Any]:
        """The parameters of each run: once, or once per element of the array named `each`
        (binding its fields instead of parsing the element's JSON once per field in SQL, which
        SQLite 3.40 does for every `->>`: several times slower on a batch of dead letters).
        A statement that reads every field as it is (`->>`, nothing from the call nor as JSON
        text: the ack's temporary table) gets them in one comprehension, kept when SQLite binds
        every value as it is: `runs`, a generator resumed through this one per element, took
        ~850 ns an ack of 150, this ~540."""
        if self.each is None:
            return [bound(parameters)]
        if all(kind == VALUE for kind, _ in self.reads):
            array = parameters[self.each]
            elements = array.records if isinstance(array, Records) else load(array)
            names = tuple(name for _, name in self.reads)
            runs = [tuple(map(element.get, names)) for element in elements]
            if BINDABLE.issuperset(map(type, chain.from_iterable(runs))):
                return runs
        return [values for _, values in self.runs(parameters)]

    def runs(self, parameters: dict[str, Any]) -> Iterator[tuple[dict[str, Any], tuple[Any, ...]]]:
        """Each element of the array named `each`, with the parameters of its run: every field
        read at once, then the call's parameters and the JSON texts put in; a value SQLite
        cannot bind as it is (an object or array read with `->>`) is written as JSON, as
        `element_field` does (a field at a time: 3.5 -> 1.6 us for update_jobs' 22)."""
        assert self.each is not None
        array = parameters[self.each]
        elements = array.records if isinstance(array, Records) else load(array)
        given = bound(parameters)
        names = tuple(name for _, name in self.reads)
        positions = [
            [(index, name) for index, (kind, name) in enumerate(self.reads) if kind == wanted]
            for wanted in (PARAMETER, TEXT, VALUE)
        ]
        from_call, texts, values = positions
        for element in elements:
            run = list(map(element.get, names))
            for index, name in from_call:
                run[index] = given[name]
            for index, name in texts:
                run[index] = element_field(element, name, True)
            if not BINDABLE.issuperset(map(type, run)):
                for index, name in values:
                    run[index] = element_field(element, name, False)
            yield element, tuple(run)

    def echo(self, element: dict[str, Any]) -> dict[str, Any]:
        """The row the echoed RETURNING clause gives for a run of `element`, as SQLite would
        give it (a bound true or false comes back as 1 or 0)."""
        row = {}
        for name, field, constant in self.echoes:
            value = constant if field is None else element_field(element, field, False)
            row[name] = int(value) if isinstance(value, bool) else value
        return row


def element_field(element: dict[str, Any], field: str, text: bool) -> Any:
    value = element.get(field)
    if text:
        if value is None:
            return "null" if field in element else None
        return dump(value)
    return dump(value) if isinstance(value, CONTAINERS) else value


def echoed(sql: str) -> tuple[str, tuple[Echo, ...], set[str]]:
    """The statement without a RETURNING clause the executor can answer from the element, that
    clause's items and the arrays they read; or the statement as it is, and none."""
    statement = sql.rstrip().removesuffix(";")
    clause = RETURNING.search(statement)
    if clause is None:
        return sql, (), set()
    echoes: list[Echo] = []
    arrays: set[str] = set()
    for item in clause.group("items").split(","):
        match = ECHO.fullmatch(item)
        if match is None:
            return sql, (), set()
        constant = match.group("constant")
        if constant is None:
            arrays.add(match.group("array"))
            echoes.append((match.group("name"), match.group("field"), None))
        else:
            text = None if constant.upper() == "NULL" else constant[1:-1]
            echoes.append((match.group("name"), None, text))
    return statement[: clause.start()].rstrip(), tuple(echoes), arrays


def changes_one_row_at_most(sql: str) -> bool:
    """Whether each run of the statement changes one row at most (see ONE_VALUES_ROW)."""
    values = ONE_VALUES_ROW.match(sql)
    if values is not None:
        return _one_row(sql, values.end())
    keyed = KEYED_WRITE.match(sql)
    return (
        keyed is not None
        and keyed.group("table").lower() in KEYED_BY_ID
        and OR.search(_unquoted(keyed.group("rest"))) is None
    )


def _unquoted(sql: str) -> str:
    return re.sub(r"'[^']*'", "''", sql)


def _one_row(sql: str, start: int) -> bool:
    """Whether the VALUES at `start` (an opening parenthesis) hold one row: no second row after
    the first one's closing parenthesis."""
    rest = _unquoted(sql[start:])
    depth = 0
    for index, character in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0:
            return not rest[index + 1 :].lstrip().startswith(",")
    return False


@lru_cache(maxsize=256)
def compile_part(sql: str, absent: frozenset[str] = frozenset()) -> Part:
    """A statement as SQLite runs it; one that reads element fields (`:rows->>id`) takes
    positional parameters, read from the element or from the call; a field of `absent` (no
    element of the run's array holds it) is read as NULL, written in the statement."""
    unless_changed = UNLESS_CHANGED.search(sql) is not None
    if not any(match.group(2) for match in ELEMENT_FIELD.finditer(sql)):
        return Part(sql, unless_changed=unless_changed)
    source = sql
    returns_rows = re.search(r"\bRETURNING\b", sql, re.IGNORECASE) is not None
    sql, echoes, arrays = echoed(sql)
    reads: list[tuple[int, str]] = []
    fields: set[str] = set()

    def bind(match: re.Match[str]) -> str:
        name, arrow, field = match.groups()
        if name is None:
            return match.group(0)
        if arrow is None:
            reads.append((PARAMETER, name))
            return "?"
        arrays.add(name)
        fields.add(field)
        if field in absent:
            return "NULL"
        reads.append((TEXT if arrow == "->" else VALUE, field))
        return "?"

    compiled = ELEMENT_FIELD.sub(bind, sql)
    if len(arrays) > 1:
        raise ValueError(f"a statement runs once per element of one array, not {sorted(arrays)}")
    one_row_each = bool(echoes) and changes_one_row_at_most(sql)
    in_sets = (not returns_rows or (bool(echoes) and one_row_each)) and set_shape(
        source, one_row_each
    ) is not None
    return Part(
        compiled, arrays.pop(), tuple(reads), returns_rows, echoes, one_row_each, source,
        frozenset(fields), unless_changed, in_sets, absent,
    )  # fmt: skip


def without_absent(part: Part, parameters: dict[str, Any]) -> Part:
    """The part with the element fields no element of its array holds written as NULL, not
    bound: sqlite3 binds None through its adaptation protocol (a key tuple built, a registry
    lookup and a call, then the bind, which takes the connection's mutex), and a dead-lettered
    job's rows leave 13 fields out (its lease, the times it never reached, its result, the
    episode's move): 21k of the store thread's 315k instructions a job (callgrind). The records
    leave their null fields out (`lifecycle_record`, `dead_letter_record`); the keys held are
    gathered in C, and each set of absent fields is compiled once (lru_cache)."""
    array = parameters[part.each] if part.each is not None else None
    if not isinstance(array, Records) or not array.records:
        return part
    absent = part.fields.difference(set().union(*array.records))
    return compile_part(part.source, frozenset(absent)) if absent else part


# A statement run once per element (an INSERT of one VALUES row; an UPDATE of `jobs` keyed by the
# element's id, as ONE_VALUES_ROW and KEYED_WRITE tell) is run as one statement over the elements
# of a batch, IN_SETS at a time: an INSERT with a VALUES row each, an UPDATE ... FROM a VALUES list
# of them; and a field that every element holds alike (see `bound_column`) is bound once, not
# once an element. A nack of failed jobs differs only by its ids, and the executemany of its runs
# paid each run's reset, cursors and statement end and every field's binding (pysqlite binds each
# run's every parameter, copying each text): the dead_letters insert of a batch of 200, 33.8k ->
# 22.8k instructions a row, update_jobs' 57.0k -> 49.2k (callgrind, a savepoint rolled back each
# time). Chunks of 64, 16, 4 and 1: a batch's statements are few and their texts recur (prepared
# once, in sqlite3's statement cache); chunks up to 128 saved no more a job and cost more to make
# and prepare at each start.
IN_SETS = (64, 16, 4, 1)
INSERT_TARGET = re.compile(r"\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(?:\w+\.)?(?P<table>\w+)", re.I)
KEYED_UPDATE = re.compile(
    r"\s*UPDATE\s+\w+\s+SET\b(?:(?!\b(?:SELECT|FROM|WITH)\b).)*?(?=\bWHERE\s+id\s*=\s*:\w+->>id\b)",
    re.I | re.S,
)
NUMBERS = (int, float, bool)
INTEGERS, FLOATS = frozenset({int, bool}), frozenset({float})
# One reading of a statement run per element: (PARAMETER, a call's parameter) or (VALUE or TEXT,
# an element's field).
Reading = tuple[int, str]


def _masked(sql: str) -> str:
    """The statement with each quoted literal's text blanked, its length kept."""
    return re.sub(r"'[^']*'", lambda quoted: "'" + " " * (len(quoted.group(0)) - 2) + "'", sql)


def set_shape(source: str, one_row_each: bool) -> tuple[str, ...] | None:
    """The statement cut where its set form differs (see IN_SETS): ("insert", before its VALUES
    row, the row, after it), ("update", before its WHERE, the WHERE on), or None when it has
    none: an INSERT whose row reads its own table (the rows of one statement are read before
    any is written) or that reads an element's field outside the row; an UPDATE that does not
    change one row a run at most."""
    sql = echoed(source)[0]
    values = ONE_VALUES_ROW.match(sql)
    if values is not None:
        target = INSERT_TARGET.match(sql)
        masked = _masked(sql)
        depth = 0
        for index in range(values.end(), len(masked)):
            depth += {"(": 1, ")": -1}.get(masked[index], 0)
            if depth == 0:
                break
        else:
            return None
        head, row, tail = sql[: values.end()], sql[values.end() : index + 1], sql[index + 1 :]
        if (
            target is None
            or re.search(rf"\b{target.group('table')}\b", _masked(row), re.I) is not None
            or masked[index + 1 :].lstrip().startswith(",")
            or any(match.group(2) for match in ELEMENT_FIELD.finditer(head + tail))
        ):
            return None
        return "insert", head, row, tail
    keyed = KEYED_UPDATE.match(sql)
    if keyed is None or not one_row_each:
        return None
    return "update", sql[: keyed.end()], sql[keyed.end() :]


@lru_cache(maxsize=256)
def set_template(
    source: str, absent: frozenset[str], shared: frozenset[Reading]
) -> tuple[str, str, str, tuple[Reading, ...], tuple[Reading, ...]] | None:
    """The set form of a statement run per element (see IN_SETS) as its text before the rows,
    an element's row (a format string of its readings' positions among its own, `?N` once
    numbered), the text after them, the readings bound once (`?1` on: the call's and the shared
    fields') and those bound for each element (after them, an element's in turn); None when it
    has none (an UPDATE whose elements hold every field alike)."""
    shape = set_shape(source, True)
    assert shape is not None
    once: dict[Reading, int] = {}
    each: dict[Reading, int] = {}
    for match in ELEMENT_FIELD.finditer(echoed(source)[0]):
        name, arrow, field = match.groups()
        if name is None or (arrow is not None and field in absent):
            continue
        reading = (PARAMETER, name) if arrow is None else (TEXT if arrow == "->" else VALUE, field)
        if reading[0] == PARAMETER or reading in shared:
            once.setdefault(reading, len(once) + 1)
        else:
            each.setdefault(reading, len(each))
    if shape[0] == "update" and not each:
        return None

    def substituted(
        text: str, bound_once: Callable[[int], str], element: Callable[[int], str]
    ) -> str:
        """The text with each reading as `bound_once` names a shared one by its position and
        `element` an element's by its index among the element's own."""

        def one(match: re.Match[str]) -> str:
            name, arrow, field = match.groups()
            if name is None:
                return match.group(0)
            if arrow is not None and field in absent:
                return "NULL"
            reading = (
                (PARAMETER, name) if arrow is None else (TEXT if arrow == "->" else VALUE, field)
            )
            if reading in once:
                return bound_once(once[reading])
            return element(each[reading])

        return ELEMENT_FIELD.sub(one, text)

    if shape[0] == "insert":
        _, head, row, tail = shape
        row = substituted(row.replace("{", "{{").replace("}", "}}"), "?{}".format, "?{{{}}}".format)
        return (
            substituted(head, "?{}".format, str),
            row,
            substituted(tail, "?{}".format, str),
            tuple(once),
            tuple(each),
        )
    # The element's own fields as columns of `element`, the shared ones of `shared`, a row of
    # its own: a bound parameter in the WHERE clause, which SQLite's planner weighs against the
    # partial indexes of `jobs`, would have it prepare the statement again at each run (a
    # binding to such a parameter expires it). (Subqueries, not a WITH clause: sqlite3 counts
    # the rows changed, `rowcount`, only of a statement that begins with INSERT, UPDATE, DELETE
    # or REPLACE.)
    _, head, tail = shape
    row = "(" + ", ".join(f"?{{{index}}}" for index in range(len(each))) + ")"
    tables = ") AS element"
    if once:
        tables += ", (VALUES (" + ", ".join(f"?{index}" for index in once.values()) + ")) AS shared"
    named = "shared.column{}".format, lambda index: f"element.column{index + 1}"
    prefix = substituted(head, *named) + " FROM (VALUES "
    suffix = tables + " " + substituted(tail, *named)
    return prefix, row, suffix, tuple(once), tuple(each)


@lru_cache(maxsize=512)
def set_statement(
    source: str, absent: frozenset[str], shared: frozenset[Reading], count: int
) -> tuple[str, tuple[Reading, ...], tuple[Reading, ...]] | None:
    """The set form's text for `count` elements (see `set_template`), the readings bound once
    and those bound for each element, in their order; None when it has none."""
    template = set_template(source, absent, shared)
    if template is None:
        return None
    prefix, row, suffix, once, each = template
    first, size = len(once) + 1, len(each)
    rows = ", ".join(
        row.format(*range(first + at * size, first + (at + 1) * size)) for at in range(count)
    )
    return prefix + rows + suffix, once, each


def _texts(column: list[Any], elements: list[dict[str, Any]], field: str) -> list[Any]:
    """A field's values as `->` reads them: JSON text, 'null' for a null it holds, NULL for a
    field it does not hold."""
    texts = list(map(dump, column))
    if None in column:
        for index, value in enumerate(column):
            if value is None and field in elements[index]:
                texts[index] = "null"
    return texts


def _same_items(first: list[Any], value: Any) -> bool:
    """Whether `value` is a list of the very items of `first`, in order (the same JSON text: a
    batch's failed jobs' error lists each hold the one record they share)."""
    return type(value) is list and len(value) == len(first) and all(map(is_, value, first))


def bound_column(
    reading: Reading, column: list[Any], elements: list[dict[str, Any]]
) -> tuple[bool, Any]:
    """A reading's values (`column`, each element's field) as SQLite binds them: (True, the
    value) when every element's is alike, bound once; else (False, each one's). Alike is the
    same object, or equal values of one type (1, 1.0 and True are not alike: SQLite binds a
    float as a REAL), or equal JSON texts."""
    kind, field = reading
    first = column[0]
    same = all(map(is_, column, repeat(first)))
    if kind == TEXT:
        if (same and first is not None) or (
            type(first) is list and all(map(_same_items, repeat(first), column))
        ):
            return True, dump(first)
        column = _texts(column, elements, field)
        first = column[0]
        return (True, first) if column.count(first) == len(column) else (False, column)
    if same:
        return True, dump(first) if isinstance(first, CONTAINERS) else first
    if column.count(first) == len(column):
        if type(first) is str:
            return True, first
        if type(first) in NUMBERS:
            types = set(map(type, column))
            if types <= INTEGERS or types == FLOATS:
                return True, first
    if not BINDABLE.issuperset(map(type, column)):
        column = [dump(value) if isinstance(value, CONTAINERS) else value for value in column]
    return False, column


def run_in_sets(
    connection: sqlite3.Connection, cursor: sqlite3.Cursor, part: Part, parameters: dict[str, Any]
) -> tuple[list[dict[str, Any]], int] | None:
    """Run a statement of `part.in_sets` over its elements in its set form (see IN_SETS): the
    elements and how many rows it changed; None when there is no set form for them (fewer
    than two; an UPDATE whose elements hold every field alike), nothing run. A statement that
    changes one row a run at most runs in the savepoint ONE_ROW_RUNS, left to the caller."""
    assert part.each is not None
    array = parameters[part.each]
    elements = array.records if isinstance(array, Records) else load(array)
    count = len(elements)
    if count < 2:
        return None
    given = bound(parameters)
    values: dict[Reading, Any] = {}
    columns: dict[Reading, list[Any]] = {}
    for reading in dict.fromkeys(part.reads):
        if reading[0] == PARAMETER:
            values[reading] = given[reading[1]]
            continue
        column = list(map(dict.get, elements, repeat(reading[1])))
        alike, bound_values = bound_column(reading, column, elements)
        if alike:
            values[reading] = bound_values
        else:
            columns[reading] = bound_values
    shared = frozenset(reading for reading in values if reading[0] != PARAMETER)
    plan = set_statement(part.source, part.absent, shared, 1)
    if plan is None:
        return None
    rows = list(zip(*map(columns.__getitem__, plan[2]), strict=True))
    if part.one_row_each:
        connection.execute(ONE_ROW_RUNS)
    changed = done = 0
    for size in IN_SETS:
        while count - done >= size:
            sql, once, _ = set_statement(part.source, part.absent, shared, size) or plan
            cursor.execute(
                sql,
                [*map(values.__getitem__, once), *chain.from_iterable(rows[done : done + size])],
            )
            changed += cursor.rowcount
            done += size
    return elements, changed


def execute_in_sets(
    connection: sqlite3.Connection, cursor: sqlite3.Cursor, part: Part, parameters: dict[str, Any]
) -> Executed | Part:
    """Run a part of `in_sets` in its set form: its echoes and how many rows it changed; or the
    part to run an element at a time, when it has no set form for these elements or, changing
    one row a run at most, some element changed none (then undone: each is run alone, as it is
    echoed)."""
    try:
        done = run_in_sets(connection, cursor, part, parameters)
    except BaseException:
        if part.one_row_each:
            with contextlib.suppress(sqlite3.Error):  # the run's error is the one to raise
                release_one_row_runs(connection, undo=False)
        raise
    if done is None:
        return part
    elements, changed = done
    if not part.one_row_each:
        return [], changed
    release_one_row_runs(connection, undo=changed != len(elements))
    if changed == len(elements):
        return [part.echo(element) for element in elements], changed
    return replace(part, one_row_each=False)


def execute(connection: sqlite3.Connection, part: Part, parameters: dict[str, Any]) -> Executed:
    """Run one part: once, or once per element (all in one call to SQLite when it returns no
    rows; in its set form when it has one, see IN_SETS). Its rows (those of a SELECT or a
    RETURNING clause) and how many rows it changed."""
    part = without_absent(part, parameters)
    cursor = connection.cursor()
    if part.in_sets:
        done = execute_in_sets(connection, cursor, part, parameters)
        if not isinstance(done, Part):
            return done
        part = done
    if part.each is not None and not part.returns_rows:
        cursor.executemany(part.sql, part.bindings(parameters))
        return [], max(cursor.rowcount, 0)
    found: list[dict[str, Any]] = []
    changed = 0
    if part.one_row_each:
        runs = list(part.runs(parameters))
        connection.execute(ONE_ROW_RUNS)
        try:
            cursor.executemany(part.sql, [values for _, values in runs])
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # the run's error is the one to raise
                release_one_row_runs(connection, undo=False)
            raise
        if cursor.rowcount == len(runs):
            release_one_row_runs(connection, undo=False)
            return [part.echo(element) for element, _ in runs], cursor.rowcount
        release_one_row_runs(connection, undo=True)
    if part.echoes:
        for element, values in part.runs(parameters):
            cursor.execute(part.sql, values)
            found.extend(part.echo(element) for _ in range(max(cursor.rowcount, 0)))
            changed += cursor.rowcount
        return found, changed
    for values in part.bindings(parameters):
        cursor.execute(part.sql, values)
        if cursor.description:
            names = [column[0] for column in cursor.description]
            found.extend(dict(zip(names, row, strict=True)) for row in cursor)
        changed += cursor.rowcount
    return found, changed


def release_one_row_runs(connection: sqlite3.Connection, undo: bool) -> None:
    """Leave the savepoint of a one-row-a-run executemany, its changes undone if `undo`. A
    failed run leaves its changes to the caller, as a run at a time would (the unit's savepoint
    undoes them); an error that rolled back the whole transaction took the savepoint with it."""
    if not connection.in_transaction:
        return
    if undo:
        connection.execute("ROLLBACK TO SAVEPOINT one_row_runs")
    connection.execute("RELEASE SAVEPOINT one_row_runs")


def execute_table(
    connection: sqlite3.Connection, part: Part, parameters: dict[str, Any]
) -> tuple[Table | None, int]:
    """Run one part: its columns and its rows as sqlite3 gives them (tuples), or None when it
    returns none, and how many rows it changed. A part run once per element is run as `execute`
    runs it, and must return none. A row made a dict here cost the store's thread (holding the
    GIL) ~6 us of a claimed job's ~20 (its 35 columns), then read once by its reader, by position
    as well."""
    if part.each is not None:
        found, changed = execute(connection, part, parameters)
        if found:
            raise ValueError("a table's rows come from a part run once, not once per element")
        return None, changed
    cursor = connection.execute(part.sql, bound(parameters))
    if cursor.description is None:
        return None, cursor.rowcount
    table = tuple(column[0] for column in cursor.description), cursor.fetchall()
    return table, cursor.rowcount


def changed_by(part: Part, changed: int) -> int:
    """The rows SQLite's changes() counts after `part`, when it is known to count some: a single
    run of an INSERT, UPDATE or DELETE (sqlite3 gives a SELECT's count as -1); else 0, unknown (a
    part run once per element is counted whole, changes() its last run only)."""
    return changed if part.each is None and changed > 0 else 0


def skipped(part: Part, before: int) -> bool:
    """Whether `part` writes nothing for certain: it writes only when the statement before it
    changed no rows (see UNLESS_CHANGED), and that one is known to have changed some."""
    return part.unless_changed and before > 0
