"""Alerts in the client: the typed alert and the operations on alerts (list, get, acknowledge)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.client.frozen import frozen_dataclass
from redrive.client.models import Page, integer_of, text_of
from redrive.client.transport import Connection, document_of, object_of

ALERTS = "/ojs/v1/admin/alerts"


@frozen_dataclass
class Alert:
    """A dead-letter alert: its rule and severity, the queue and key it is about, its state,
    what it counted and when it fired."""

    id: str
    tenant_id: str
    rule: str
    severity: str
    queue: str
    key: str
    state: str
    message: str
    count: int
    first_fired_at: str | None
    last_fired_at: str | None
    acknowledged_at: str | None
    acknowledged_by: str | None
    resolved_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Alert:
        return cls(
            id=str(document.get("id", "")),
            tenant_id=str(document.get("tenant_id", "")),
            rule=str(document.get("rule", "")),
            severity=str(document.get("severity", "")),
            queue=str(document.get("queue", "")),
            key=str(document.get("key", "")),
            state=str(document.get("state", "")),
            message=str(document.get("message", "")),
            count=integer_of(document, "count"),
            first_fired_at=text_of(document, "first_fired_at"),
            last_fired_at=text_of(document, "last_fired_at"),
            acknowledged_at=text_of(document, "acknowledged_at"),
            acknowledged_by=text_of(document, "acknowledged_by"),
            resolved_at=text_of(document, "resolved_at"),
            raw=document,
        )


class AlertOperations(Connection):
    """Listing alerts (viewers) and acknowledging a firing one (operators)."""

    async def alerts(self, *, state: str | None = None, limit: int | None = None) -> Page[Alert]:
        """The newest alerts first; `state` takes firing, acknowledged, resolved or open (both
        of the first two), comma-separated."""
        values = {"state": state, "limit": None if limit is None else str(limit)}
        params = {key: value for key, value in values.items() if value is not None}
        payload = await self._request("GET", ALERTS, params=params)
        pagination = object_of(payload.get("pagination"))
        return Page(
            items=[Alert.from_document(item) for item in payload.get("alerts") or []],
            total=None,
            next_cursor=None,
            has_more=pagination.get("has_more") is True,
            raw=payload,
        )

    async def get_alert(self, alert_id: str) -> Alert:
        return Alert.from_document(
            document_of(await self._request("GET", f"{ALERTS}/{alert_id}"), "alert")
        )

    async def acknowledge_alert(self, alert_id: str) -> Alert:
        """Mark a firing alert seen (409 ConflictError unless it is firing); it resolves when
        its condition clears."""
        payload = await self._request("POST", f"{ALERTS}/{alert_id}/acknowledge")
        return Alert.from_document(document_of(payload, "alert"))
