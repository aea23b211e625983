"""Statements a transaction leaves for its end (`run_at_commit`, the tallies' and incidents'
counts): on PostgreSQL sent with the COMMIT in one simple query, their text parameters written
as constants. On both stores their values arrive whole, and one that fails undoes the unit."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, cast

import asyncpg
import pytest

from redrive.ports import Store
from redrive.store.base import SqlBase
from tests.support.callers import CALLER

pytestmark = pytest.mark.anyio

# Quotes, backslashes (an escape string's own), placeholders' look-alikes, a statement's end.
AWKWARD = ["it's", "back\\slash\\", "E'quoted'", "$1 and $2", "naïve ☃", "x'; COMMIT; --"]


def tally(queue: str, text: str, delta: int) -> dict[str, Any]:
    return {
        "tenant_id": CALLER.tenant_id, "queue": queue, "type": text, "error_type": text,
        "delta": delta,
    }  # fmt: skip


async def tallies(store: Store) -> list[tuple[str, str, str, int]]:
    async with store.transaction(CALLER) as transaction:
        rows = await cast(SqlBase, transaction).executor.rows(
            "select_dead_letter_tallies", {"tenant_id": CALLER.tenant_id}
        )
    return sorted((row["queue"], row["type"], row["error_type"], row["count"]) for row in rows)


async def test_counts_left_for_the_commit_keep_awkward_text_whole(store: Store) -> None:
    """Left alone in their transaction (no statement before them: BEGIN goes with them)."""
    rows = [tally(f"q{index}", text, index + 1) for index, text in enumerate(AWKWARD)]
    async with store.transaction(CALLER) as transaction:
        await cast(SqlBase, transaction).executor.run_at_commit(
            "adjust_dead_letter_tallies", {"rows": json.dumps(rows)}
        )
    expected = [(f"q{index}", text, text, index + 1) for index, text in enumerate(AWKWARD)]
    assert await tallies(store) == sorted(expected)


async def test_a_count_left_for_the_commit_that_fails_undoes_the_unit(store: Store) -> None:
    """The statement that ran before it is undone with it, and the store goes on."""
    with pytest.raises((asyncpg.PostgresError, sqlite3.Error)):
        async with store.transaction(CALLER) as transaction:
            executor = cast(SqlBase, transaction).executor
            await executor.run(
                "adjust_dead_letter_tallies", {"rows": json.dumps([tally("q", "t", 1)])}
            )
            await executor.run_at_commit("adjust_dead_letter_tallies", {"rows": "[not json"})
    assert await tallies(store) == []
    async with store.transaction(CALLER) as transaction:
        await cast(SqlBase, transaction).executor.run_at_commit(
            "adjust_dead_letter_tallies", {"rows": json.dumps([tally("q", "t", 2)])}
        )
    assert await tallies(store) == [("q", "t", "t", 2)]
