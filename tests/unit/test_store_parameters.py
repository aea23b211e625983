"""How the PostgreSQL executor binds a long list of ids: their comma-separated text."""

from __future__ import annotations

import pytest

from redrive.store.postgres.store import PostgresParameters


def test_ids_are_bound_as_their_comma_separated_text() -> None:
    assert PostgresParameters().ids_parameter(["a", "b", "c"]) == "a,b,c"
    assert PostgresParameters().ids_parameter(["a"]) == "a"
    assert PostgresParameters().ids_parameter([]) == ""


def test_an_id_holding_a_comma_is_refused_rather_than_split() -> None:
    with pytest.raises(ValueError, match="comma"):
        PostgresParameters().ids_parameter(["a", "b,c"])
