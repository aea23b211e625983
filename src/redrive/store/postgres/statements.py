"""The named statements of `statements.sql` as asyncpg runs them: `$n` placeholders, in parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from operator import itemgetter
from pathlib import Path
from typing import Any

from redrive.domain.frozen import frozen_dataclass
from redrive.store.statements import ParsedOnUse, load_statements, numbered, split_script

# Filter queries keep custom plans: a generic prepared plan is slow on skewed data. asyncpg
# prepares (and caches) every statement, so the transaction that runs one of these asks the
# server for custom plans (SET LOCAL plan_cache_mode) before it.
CUSTOM_PLANS = frozenset(
    {
        "select_dead_letters",
        "count_dead_letters",
        "move_dead_letters",
        "select_dead_letter_ids",
        "select_jobs",
        "count_jobs",
        "select_events",
        "select_audit_records",
        "select_incidents_recent",
        "select_incidents_by_count",
        # Its probe for dead letters in no incident takes a partial index (status = 'dead').
        "select_unexplained_incidents",
        "select_webhook_deliveries",
        "pin_redrive_items",
        "pin_every_redrive_item",
    }
)

# Reads that must walk an index in its order to stop at their LIMIT: planned without statistics
# (a redrive task's items are pinned just before), the planner took a bitmap scan of every
# matching entry, then sorted them all (a task's next 5,000 of 20,000 pending items: 37 ms,
# 1.7 walking the key). The transaction that runs one turns bitmap scans off (SET LOCAL) first.
# A claim likewise: on a jobs table not analysed since a burst of 100,000 enqueues, each claim of
# 100 read and sorted the whole backlog (79-95 ms, spilling to disk), 1 ms walking jobs_claim.
# promote_due_jobs is here because it opens a fetch's transaction before the claim: the setting
# goes out with its BEGIN, not in a round trip of its own (it walks jobs_due either way).
INDEX_ORDER = frozenset(
    {
        "select_pending_redrive_items",
        "claim_pending_redrive_items",
        "claim_jobs",
        "promote_due_jobs",
    }
)


@frozen_dataclass(slots=True)
class Statement:
    """One SQL statement with `$n` placeholders, the parameter name each number stands for, and
    whether it must be planned for its values each time (see CUSTOM_PLANS) or walk an index in
    its order (see INDEX_ORDER)."""

    sql: str
    names: tuple[str, ...]
    custom_plans: bool
    index_order: bool = False  # see INDEX_ORDER
    # The parameters in `$n` order in one call: an itemgetter takes a third of a
    # comprehension's time for enqueue_job's 19, which a producer runs once a job.
    pick: Callable[[dict[str, Any]], tuple[Any, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pick", _picker(self.names))

    def arguments(self, parameters: dict[str, Any]) -> tuple[Any, ...]:
        return self.pick(parameters)


def _picker(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """`names`' values of a dict, as a tuple (an itemgetter of one name returns the value)."""
    if len(names) > 1:
        return itemgetter(*names)
    return lambda parameters: tuple(parameters[name] for name in names)


def parse_script(name: str, sql: str) -> tuple[Statement, ...]:
    """The statements one named statement holds, in order (most hold one)."""
    parts = []
    for part in split_script(sql):
        text, names = numbered(part)
        parts.append(Statement(text, names, name in CUSTOM_PLANS, name in INDEX_ORDER))
    return tuple(parts)


def load_scripts(path: Path) -> dict[str, tuple[Statement, ...]]:
    """Each named statement of `path` as the statements it holds, parsed on first use."""
    return ParsedOnUse(load_statements(path), parse_script)
