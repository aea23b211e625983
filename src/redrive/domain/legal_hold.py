"""Legal holds (seed 003 §7.2): what a hold keeps, which dead letters it covers, and strict parsing
of a request to place one. Held dead letters are never pruned, purged or deleted until released."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from redrive.domain.dead_letter import DeadLetter
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.incident import ID_PATTERN

JOB = "job"
INCIDENT = "incident"
FILTER = "filter"
FILTER_KEYS = ("queue", "type", "error_type")
REQUEST_KEYS = ("job_id", "incident_id", "filter", "reason")
MAX_REASON = 1000
MAX_NAME = 255


@frozen_dataclass
class LegalHold:
    """A hold on one job's dead letters (scope job), an incident's (incident), or every dead
    letter matching exact queue, type and error type (filter; None is any), with who placed it,
    why and when, and who released it when."""

    id: str
    tenant_id: str
    scope: str
    reason: str
    created_at: int
    created_by: str
    job_id: str | None = None
    incident_id: str | None = None
    queue: str | None = None
    type: str | None = None
    error_type: str | None = None
    released_at: int | None = None
    released_by: str | None = None

    @property
    def active(self) -> bool:
        return self.released_at is None

    def covers(self, dead: DeadLetter) -> bool:
        """Whether this hold, while active, keeps the dead letter (the statements' `not_held`
        fragment decides the same, set-based)."""
        if not self.active or self.tenant_id != dead.job.tenant_id:
            return False
        if self.scope == JOB:
            return self.job_id == dead.job_id
        if self.scope == INCIDENT:
            return self.incident_id is not None and self.incident_id == dead.incident_id
        wanted = (self.queue, self.type, self.error_type)
        found = (dead.job.queue, dead.job.type, dead.error_type)
        return all(want is None or want == value for want, value in zip(wanted, found, strict=True))

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "scope": self.scope,
            "reason": self.reason,
            "created_at": format_timestamp(self.created_at),
            "created_by": self.created_by,
            "active": self.active,
            "released_at": None if self.released_at is None else format_timestamp(self.released_at),
            "released_by": self.released_by,
        }
        if self.scope == JOB:
            document["job_id"] = self.job_id
        elif self.scope == INCIDENT:
            document["incident_id"] = self.incident_id
        else:
            document["filter"] = {
                key: value
                for key, value in zip(
                    FILTER_KEYS, (self.queue, self.type, self.error_type), strict=True
                )
                if value is not None
            }
        return document


@frozen_dataclass
class HoldRequest:
    """What to hold, as a request names it (exactly one target), and why."""

    scope: str
    reason: str
    job_id: str | None = None
    incident_id: str | None = None
    queue: str | None = None
    type: str | None = None
    error_type: str | None = None


class LegalHeld(Conflict):
    """A dead letter under a legal hold cannot be deleted (409), whoever asks."""

    code = "legal_hold"
    hint = "release the legal hold the details name first (an admin may), then try again"

    def __init__(self, job_id: str, hold_ids: list[str]) -> None:
        super().__init__(
            f"dead letter {job_id!r} is under legal hold {', '.join(hold_ids)}",
            {"job_id": job_id, "legal_holds": hold_ids},
        )


def _name(raw: dict[str, Any], key: str, field: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
        raise InvalidRequest(f"{field} must be a string of 1 to {MAX_NAME} characters",
                             {"field": field})  # fmt: skip
    return value


def parse_hold_request(raw: object) -> HoldRequest:
    """`{"job_id" | "incident_id" | "filter": ..., "reason": "..."}`; a filter names one or more
    of queue, type and error_type, matched exactly."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the legal hold must be a JSON object", {"field": "body"})
    unknown = sorted(set(raw) - set(REQUEST_KEYS))
    if unknown:
        raise InvalidRequest(f"unknown legal hold field {unknown[0]!r}", {"field": unknown[0]})
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidRequest(f"reason must be a non-empty string of at most {MAX_REASON} "
                             "characters", {"field": "reason"})  # fmt: skip
    targets = [key for key in ("job_id", "incident_id", "filter") if key in raw]
    if len(targets) != 1:
        raise InvalidRequest("name exactly one of job_id, incident_id and filter",
                             {"field": targets[1] if targets else "job_id"})  # fmt: skip
    if targets == ["job_id"]:
        return HoldRequest(JOB, reason, job_id=_name(raw, "job_id", "job_id"))
    if targets == ["incident_id"]:
        incident = raw["incident_id"]
        if not isinstance(incident, str) or ID_PATTERN.fullmatch(incident) is None:
            raise InvalidRequest("incident_id must be an incident id (inc_ and 24 hex digits)",
                                 {"field": "incident_id"})  # fmt: skip
        return HoldRequest(INCIDENT, reason, incident_id=incident)
    chosen = raw["filter"]
    if not isinstance(chosen, dict) or not chosen:
        raise InvalidRequest("filter must be an object naming queue, type or error_type",
                             {"field": "filter"})  # fmt: skip
    extra = sorted(set(chosen) - set(FILTER_KEYS))
    if extra:
        field = f"filter.{extra[0]}"
        raise InvalidRequest(f"a legal hold's filter matches only queue, type and error_type "
                             f"exactly, not {extra[0]!r}", {"field": field})  # fmt: skip
    values = {key: _name(chosen, key, f"filter.{key}") for key in FILTER_KEYS if key in chosen}
    if "queue" in values:
        validate_queue_name(values["queue"], "filter.queue")
    return HoldRequest(FILTER, reason, **values)


def with_holds(holds: list[LegalHold], items: list[DeadLetter]) -> list[DeadLetter]:
    """The dead letters, each naming the active holds that cover it."""
    if not holds:
        return items
    return [
        replace(dead, legal_holds=tuple(hold.id for hold in holds if hold.covers(dead)))
        for dead in items
    ]
