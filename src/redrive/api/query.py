"""Reading query parameters: bounded integers and the page/limit forms (cursor included)."""

from __future__ import annotations

from starlette.requests import Request

from redrive.domain.cursor import decode_cursor
from redrive.domain.errors import InvalidRequest
from redrive.ports import Page


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
