"""The key, session and webhook subscription records as the store keeps them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redrive.domain.frozen import frozen_dataclass

if TYPE_CHECKING:
    from redrive.domain.keys import ApiKey
    from redrive.domain.sessions import DashboardSession
    from redrive.domain.webhooks import SealedSecrets, Subscription


@frozen_dataclass
class StoredKey:
    """A key's record and the hash of its secret (the hash never leaves the key service)."""

    key: ApiKey
    key_hash: str


@frozen_dataclass
class StoredSession:
    """A dashboard session and its key as the key is now (revoked or expired ones included)."""

    session: DashboardSession
    key: ApiKey


@frozen_dataclass
class StoredSubscription:
    """A webhook subscription and its sealed secrets (opened only to sign a delivery)."""

    subscription: Subscription
    secrets: SealedSecrets
