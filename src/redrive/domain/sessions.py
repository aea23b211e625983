"""Dashboard sessions: what is kept of one (never its token), how long it lasts, its hash."""

from __future__ import annotations

import hashlib
import re

from redrive.domain.frozen import frozen_dataclass
from redrive.domain.keys import ApiKey

TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 random bits
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{43}$")


@frozen_dataclass
class DashboardSession:
    """A browser signed in with an API key. The token lives only in the browser's cookie; the
    store keeps its hash, the key (whose tenant and role the session acts with) and the end."""

    key_id: str
    tenant_id: str
    created_at: int
    expires_at: int

    def live_at(self, now: int) -> bool:
        return now < self.expires_at


def start_session(key: ApiKey, now: int, lifetime_ms: int) -> DashboardSession:
    """A session of `key` from `now`: it lasts `lifetime_ms`, and never past the key's expiry."""
    ends = now + lifetime_ms
    if key.expires_at is not None:
        ends = min(ends, key.expires_at)
    return DashboardSession(key.id, key.tenant_id, now, ends)


def is_token(value: str) -> bool:
    """Whether `value` has the shape of a session token (anything else is not looked up)."""
    return TOKEN_PATTERN.fullmatch(value) is not None


def token_hash(token: str) -> str:
    """What is stored instead of the token: a plain SHA-256, as for API keys (the token carries
    256 random bits, so a slow password hash would have nothing to stretch)."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()
