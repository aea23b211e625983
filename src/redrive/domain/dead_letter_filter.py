"""The dead-letter filter: its fields (the one vocabulary every edge derives from) and strict
parsing of it from a query string or a JSON `filter` object."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import fields, replace

from redrive.domain.dead_letter import DEAD, STATUSES
from redrive.domain.durations import parse_timestamp
from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import InvalidRequest
from redrive.domain.fingerprint import FINGERPRINT_PATTERN
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.incident import check_id


@frozen_dataclass
class FilterField:
    """One field of the dead-letter filter as users write it: the key in a query string, a JSON
    `filter` object, a replay rule, the dashboard's URL and `redrive dlq --filter KEY=VALUE`."""

    key: str
    description: str
    aliases: tuple[str, ...] = ()


FILTER_FIELDS: tuple[FilterField, ...] = (
    FilterField("queue", "queue name (exact)"),
    FilterField("type", "job type (exact; ending in * it is a prefix)", ("job_type",)),
    FilterField("error_type", "type of the last error (exact)"),
    FilterField("since", "died at or after: RFC 3339 time or a duration ago such as -PT1H"),
    FilterField("until", "died at or before: RFC 3339 time or a duration ago"),
    FilterField("args_contains", "text the args' JSON contains", ("args",)),
    FilterField(
        "args_match", 'an args path and JSON value: $.customer_id == "c_1"', ("args_path",)
    ),
    FilterField("incident", "incident id (inc_...): the incident's dead letters"),
    FilterField("fingerprint", "error fingerprint (32 hex digits), in every job type"),
    FilterField("status", "episode status: " + ", ".join(STATUSES) + " (default dead)"),
)
FILTER_KEYS = tuple(field.key for field in FILTER_FIELDS)
_CANONICAL = {name: field.key for field in FILTER_FIELDS for name in (field.key, *field.aliases)}


@frozen_dataclass
class DeadLetterFilter:
    """Which dead letters an operation means: every field None means any. The tenant is never
    parsed: the service sets it from the caller (None only for a caller spanning tenants)."""

    queue: str | None = None
    type: str | None = None
    type_prefix: str | None = None
    error_type: str | None = None
    since: int | None = None
    until: int | None = None
    status: str = DEAD
    tenant_id: str | None = None
    args_contains: str | None = None
    args_path: str | None = None
    args_value: str | None = None
    replay_count_below: int | None = None
    incident_id: str | None = None
    fingerprint: str | None = None
    # Replay rules only: leave out dead letters of incidents that need a manual decision
    # (business, poison_pill: domain/root_cause.py MANUAL_CLASSES).
    automatic_only: bool | None = None

    @property
    def is_empty(self) -> bool:
        """True when nothing but the status and the tenant narrows the set."""
        return all(getattr(self, name) is None for name in NARROWING_ATTRIBUTES)

    @property
    def counted_by_tallies(self) -> bool:
        """True when the per-(queue, type, error type) tallies can count the set exactly."""
        return self.status == DEAD and all(
            getattr(self, name) is None
            for name in NARROWING_ATTRIBUTES
            if name not in TALLIED_ATTRIBUTES
        )

    def scoped(self, tenant_scope: str | None) -> DeadLetterFilter:
        return replace(self, tenant_id=tenant_scope)


# The attributes that narrow the set (all but the status and the tenant), and those of them the
# tallies keep counts by; the store's SQL binds every attribute by name.
NARROWING_ATTRIBUTES = tuple(
    item.name for item in fields(DeadLetterFilter) if item.name not in ("status", "tenant_id")
)
TALLIED_ATTRIBUTES = frozenset({"queue", "type", "type_prefix", "error_type"})

# `$.customer_id == "cust_123"`: a path of names and indexes, then a JSON scalar.
ARGS_MATCH = re.compile(
    r"\s*(?P<path>\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d{1,6}\])+)\s*==\s*(?P<value>.+?)\s*"
)


def parse_args_match(text: str) -> tuple[str, str]:
    """(path, JSON text of the value). The path is checked here; both are bound as parameters."""
    match = ARGS_MATCH.fullmatch(text)
    invalid = InvalidRequest(
        'args_match must look like $.customer_id == "cust_123" (a path, ==, a JSON value)',
        {"field": "args_match"},
    )
    if match is None:
        raise invalid
    try:
        value = json.loads(match.group("value"))
    except ValueError as error:
        raise invalid from error
    if isinstance(value, dict | list):
        raise invalid
    return match.group("path"), json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def filter_values(raw: object, prefix: str = "filter.") -> dict[str, str]:
    """The filter's fields by their canonical key, empty strings dropped. Anything but an object
    of known keys with string values is refused, so a mistyped filter never widens an action.
    `prefix` goes before a key in the refusal's `field` ("filter." in a JSON body, "" in a
    query string)."""
    if not isinstance(raw, Mapping):
        raise InvalidRequest("filter must be an object", {"field": prefix.rstrip(".") or "filter"})
    values: dict[str, str] = {}
    for name, value in raw.items():
        key = _CANONICAL.get(name) if isinstance(name, str) else None
        field = f"{prefix}{name}"
        if key is None:
            raise InvalidRequest(
                f"unknown filter key {name!r}; the keys are {', '.join(FILTER_KEYS)}",
                {"field": field, "allowed": list(FILTER_KEYS)},
            )
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise InvalidRequest(f"filter {name} must be a string", {"field": field})
        if "\x00" in value:
            raise InvalidRequest(f"filter {name} must not contain NUL characters", {"field": field})
        if key in values:
            raise InvalidRequest(f"the filter names {key} twice", {"field": field})
        values[key] = value
    return values


def parse_filter(raw: object, now: int, prefix: str = "filter.") -> DeadLetterFilter:
    """The filter a query string or JSON `filter` object means; `type` may end in `*`."""
    values = filter_values(raw, prefix)
    job_type = values.get("type")
    type_prefix = None
    if job_type is not None and job_type.endswith("*"):
        type_prefix, job_type = job_type[:-1], None
    status = values.get("status", DEAD)
    if status not in STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}", {"field": "status"})
    queue, args_match = values.get("queue"), values.get("args_match")
    since, until = values.get("since"), values.get("until")
    args_path, args_value = parse_args_match(args_match) if args_match else (None, None)
    incident, fingerprint = values.get("incident"), values.get("fingerprint")
    if fingerprint is not None and FINGERPRINT_PATTERN.fullmatch(fingerprint) is None:
        raise InvalidRequest("fingerprint must be 32 hex digits", {"field": "fingerprint"})
    return DeadLetterFilter(
        queue=validate_queue_name(queue, "queue") if queue is not None else None,
        type=job_type,
        type_prefix=type_prefix,
        error_type=values.get("error_type"),
        since=parse_timestamp(since, "since", now)[0] if since else None,
        until=parse_timestamp(until, "until", now)[0] if until else None,
        status=status,
        args_contains=values.get("args_contains"),
        args_path=args_path,
        args_value=args_value,
        incident_id=check_id(incident) if incident is not None else None,
        fingerprint=fingerprint,
    )
