"""Automatic replay rules: which dead letters a rule takes back, when, and how many times."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from redrive.domain.dead_letter_filter import filter_values, parse_filter
from redrive.domain.durations import format_duration, parse_duration_ms
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
RULE_KEYS = ("name", "filter", "delay", "max_replays", "enabled")
MAX_REPLAYS_LIMIT = 1000


@frozen_dataclass
class ReplayRule:
    id: str
    tenant_id: str
    name: str
    filter: dict[str, Any]
    delay_ms: int
    max_replays: int
    enabled: bool
    created_at: int
    updated_at: int
    replayed_total: int = 0

    def to_document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "filter": self.filter,
            "delay": format_duration(self.delay_ms) if self.delay_ms else "PT0S",
            "max_replays": self.max_replays,
            "enabled": self.enabled,
            "replayed_total": self.replayed_total,
        }


@frozen_dataclass
class RuleChanges:
    """A replay rule as a request gives it: every field optional (a new rule takes defaults for
    what is missing, an update keeps what the rule had)."""

    name: str | None = None
    filter: dict[str, str] | None = None
    delay_ms: int | None = None
    max_replays: int | None = None
    enabled: bool | None = None


def _filter(raw: object, now: int) -> dict[str, str]:
    """The filter in its canonical keys; it must narrow the set (never every dead letter) and
    cannot choose a status (rules replay dead letters)."""
    values = filter_values(raw)
    if not values:
        raise InvalidRequest("filter must name at least one field", {"field": "filter"})
    if "status" in values:
        raise InvalidRequest("a replay rule replays dead letters: no status", {"field": "filter"})
    parse_filter(values, now)  # the same checks as a list or bulk filter
    return values


def _delay(value: object) -> int:
    if not isinstance(value, str):
        raise InvalidRequest("delay must be an ISO 8601 duration such as PT5M", {"field": "delay"})
    return 0 if value in ("PT0S", "P0D") else parse_duration_ms(value, "delay")


def _max_replays(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest("max_replays must be an integer", {"field": "max_replays"})
    if not 1 <= value <= MAX_REPLAYS_LIMIT:
        raise InvalidRequest(
            f"max_replays must be from 1 to {MAX_REPLAYS_LIMIT}", {"field": "max_replays"}
        )
    return value


def parse_rule_changes(raw: object, now: int) -> RuleChanges:
    """A rule body, strictly: unknown keys and wrong types are refused."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the replay rule must be a JSON object", {"field": "body"})
    unknown = sorted(set(raw) - set(RULE_KEYS))
    if unknown:
        raise InvalidRequest(
            f"unknown key {unknown[0]!r}; the keys are {', '.join(RULE_KEYS)}",
            {"field": unknown[0], "allowed": list(RULE_KEYS)},
        )
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not NAME_PATTERN.fullmatch(name)):
        raise InvalidRequest("name must be 1-128 letters, digits, . _ : -", {"field": "name"})
    enabled = raw.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
    return RuleChanges(
        name=name,
        filter=_filter(raw["filter"], now) if "filter" in raw else None,
        delay_ms=_delay(raw["delay"]) if "delay" in raw else None,
        max_replays=_max_replays(raw["max_replays"]) if "max_replays" in raw else None,
        enabled=enabled,
    )


def new_rule(changes: RuleChanges, rule_id: str, tenant_id: str, now: int) -> ReplayRule:
    if changes.name is None:
        raise InvalidRequest("name is required", {"field": "name"})
    if changes.filter is None:
        raise InvalidRequest("filter is required", {"field": "filter"})
    return ReplayRule(
        id=rule_id,
        tenant_id=tenant_id,
        name=changes.name,
        filter=changes.filter,
        delay_ms=changes.delay_ms or 0,
        max_replays=3 if changes.max_replays is None else changes.max_replays,
        enabled=True if changes.enabled is None else changes.enabled,
        created_at=now,
        updated_at=now,
    )


def changed_rule(existing: ReplayRule, changes: RuleChanges, now: int) -> ReplayRule:
    return replace(
        existing,
        name=existing.name if changes.name is None else changes.name,
        filter=existing.filter if changes.filter is None else changes.filter,
        delay_ms=existing.delay_ms if changes.delay_ms is None else changes.delay_ms,
        max_replays=existing.max_replays if changes.max_replays is None else changes.max_replays,
        enabled=existing.enabled if changes.enabled is None else changes.enabled,
        updated_at=now,
    )
