"""Incidents in the client: typed results (an incident with its trend when asked, one with its
dead letters) and the operations on them (list, get, acknowledge, resolve with a fix reference,
ignore, reopen, classify), and their root-cause records (read, write, as Markdown)."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from redrive.client.frozen import frozen_dataclass
from redrive.client.models import Page, integer_of, strings_of, text_of
from redrive.client.transport import Connection, document_of, object_of

# Imported where an incident's detail is read (see administration.py): listing incidents and
# recording a root cause, as a redrive does first, need none of the dead letters' classes.
if TYPE_CHECKING:
    from redrive.client.dead_letters import DeadLetter

INCIDENTS = "/ojs/v1/admin/incidents"


@frozen_dataclass
class TrendBucket:
    start: str  # RFC 3339; the bucket ends where the next starts
    count: int


@frozen_dataclass
class IncidentTrend:
    """The dead letters that arrived at an incident per bucket (oldest first) over a window (24h
    in hourly buckets, 7d in daily ones), and the direction of the last bucket against the one
    before (rising, falling, steady, quiet) with a sentence saying so."""

    window: str
    bucket_seconds: int
    buckets: list[TrendBucket]
    total: int
    direction: str
    summary: str

    @property
    def counts(self) -> list[int]:
        return [bucket.count for bucket in self.buckets]

    @classmethod
    def from_document(cls, document: object) -> IncidentTrend | None:
        if not isinstance(document, dict):
            return None
        buckets = document.get("buckets")
        return cls(
            window=str(document.get("window", "")),
            bucket_seconds=integer_of(document, "bucket_seconds"),
            buckets=[
                TrendBucket(str(item.get("start", "")), integer_of(item, "count"))
                for item in (buckets if isinstance(buckets, list) else [])
                if isinstance(item, dict)
            ],
            total=integer_of(document, "total"),
            direction=str(document.get("direction", "")),
            summary=str(document.get("summary", "")),
        )


@frozen_dataclass
class Incident:
    """Dead letters grouped by (tenant, job type, fingerprint): what their errors read, how many
    are dead now and ever, when, where, and the state operators keep."""

    id: str
    tenant_id: str
    type: str
    fingerprint: str
    fingerprint_version: int
    error_type: str | None
    message: str
    state: str
    dead_count: int
    total_count: int
    first_seen_at: str | None
    last_seen_at: str | None
    queues: list[str]
    sample_dead_letter_id: str | None
    fix_reference: str | None
    state_changed_at: str | None
    state_changed_by: str | None
    raw: dict[str, Any] = field(repr=False)
    classification: str = "unclassified"
    trend: IncidentTrend | None = None  # when the request asked for one

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Incident:
        return cls(
            id=str(document.get("id", "")),
            tenant_id=str(document.get("tenant_id", "")),
            type=str(document.get("type", "")),
            fingerprint=str(document.get("fingerprint", "")),
            fingerprint_version=integer_of(document, "fingerprint_version"),
            error_type=text_of(document, "error_type"),
            message=str(document.get("message", "")),
            state=str(document.get("state", "")),
            dead_count=integer_of(document, "dead_count"),
            total_count=integer_of(document, "total_count"),
            first_seen_at=text_of(document, "first_seen_at"),
            last_seen_at=text_of(document, "last_seen_at"),
            queues=strings_of(document.get("queues")),
            sample_dead_letter_id=text_of(document, "sample_dead_letter_id"),
            fix_reference=text_of(document, "fix_reference"),
            state_changed_at=text_of(document, "state_changed_at"),
            state_changed_by=text_of(document, "state_changed_by"),
            raw=document,
            classification=str(document.get("class", "unclassified")),
            trend=IncidentTrend.from_document(document.get("trend")),
        )


@frozen_dataclass
class IncidentDetail:
    """An incident and its newest dead letters (those still dead)."""

    incident: Incident
    dead_letters: list[DeadLetter]

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> IncidentDetail:
        from redrive.client.dead_letters import DeadLetter

        items = document.get("dead_letters")
        return cls(
            Incident.from_document(document_of(document, "incident")),
            [DeadLetter.from_document(item) for item in items if isinstance(item, dict)]
            if isinstance(items, list)
            else [],
        )


@frozen_dataclass
class RootCauseRecord:
    """An incident with its root-cause record (`root_cause` None until someone writes one:
    then `category`, `root_cause`, `fix_reference`, who wrote it and when, in the dict) and the
    seed's Markdown template filled in."""

    incident: Incident
    root_cause: dict[str, Any] | None
    markdown: str

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RootCauseRecord:
        record = document.get("root_cause")
        return cls(
            Incident.from_document(document_of(document, "incident")),
            record if isinstance(record, dict) else None,
            str(document.get("markdown") or ""),
        )


class IncidentOperations(Connection):
    """Listing incidents and changing their state (operators); reading needs a viewer."""

    async def incidents(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        error_type: str | None = None,
        sort: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        trend: str | None = None,
    ) -> Page[Incident]:
        """One page of incidents: the most recent first, or with sort="count" the most dead
        now first. `state` takes one or more states, comma-separated (open, acknowledged,
        resolved, regressed, ignored); `type` may end in * for a prefix; `trend` ("24h" or
        "7d") brings each incident's arrivals per bucket (`Incident.trend`)."""
        values = {
            "state": state, "type": type, "queue": queue, "error_type": error_type,
            "sort": sort, "limit": None if limit is None else str(limit), "cursor": cursor,
            "trend": trend,
        }  # fmt: skip
        params = {key: value for key, value in values.items() if value is not None}
        payload = await self._request("GET", INCIDENTS, params=params)
        pagination = object_of(payload.get("pagination"))
        items = [Incident.from_document(item) for item in payload.get("incidents") or []]
        cursor_after = pagination.get("next_cursor")
        return Page(
            items=items,
            total=None,
            next_cursor=cursor_after if isinstance(cursor_after, str) else None,
            has_more=pagination.get("has_more") is True,
            raw=payload,
        )

    async def get_incident(self, incident_id: str, trend: str | None = None) -> IncidentDetail:
        """One incident with its newest dead letters (and with `trend`, "24h" or "7d", its
        arrivals per bucket)."""
        params = {} if trend is None else {"trend": trend}
        return IncidentDetail.from_document(
            await self._request("GET", f"{INCIDENTS}/{incident_id}", params=params)
        )

    async def acknowledge_incident(self, incident_id: str) -> Incident:
        """Acknowledge an open or regressed incident (409 ConflictError from another state)."""
        return await self._change(incident_id, "acknowledge")

    async def resolve_incident(self, incident_id: str, fix_reference: str) -> Incident:
        """Resolve an incident, naming its fix (a PR, a commit, a deployment); a dead letter
        arriving afterwards regresses it."""
        return await self._change(incident_id, "resolve", {"fix_reference": fix_reference})

    async def ignore_incident(self, incident_id: str) -> Incident:
        """Ignore an incident (its dead letters are still counted)."""
        return await self._change(incident_id, "ignore")

    async def reopen_incident(self, incident_id: str) -> Incident:
        """Reopen an acknowledged, resolved or ignored incident."""
        return await self._change(incident_id, "reopen")

    async def _change(
        self, incident_id: str, action: str, body: dict[str, Any] | None = None
    ) -> Incident:
        payload = await self._request("POST", f"{INCIDENTS}/{incident_id}/{action}", body)
        return Incident.from_document(document_of(payload, "incident"))

    async def root_cause(self, incident_id: str) -> RootCauseRecord:
        """An incident's root-cause record and its Markdown."""
        payload = await self._request("GET", f"{INCIDENTS}/{incident_id}/root-cause")
        return RootCauseRecord.from_document(payload)

    async def record_root_cause(
        self, incident_id: str, category: str, root_cause: str, fix_reference: str | None = None
    ) -> RootCauseRecord:
        """Write an incident's root cause (category: infrastructure, contract, business or
        poison_pill) and the fix applied; a redrive of more than one dead letter needs one with
        a fix reference for every incident it touches."""
        body = {"category": category, "root_cause": root_cause, "fix_reference": fix_reference}
        payload = await self._request("PUT", f"{INCIDENTS}/{incident_id}/root-cause", body)
        return RootCauseRecord.from_document(payload)

    async def classify_incident(self, incident_id: str, classification: str) -> Incident:
        """Set an incident's class: infrastructure, contract, business, poison_pill or
        unclassified."""
        return await self._change(incident_id, "classify", {"class": classification})
