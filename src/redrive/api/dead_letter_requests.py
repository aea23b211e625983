"""Reading dead-letter requests (list queries, bulk bodies, retry overrides) into typed values.

Strict: an unknown key or a wrong type is a 400 naming it, so a mistyped filter can never widen
a bulk retry or purge to the whole dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from redrive.api.http import refuse_unknown
from redrive.domain.dead_letter import RetryOverride, parse_override
from redrive.domain.dead_letter_filter import DeadLetterFilter, parse_filter
from redrive.domain.errors import InvalidRequest
from redrive.domain.root_cause import check_reason
from redrive.service.dead_letters import BulkRequest, RetryIntent

BULK_KEYS = ("filter", "confirm", "dry_run", "limit")
KEYSET_PAGING = frozenset({"limit", "offset", "cursor"})
NUMBERED_PAGING = frozenset({"page", "per_page"})


def query_values(request: Request) -> dict[str, str]:
    """The query string as one value per key; a key given twice is refused, not half-read."""
    values: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in values:
            raise InvalidRequest(f"query parameter {key} is given twice", {"field": key})
        values[key] = value
    return values


def list_filter(request: Request, now: int, paging: frozenset[str]) -> DeadLetterFilter:
    """The filter of a list request: every query parameter but the paging ones."""
    query = query_values(request)
    return parse_filter({k: v for k, v in query.items() if k not in paging}, now, prefix="")


def _flag(value: object, name: str) -> bool:
    """A JSON boolean, or from a query string the words true and false."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise InvalidRequest(f"{name} must be true or false", {"field": name})


def dry_run_query(request: Request) -> bool:
    """`?dry_run=true` on a single retry: show what it would requeue, move nothing."""
    unknown = sorted(set(request.query_params) - {"dry_run"})
    if unknown:
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; the only one is dry_run",
            {"field": unknown[0]},
        )
    return _flag(request.query_params.get("dry_run", "false"), "dry_run")


def _limit(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)  # from a query string
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest("limit must be a positive integer", {"field": "limit"})
    return value


def _bulk_object(body: object) -> Mapping[str, object]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    refuse_unknown(body, BULK_KEYS)
    return body


def bulk_request(body: object, now: int) -> BulkRequest:
    """A bulk retry or purge body: `{"filter": {...}, "confirm": true, "dry_run", "limit"}`."""
    values = _bulk_object(body)
    raw_filter = values.get("filter")
    return BulkRequest(
        filters=parse_filter({} if raw_filter is None else raw_filter, now),
        confirm=_flag(values.get("confirm", False), "confirm"),
        dry_run=_flag(values.get("dry_run", False), "dry_run"),
        limit=_limit(values.get("limit")),
    )


def purge_request(request: Request, body: object, now: int) -> BulkRequest:
    """A purge: the filter and the flags from the query string, the JSON body, or both (a key
    given in both places is refused rather than one silently winning)."""
    values = dict(_bulk_object(body))
    raw_filter = values.get("filter")
    body_filter = {} if raw_filter is None else raw_filter
    if not isinstance(body_filter, dict):
        raise InvalidRequest("filter must be an object", {"field": "filter"})
    merged_filter: dict[str, object] = dict(body_filter)
    for key, value in query_values(request).items():
        target = values if key in BULK_KEYS and key != "filter" else merged_filter
        if key in target:
            raise InvalidRequest(f"{key} is given in both the query and the body", {"field": key})
        target[key] = value
    return BulkRequest(
        filters=parse_filter(merged_filter, now, prefix=""),
        confirm=_flag(values.get("confirm", False), "confirm"),
        dry_run=_flag(values.get("dry_run", False), "dry_run"),
        limit=_limit(values.get("limit")),
    )


INTENT_KEYS = ("reason", "force")


def retry_request(raw: object) -> tuple[RetryOverride, RetryIntent]:
    """A single retry's body: the override (at the top level or under `override`), and why:
    `reason` (text, kept in the audit log) and `force` (true: an admin overrides a poison
    pill's refusal; needs a reason)."""
    if not isinstance(raw, dict):
        return parse_override(raw), RetryIntent()
    rest = {key: value for key, value in raw.items() if key not in INTENT_KEYS}
    reason = None if raw.get("reason") is None else check_reason(raw["reason"])
    force = raw.get("force", False)
    if not isinstance(force, bool):
        raise InvalidRequest("force must be true or false", {"field": "force"})
    return parse_override(rest or None), RetryIntent(reason, force)
