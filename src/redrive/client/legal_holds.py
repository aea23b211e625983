"""Legal holds in the client: the typed hold, and the operations (list, read, place on a job's
dead letters, an incident's or a filter's, release). Held dead letters are never pruned, purged
or deleted until the hold is released; placing and releasing need an admin key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from redrive.client.frozen import frozen_dataclass
from redrive.client.models import text_of
from redrive.client.transport import Connection, document_of

LEGAL_HOLDS = "/ojs/v1/admin/legal-holds"


@frozen_dataclass
class LegalHold:
    """A hold: what it keeps (scope job, incident or filter, and its target), why, who placed
    it when, and who released it when (active until then)."""

    id: str
    tenant_id: str
    scope: str
    reason: str
    created_at: str | None
    created_by: str | None
    active: bool
    released_at: str | None
    released_by: str | None
    job_id: str | None
    incident_id: str | None
    filter: dict[str, str]
    raw: dict[str, Any] = field(repr=False)

    @property
    def target(self) -> str:
        """What it holds, in words: a job id, an incident id or the filter's KEY=VALUE pairs."""
        if self.job_id or self.incident_id:
            return str(self.job_id or self.incident_id)
        return " ".join(f"{key}={value}" for key, value in sorted(self.filter.items()))

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> LegalHold:
        chosen = document.get("filter")
        return cls(
            id=str(document.get("id", "")),
            tenant_id=str(document.get("tenant_id", "")),
            scope=str(document.get("scope", "")),
            reason=str(document.get("reason", "")),
            created_at=text_of(document, "created_at"),
            created_by=text_of(document, "created_by"),
            active=document.get("active") is True,
            released_at=text_of(document, "released_at"),
            released_by=text_of(document, "released_by"),
            job_id=text_of(document, "job_id"),
            incident_id=text_of(document, "incident_id"),
            filter={str(k): str(v) for k, v in chosen.items()} if isinstance(chosen, dict) else {},
            raw=document,
        )


class LegalHoldOperations(Connection):
    """Listing, placing and releasing legal holds."""

    async def legal_holds(self, *, include_released: bool = False) -> list[LegalHold]:
        """The active holds, newest first (with include_released, the released ones too)."""
        params = {"include_released": "true"} if include_released else None
        payload = await self._request("GET", LEGAL_HOLDS, params=params)
        return [LegalHold.from_document(item) for item in payload.get("legal_holds") or []]

    async def get_legal_hold(self, hold_id: str) -> LegalHold:
        payload = await self._request("GET", f"{LEGAL_HOLDS}/{hold_id}")
        return LegalHold.from_document(document_of(payload, "legal_hold"))

    async def place_legal_hold(
        self,
        reason: str,
        *,
        job_id: str | None = None,
        incident_id: str | None = None,
        filter: Mapping[str, str] | None = None,
    ) -> LegalHold:
        """Hold one job's dead letters, an incident's, or those matching a filter of exact
        queue, type and error_type (name exactly one); those to come are held too."""
        body: dict[str, Any] = {"reason": reason}
        if job_id is not None:
            body["job_id"] = job_id
        if incident_id is not None:
            body["incident_id"] = incident_id
        if filter is not None:
            body["filter"] = dict(filter)
        payload = await self._request("POST", LEGAL_HOLDS, body)
        return LegalHold.from_document(document_of(payload, "legal_hold"))

    async def release_legal_hold(self, hold_id: str) -> LegalHold:
        """Release a hold: what it kept is pruned, purged or deleted normally again."""
        payload = await self._request("POST", f"{LEGAL_HOLDS}/{hold_id}/release")
        return LegalHold.from_document(document_of(payload, "legal_hold"))
