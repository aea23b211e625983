"""Reading query parameters: bounded integers, page/limit forms and opaque cursors."""

from __future__ import annotations

import base64
from typing import Any

from starlette.requests import Request

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


def encode_cursor(discarded_at: int, episode_id: str) -> str:
    return base64.urlsafe_b64encode(f"{discarded_at}:{episode_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, episode_id = base64.urlsafe_b64decode(padded).decode().split(":", 1)
        return int(moment), episode_id
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidRequest("cursor is not one this server issued", {"field": "cursor"}) from error


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
