"""The dead-letter filter has one vocabulary: every edge, the client and the SQL derive from it,
and a field added to one and not the others fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from redrive.cli import dead_letters as cli_dead_letters
from redrive.client import DeadLetterFilter as ClientFilter
from redrive.dashboard.filters import ListFilter
from redrive.domain.dead_letter_filter import (
    FILTER_FIELDS,
    FILTER_KEYS,
    NARROWING_ATTRIBUTES,
    TALLIED_ATTRIBUTES,
    DeadLetterFilter,
    filter_values,
)
from redrive.store.statements import load_statements, parameter_names

STORE = Path(__file__).parents[2] / "src" / "redrive" / "store"
CANONICAL = {name: field.key for field in FILTER_FIELDS for name in (field.key, *field.aliases)}


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_sql_binds_every_filter_attribute(dialect: str) -> None:
    statements = load_statements(STORE / dialect / "statements.sql")
    for name in ("select_dead_letters", "count_dead_letters", "count_dead_letters_by_queue"):
        bound = parameter_names(statements[name])
        missing = {item.name for item in dataclasses.fields(DeadLetterFilter)} - bound
        assert not missing, f"{dialect} {name} ignores {missing}"


def test_the_client_filter_has_exactly_the_servers_keys() -> None:
    assert tuple(item.name for item in dataclasses.fields(ClientFilter)) == FILTER_KEYS


def test_the_dashboard_form_has_every_key_plus_its_relative_period() -> None:
    form_keys = {item.name for item in dataclasses.fields(ListFilter)} - {"within"}
    assert {CANONICAL[key] for key in form_keys} == set(FILTER_KEYS)
    assert len(form_keys) == len(FILTER_KEYS)


def test_the_cli_filter_keys_and_status_flag_cover_every_key() -> None:
    assert set(cli_dead_letters.FILTER_KEYS) | {"status"} == set(FILTER_KEYS)


def test_the_tallied_attributes_narrow_the_set() -> None:
    assert set(NARROWING_ATTRIBUTES) >= TALLIED_ATTRIBUTES


@pytest.mark.parametrize("key", FILTER_KEYS)
def test_every_key_and_alias_parses(key: str) -> None:
    aliases = next(field.aliases for field in FILTER_FIELDS if field.key == key)
    for name in (key, *aliases):
        assert filter_values({name: "x"}) == {key: "x"}
