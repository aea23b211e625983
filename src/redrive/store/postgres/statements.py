"""The named statements of `statements.sql` as asyncpg runs them: `$n` placeholders, in parts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        "select_webhook_deliveries",
        "pin_redrive_items",
    }
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement with `$n` placeholders, the parameter name each number stands for, and
    whether it must be planned for its values each time (see CUSTOM_PLANS)."""

    sql: str
    names: tuple[str, ...]
    custom_plans: bool

    def arguments(self, parameters: dict[str, Any]) -> list[Any]:
        return [parameters[name] for name in self.names]


def parse_script(name: str, sql: str) -> tuple[Statement, ...]:
    """The statements one named statement holds, in order (most hold one)."""
    parts = []
    for part in split_script(sql):
        text, names = numbered(part)
        parts.append(Statement(text, names, name in CUSTOM_PLANS))
    return tuple(parts)


def load_scripts(path: Path) -> dict[str, tuple[Statement, ...]]:
    """Each named statement of `path` as the statements it holds, parsed on first use."""
    return ParsedOnUse(load_statements(path), parse_script)
