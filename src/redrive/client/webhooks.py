"""Webhook results as the client returns them: subscriptions, delivery log records, a page."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.client.frozen import frozen_dataclass


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@frozen_dataclass
class WebhookSubscription:
    """A URL subscribed to event types. `secret` is set only in the answer that made or rotated
    it: store it then, it is never shown again."""

    id: str
    url: str
    events: list[str]
    active: bool
    description: str | None
    created_at: str | None
    created_by: str | None
    updated_at: str | None
    previous_secret_until: str | None
    secret: str | None = field(default=None, repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> WebhookSubscription:
        inner = document.get("subscription")
        found: dict[str, Any] = inner if isinstance(inner, dict) else document
        events = found.get("events")
        return cls(
            id=str(found.get("id", "")),
            url=str(found.get("url", "")),
            events=[str(item) for item in events] if isinstance(events, list) else [],
            active=found.get("active") is True,
            description=_text(found.get("description")),
            created_at=_text(found.get("created_at")),
            created_by=_text(found.get("created_by")),
            updated_at=_text(found.get("updated_at")),
            previous_secret_until=_text(found.get("previous_secret_until")),
            secret=_text(found.get("secret")),
        )


@frozen_dataclass
class WebhookDelivery:
    """One attempt of a delivery: `delivery_id` is the message (its webhook-id header, and the id
    of its job on the redrive.webhooks queue); status delivered, failed, dead or skipped."""

    id: str
    subscription_id: str
    delivery_id: str
    event_id: str
    event_type: str
    attempt: int
    status: str
    response_status: int | None
    duration_ms: int
    error: str | None
    time: str

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> WebhookDelivery:
        return cls(
            id=str(document.get("id", "")),
            subscription_id=str(document.get("subscription_id", "")),
            delivery_id=str(document.get("delivery_id", "")),
            event_id=str(document.get("event_id", "")),
            event_type=str(document.get("event_type", "")),
            attempt=_number(document.get("attempt")) or 0,
            status=str(document.get("status", "")),
            response_status=_number(document.get("response_status")),
            duration_ms=_number(document.get("duration_ms")) or 0,
            error=_text(document.get("error")),
            time=str(document.get("time", "")),
        )


@frozen_dataclass
class WebhookDeliveryPage:
    """Delivery log records, newest first; `next_cursor` fetches the page after."""

    deliveries: list[WebhookDelivery]
    next_cursor: str | None

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> WebhookDeliveryPage:
        pagination = document.get("pagination")
        cursor = pagination.get("next_cursor") if isinstance(pagination, dict) else None
        items = document.get("deliveries") or []
        return cls([WebhookDelivery.from_document(item) for item in items], _text(cursor))
