"""Dashboard sessions: sign in with an API key, find the live key behind a session, sign out."""

from __future__ import annotations

import secrets

from redrive.domain.caller import SYSTEM
from redrive.domain.errors import Unauthenticated
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.keys import ApiKey
from redrive.domain.sessions import (
    TOKEN_BYTES,
    DashboardSession,
    is_token,
    start_session,
    token_hash,
)
from redrive.service.keys import KeyService
from redrive.service.runtime import Runtime


@frozen_dataclass
class StartedSession:
    token: str  # for the browser's cookie only: never stored, never logged
    session: DashboardSession
    key: ApiKey


class SessionService:
    """Sessions are read and written as the system, like keys: which tenant a request acts for
    is known only once its session has been found."""

    def __init__(self, runtime: Runtime, keys: KeyService) -> None:
        self.runtime = runtime
        self.keys = keys

    async def sign_in(self, presented_key: str, previous_token: str | None) -> StartedSession:
        """A new session for the live key `presented_key` is (Unauthenticated, with the reason,
        when it is none). It replaces the browser's previous session, if any; sessions that have
        ended, everyone's, are cleared out on the way."""
        key = await self.keys.authenticate(presented_key)
        now = self.runtime.now()
        token = secrets.token_urlsafe(TOKEN_BYTES)
        session = start_session(key, now, self.runtime.options.session_lifetime_ms)
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            await transaction.delete_ended_sessions(now)
            if previous_token is not None and is_token(previous_token):
                await transaction.delete_session(token_hash(previous_token))
            await transaction.insert_session(session, token_hash(token))
        return StartedSession(token, session, key)

    async def authenticate(self, token: str) -> ApiKey:
        """The key a live session acts as; Unauthenticated, with the reason, when there is none.
        Read afresh on every request, never cached: revoking or expiring the key ends its
        sessions at once, whichever replica revoked it."""
        if not is_token(token):
            raise Unauthenticated("the dashboard session cookie is not a session token")
        now = self.runtime.now()
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            stored = await transaction.session_by_token(token_hash(token))
        if stored is None:
            raise Unauthenticated("the dashboard session is not known: signed out or never begun")
        if not stored.session.live_at(now):
            raise Unauthenticated("the dashboard session has expired")
        if not stored.key.live_at(now):
            raise Unauthenticated(
                "the API key of this dashboard session was revoked or has expired",
                {"key_id": stored.key.id},
            )
        return stored.key

    async def sign_out(self, token: str) -> None:
        """End the session `token` names (nothing happens when there is none)."""
        if is_token(token):
            async with self.runtime.store.transaction(SYSTEM) as transaction:
                await transaction.delete_session(token_hash(token))
