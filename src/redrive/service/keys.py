"""API keys: make one (its secret shown once), list, revoke, and turn a presented key into a key."""

from __future__ import annotations

import secrets

from redrive.domain.caller import SYSTEM, Caller, Permission
from redrive.domain.errors import Duplicate, Forbidden, NotFound, Unauthenticated
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.keys import (
    ID_LENGTH,
    SECRET_LENGTH,
    ApiKey,
    KeyRequest,
    key_hash,
    key_id_of,
    key_text,
    matches,
    new_key_id,
)
from redrive.ports import StoredKey
from redrive.service.runtime import Runtime

# How long a checked key is believed without reading it again. A revocation made through this
# process takes effect at once; one made through another replica, within this time.
KEY_CACHE_MS = 5_000


@frozen_dataclass
class CreatedKey:
    key: ApiKey
    secret: str  # the key itself: shown once, never stored


class KeyService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._checked: dict[str, tuple[StoredKey, int]] = {}

    async def create(self, caller: Caller, request: KeyRequest) -> CreatedKey:
        """A new key for `request.tenant_id`. An admin of one tenant makes keys for that tenant
        only, and never one spanning every tenant; that takes an admin who spans them (or the
        database's owner, through `redrive keys create --database`)."""
        _require_admin(caller)
        if not caller.all_tenants and (
            request.all_tenants or request.tenant_id != caller.tenant_id
        ):
            raise Forbidden(
                "a key of one tenant can make keys for its own tenant only",
                {"tenant": request.tenant_id},
            )
        now = self.runtime.now()
        key_id = new_key_id(secrets.randbelow(36**ID_LENGTH))
        text = key_text(key_id, secrets.randbelow(62**SECRET_LENGTH))
        expires_at = None if request.expires_in_ms is None else now + request.expires_in_ms
        key = ApiKey(
            id=key_id,
            tenant_id=request.tenant_id,
            name=request.name,
            role=request.role,
            all_tenants=request.all_tenants,
            created_at=now,
            created_by=caller.actor,
            expires_at=expires_at,
        )
        async with self.runtime.store.transaction(caller) as transaction:
            if not await transaction.insert_key(key, key_hash(text)):
                raise Duplicate(
                    f"tenant {key.tenant_id!r} already has a live key named {key.name!r}",
                    {"name": key.name, "tenant": key.tenant_id},
                )
        return CreatedKey(key, text)

    async def list(self, caller: Caller, include_revoked: bool = False) -> list[ApiKey]:
        _require_admin(caller)
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_keys(caller.tenant_scope, include_revoked)

    async def revoke(self, caller: Caller, key_id: str) -> ApiKey:
        """Revoke a key (revoking a revoked key changes nothing); another tenant's key is not
        found."""
        _require_admin(caller)
        async with self.runtime.store.transaction(caller) as transaction:
            key = await transaction.revoke_key(key_id, caller.tenant_scope, self.runtime.now())
        if key is None:
            raise NotFound("api_key", key_id)
        self._checked.pop(key_id, None)
        return key

    async def live_key_count(self, caller: Caller) -> int:
        """How many keys could sign in now, across every tenant (serve asks before starting)."""
        _require_admin(caller)
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            return await transaction.count_live_keys(self.runtime.now())

    async def authenticate(self, presented: str) -> ApiKey:
        """The live key `presented` is; Unauthenticated, with the reason, when it is none."""
        key_id = key_id_of(presented)
        now = self.runtime.now()
        stored = await self._stored(key_id, now)
        if stored is None or not matches(presented, stored.key_hash):
            raise Unauthenticated("the API key is not known")
        if stored.key.revoked_at is not None:
            raise Unauthenticated("the API key has been revoked", {"key_id": key_id})
        if not stored.key.live_at(now):
            raise Unauthenticated("the API key has expired", {"key_id": key_id})
        return stored.key

    async def _stored(self, key_id: str, now: int) -> StoredKey | None:
        cached = self._checked.get(key_id)
        if cached is not None and now - cached[1] < KEY_CACHE_MS:
            return cached[0]
        # Reading a key happens before the tenant is known, so it runs as the system.
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            stored = await transaction.key_by_id(key_id)
        if stored is None:
            self._checked.pop(key_id, None)
        else:
            if len(self._checked) > 10_000:
                self._checked.clear()
            self._checked[key_id] = (stored, now)
        return stored


def _require_admin(caller: Caller) -> None:
    if not caller.may(Permission.ADMINISTER):
        raise Forbidden("managing API keys needs the admin role", {"role": caller.role.value})
