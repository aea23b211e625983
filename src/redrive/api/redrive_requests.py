"""Reading redrive task requests (the start body, the list query) into typed values, strictly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from redrive.api.http import refuse_unknown
from redrive.domain import redrive
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.errors import InvalidRequest
from redrive.domain.incident import check_id
from redrive.domain.redrive import RedriveRequest, check_reason

START_KEYS = ("filter", "incident", "rate_per_minute", "critical", "reason", "limit")
LIST_KEYS = ("state", "limit")
ITEM_KEYS = ("state",)
MAX_LIST = 200


def _positive(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{name} must be a positive integer", {"field": name})
    return value


def start_request(body: object, now: int) -> RedriveRequest:
    """`{"filter": {...}}` or `{"incident": "inc_..."}` (not both naming an incident), with
    `rate_per_minute`, `critical` and `reason`, and `limit`."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    refuse_unknown(body, START_KEYS)
    raw_filter = body.get("filter")
    filters = parse_filter({} if raw_filter is None else raw_filter, now)
    incident = body.get("incident")
    if incident is not None:
        if not isinstance(incident, str):
            raise InvalidRequest("incident must be an incident id", {"field": "incident"})
        if filters.incident_id is not None:
            raise InvalidRequest(
                "name the incident once: incident, or filter.incident", {"field": "incident"}
            )
        filters = replace(filters, incident_id=check_id(incident))
    critical = body.get("critical", False)
    if not isinstance(critical, bool):
        raise InvalidRequest("critical must be true or false", {"field": "critical"})
    return RedriveRequest(
        filters=filters,
        rate_per_minute=_positive(body.get("rate_per_minute"), "rate_per_minute"),
        critical=critical,
        reason=check_reason(body.get("reason")),
        limit=_positive(body.get("limit"), "limit"),
    )


def list_query(values: Mapping[str, str]) -> tuple[str | None, int]:
    """`state` (one of the task states) and `limit` (1 to 200, 50 by default)."""
    refuse_unknown(values, LIST_KEYS, "query parameter")
    state = values.get("state")
    if state is not None and state not in redrive.STATES:
        raise InvalidRequest(
            f"state must be one of {', '.join(redrive.STATES)}", {"field": "state"}
        )
    text = values.get("limit", "50")
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIST:
        raise InvalidRequest(f"limit must be 1 to {MAX_LIST}", {"field": "limit"})
    return state, int(text)


def items_query(values: Mapping[str, str]) -> str | None:
    """A task's items: `state`, one of the item states (pending, moved, skipped, failed,
    succeeded, dead_again), or every item."""
    refuse_unknown(values, ITEM_KEYS, "query parameter")
    state = values.get("state")
    if state is not None and state not in redrive.ITEM_STATES:
        raise InvalidRequest(
            f"state must be one of {', '.join(redrive.ITEM_STATES)}", {"field": "state"}
        )
    return state
