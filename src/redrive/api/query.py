"""Reading query parameters: bounded integers, page/limit forms and opaque cursors."""

from __future__ import annotations

import base64
import re
from typing import Any

from starlette.requests import Request

from redrive.domain.errors import InvalidRequest
from redrive.ports import Page

# A cursor's moment is a millisecond timestamp: digits only, within a signed 64-bit column.
CURSOR_MOMENT = re.compile(r"[0-9]{1,19}")
MAX_MOMENT = 2**63 - 1
MAX_CURSOR_ID = 255


def integer(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as error:
        raise InvalidRequest(f"{name} must be an integer", {"field": name}) from error
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be from {low} to {high}", {"field": name})
    return value


def encode_cursor(discarded_at: int, episode_id: str) -> str:
    return base64.urlsafe_b64encode(f"{discarded_at}:{episode_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """(discarded_at, episode id) of a cursor from encode_cursor; anything else → 400, before
    a moment the database cannot hold or an id it cannot compare reaches a query."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, episode_id = base64.urlsafe_b64decode(padded).decode().split(":", 1)
    except (ValueError, UnicodeDecodeError) as error:
        raise _foreign_cursor() from error
    if CURSOR_MOMENT.fullmatch(moment) is None or int(moment) > MAX_MOMENT:
        raise _foreign_cursor()
    if not episode_id or len(episode_id) > MAX_CURSOR_ID or not episode_id.isprintable():
        raise _foreign_cursor()
    return int(moment), episode_id


def _foreign_cursor() -> InvalidRequest:
    return InvalidRequest("cursor is not one this server issued", {"field": "cursor"})


def limit_page(request: Request, default: int = 50, maximum: int = 1000) -> Page:
    limit = integer(request, "limit", default, 1, maximum)
    cursor = request.query_params.get("cursor")
    if cursor:
        moment, episode_id = decode_cursor(cursor)
        return Page(limit=limit, cursor_at=moment, cursor_id=episode_id)
    return Page(limit=limit, offset=integer(request, "offset", 0, 0, 10_000_000))


def numbered_page(request: Request, default: int = 20, maximum: int = 100) -> tuple[int, int]:
    page = integer(request, "page", 1, 1, 1_000_000)
    per_page = integer(request, "per_page", default, 1, maximum)
    return page, per_page


def query_dict(request: Request) -> dict[str, Any]:
    return dict(request.query_params)
