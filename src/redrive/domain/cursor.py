"""Keyset cursors of dead-letter pages: (discarded_at, episode id) as opaque URL-safe text."""

from __future__ import annotations

import base64
import re

from redrive.domain.errors import InvalidRequest

# A cursor's moment is a millisecond timestamp: digits only, within a signed 64-bit column.
CURSOR_MOMENT = re.compile(r"[0-9]{1,19}")
MAX_MOMENT = 2**63 - 1
MAX_CURSOR_ID = 255


def encode_cursor(discarded_at: int, episode_id: str) -> str:
    return base64.urlsafe_b64encode(f"{discarded_at}:{episode_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """(discarded_at, episode id) of a cursor from encode_cursor; anything else is refused
    before a moment the database cannot hold or an id it cannot compare reaches a query."""
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
