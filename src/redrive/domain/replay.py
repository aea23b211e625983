"""Automatic replay rules: which dead letters a rule takes back, when, and how many times."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from redrive.domain.durations import format_duration, parse_duration_ms
from redrive.domain.errors import InvalidRequest

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
FILTER_KEYS = frozenset(
    {"queue", "type", "job_type", "error_type", "since", "until", "args_contains", "args",
     "args_match", "args_path"}
)  # fmt: skip
MAX_REPLAYS_LIMIT = 1000


@dataclass(frozen=True)
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


def _filter(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict) or not raw:
        raise InvalidRequest("filter must be a non-empty object", {"field": "filter"})
    unknown = set(raw) - FILTER_KEYS
    if unknown:
        raise InvalidRequest(
            f"unknown filter keys: {', '.join(sorted(unknown))}", {"field": "filter"}
        )
    return dict(raw)


def _delay(raw: dict[str, Any], default: int) -> int:
    if "delay" not in raw:
        return default
    value = raw["delay"]
    if not isinstance(value, str):
        raise InvalidRequest("delay must be an ISO 8601 duration such as PT5M", {"field": "delay"})
    return 0 if value in ("PT0S", "P0D") else parse_duration_ms(value, "delay")


def parse_rule(
    raw: object, rule_id: str, tenant_id: str, now: int, existing: ReplayRule | None = None
) -> ReplayRule:
    """A new rule, or `existing` with the fields `raw` changes."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the replay rule must be a JSON object", {"field": "body"})
    name = raw.get("name", existing.name if existing else None)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidRequest("name must be 1-128 letters, digits, . _ : -", {"field": "name"})
    filters = _filter(raw.get("filter")) if "filter" in raw or not existing else existing.filter
    max_replays = raw.get("max_replays", existing.max_replays if existing else 3)
    if isinstance(max_replays, bool) or not isinstance(max_replays, int):
        raise InvalidRequest("max_replays must be an integer", {"field": "max_replays"})
    if not 1 <= max_replays <= MAX_REPLAYS_LIMIT:
        raise InvalidRequest(
            f"max_replays must be from 1 to {MAX_REPLAYS_LIMIT}", {"field": "max_replays"}
        )
    enabled = raw.get("enabled", existing.enabled if existing else True)
    if not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
    return ReplayRule(
        id=rule_id,
        tenant_id=tenant_id,
        name=name,
        filter=filters,
        delay_ms=_delay(raw, existing.delay_ms if existing else 0),
        max_replays=max_replays,
        enabled=enabled,
        created_at=existing.created_at if existing else now,
        updated_at=now,
        replayed_total=existing.replayed_total if existing else 0,
    )
