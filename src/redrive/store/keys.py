"""API keys and the dashboard sessions started with them, as stored: hashes and records, never a
key or a session token itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.domain.caller import Role
from redrive.ports import KeyStore, SessionStore
from redrive.store.base import SqlBase

# The keys' and sessions' records are imported where one is read: a producer or worker reads none.
if TYPE_CHECKING:
    from redrive.domain.keys import ApiKey
    from redrive.domain.sessions import DashboardSession
    from redrive.ports.access import StoredKey, StoredSession


def _key(row: dict[str, Any]) -> StoredKey:
    # Here, not with the module: an embedded producer or worker reads no key.
    from redrive.domain.keys import ApiKey
    from redrive.ports.access import StoredKey

    key = ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        role=Role(row["role"]),
        all_tenants=bool(row["all_tenants"]),
        created_at=int(row["created_at"]),
        created_by=row["created_by"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )
    return StoredKey(key, row["key_hash"])


class SqlKeys(SqlBase, KeyStore):
    async def insert_key(self, key: ApiKey, key_hash: str) -> bool:
        rows = await self._rows(
            "insert_api_key",
            id=key.id,
            tenant_id=key.tenant_id,
            name=key.name,
            role=key.role.value,
            all_tenants=key.all_tenants,
            key_hash=key_hash,
            created_at=key.created_at,
            created_by=key.created_by,
            expires_at=key.expires_at,
        )
        return bool(rows)

    async def key_by_id(self, key_id: str) -> StoredKey | None:
        rows = await self._rows("select_api_key", id=key_id)
        return _key(rows[0]) if rows else None

    async def list_keys(self, tenant_id: str | None, include_revoked: bool) -> list[ApiKey]:
        rows = await self._rows(
            "select_api_keys", tenant_id=tenant_id, include_revoked=include_revoked
        )
        return [_key(row).key for row in rows]

    async def revoke_key(self, key_id: str, tenant_id: str | None, now: int) -> ApiKey | None:
        rows = await self._rows("revoke_api_key", id=key_id, tenant_id=tenant_id, now=now)
        return _key(rows[0]).key if rows else None

    async def count_live_keys(self, now: int) -> int:
        rows = await self._rows("count_live_api_keys", now=now)
        return int(rows[0]["count"])


class SqlSessions(SqlBase, SessionStore):
    async def insert_session(self, session: DashboardSession, token_hash: str) -> None:
        await self._run(
            "insert_dashboard_session", token_hash=token_hash, tenant_id=session.tenant_id,
            key_id=session.key_id, created_at=session.created_at, expires_at=session.expires_at,
        )  # fmt: skip

    async def session_by_token(self, token_hash: str) -> StoredSession | None:
        rows = await self._rows("select_dashboard_session", token_hash=token_hash)
        if not rows:
            return None
        from redrive.domain.sessions import DashboardSession
        from redrive.ports.access import StoredSession

        row = rows[0]
        key = _key(row).key
        session = DashboardSession(
            key.id, key.tenant_id, int(row["session_created_at"]), int(row["session_expires_at"])
        )
        return StoredSession(session, key)

    async def delete_session(self, token_hash: str) -> None:
        await self._run("delete_dashboard_session", token_hash=token_hash)

    async def delete_ended_sessions(self, now: int) -> int:
        return await self._run("delete_ended_dashboard_sessions", now=now)
