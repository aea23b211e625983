"""Webhook subscriptions as stored (their secrets sealed, never in clear) and the delivery log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.ports import WebhookStore
from redrive.store.base import SqlBase
from redrive.store.codec import dump, load

# Imported where the delivery log is read, and the subscriptions where one is read: a producer
# reads neither.
if TYPE_CHECKING:
    from redrive.domain.webhook_delivery import DeliveryQuery, DeliveryRecord
    from redrive.domain.webhooks import Subscription
    from redrive.ports.access import StoredSubscription


def _stored(row: dict[str, Any]) -> StoredSubscription:
    from redrive.domain.webhooks import SealedSecrets, Subscription
    from redrive.ports.access import StoredSubscription

    subscription = Subscription(
        id=row["id"],
        tenant_id=row["tenant_id"],
        url=row["url"],
        events=tuple(load(row["events"])),
        active=bool(row["active"]),
        description=row["description"],
        created_at=int(row["created_at"]),
        created_by=row["created_by"],
        updated_at=int(row["updated_at"]),
        previous_secret_until=row["previous_secret_until"],
    )
    return StoredSubscription(
        subscription, SealedSecrets(row["secret_sealed"], row["previous_secret_sealed"])
    )


def _parameters(stored: StoredSubscription) -> dict[str, Any]:
    subscription, secrets = stored.subscription, stored.secrets
    return {
        "id": subscription.id,
        "tenant_id": subscription.tenant_id,
        "url": subscription.url,
        "events": dump(list(subscription.events)),
        "active": subscription.active,
        "description": subscription.description,
        "secret_sealed": secrets.current,
        "previous_secret_sealed": secrets.previous,
        "previous_secret_until": subscription.previous_secret_until,
        "created_at": subscription.created_at,
        "created_by": subscription.created_by,
        "updated_at": subscription.updated_at,
    }


def _record(row: dict[str, Any]) -> DeliveryRecord:
    from redrive.domain.webhook_delivery import DeliveryRecord, DeliveryStatus

    return DeliveryRecord(
        id=row["id"],
        tenant_id=row["tenant_id"],
        subscription_id=row["subscription_id"],
        job_id=row["job_id"],
        event_id=row["event_id"],
        event_type=row["event_type"],
        attempt=int(row["attempt"]),
        status=DeliveryStatus(row["status"]),
        response_status=row["response_status"],
        duration_ms=int(row["duration_ms"]),
        error=row["error"],
        time=int(row["time"]),
    )


class SqlWebhooks(SqlBase, WebhookStore):
    async def insert_subscription(self, stored: StoredSubscription) -> None:
        await self._run("insert_webhook_subscription", **_parameters(stored))

    async def update_subscription(self, stored: StoredSubscription) -> bool:
        parameters = _parameters(stored)
        del parameters["created_at"], parameters["created_by"]
        return bool(await self._rows("update_webhook_subscription", **parameters))

    async def get_subscription(
        self, subscription_id: str, tenant_id: str | None
    ) -> StoredSubscription | None:
        rows = await self._rows(
            "select_webhook_subscription", id=subscription_id, tenant_id=tenant_id
        )
        return _stored(rows[0]) if rows else None

    async def list_subscriptions(self, tenant_id: str | None) -> list[Subscription]:
        rows = await self._rows("select_webhook_subscriptions", tenant_id=tenant_id)
        return [_stored(row).subscription for row in rows]

    async def any_active_subscription(self) -> bool:
        rows = await self._rows("any_active_webhook_subscription")
        return bool(rows[0]["active"])

    async def delete_subscription(self, subscription_id: str, tenant_id: str | None) -> bool:
        rows = await self._rows(
            "delete_webhook_subscription", id=subscription_id, tenant_id=tenant_id
        )
        return bool(rows)

    async def add_delivery_record(self, record: DeliveryRecord) -> None:
        await self._run(
            "insert_webhook_delivery",
            id=record.id, tenant_id=record.tenant_id, subscription_id=record.subscription_id,
            job_id=record.job_id, event_id=record.event_id, event_type=record.event_type,
            attempt=record.attempt, status=record.status.value,
            response_status=record.response_status, duration_ms=record.duration_ms,
            error=record.error, time=record.time,
        )  # fmt: skip

    async def list_delivery_records(self, query: DeliveryQuery) -> list[DeliveryRecord]:
        rows = await self._rows(
            "select_webhook_deliveries",
            tenant_id=query.tenant_id,
            subscription_id=query.subscription_id,
            status=None if query.status is None else query.status.value,
            cursor_at=query.cursor_at,
            cursor_id=query.cursor_id,
            limit=query.limit,
        )
        return [_record(row) for row in rows]

    async def delete_delivery_records_before(self, before: int, limit: int) -> int:
        return await self._run("delete_webhook_deliveries_before", before=before, limit=limit)
