"""A statement's text parameters written in as string constants, for PostgreSQL's simple query."""

from __future__ import annotations

from redrive.store.postgres.store import with_constants


def test_each_placeholder_becomes_its_argument_as_an_escape_string() -> None:
    sql = "SELECT CAST($1 AS jsonb), $2, $10, $1"
    arguments = ('["it\'s"]', "a\\b", "", "", "", "", "", "", "", "$2 ten")
    assert with_constants(sql, arguments) == (
        "SELECT CAST(E'[\"it''s\"]' AS jsonb), E'a\\\\b', E'$2 ten', E'[\"it''s\"]'"
    )


def test_an_argument_that_looks_like_a_placeholder_is_not_replaced_again() -> None:
    assert with_constants("SELECT $1, $2", ("$2", "x")) == "SELECT E'$2', E'x'"
