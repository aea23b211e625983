"""Redrive tasks in the client: the typed task and its items, and the operations on it (start
by filter or incident, list, get, its items by state, pause, resume, cancel)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.client.frozen import frozen_dataclass
from redrive.client.models import integer_of, strings_of, text_of
from redrive.client.requests import DeadLetterFilter, filter_params
from redrive.client.transport import Connection, document_of, object_of

REDRIVES = "/ojs/v1/dead-letter/redrives"


@frozen_dataclass
class RedriveFailure:
    """Why a task stopped (and the job it stopped at), or why one of its items stayed dead."""

    code: str
    message: str
    job_id: str | None = None

    @classmethod
    def from_document(cls, document: object) -> RedriveFailure | None:
        if not isinstance(document, dict):
            return None
        return cls(
            code=str(document.get("code", "")),
            message=str(document.get("message", "")),
            job_id=text_of(document, "job_id"),
        )


@frozen_dataclass
class RedriveItem:
    """One dead letter a task pinned: its state, and the error that kept a failed one dead."""

    dead_letter_id: str
    job_id: str
    queue: str
    state: str
    error: RedriveFailure | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RedriveItem:
        return cls(
            dead_letter_id=str(document.get("dead_letter_id", "")),
            job_id=str(document.get("job_id", "")),
            queue=str(document.get("queue", "")),
            state=str(document.get("state", "")),
            error=RedriveFailure.from_document(document.get("error")),
            raw=document,
        )


@frozen_dataclass
class RedriveTask:
    """A paced redrive: what it pinned and how far it got, and how its redriven jobs ended."""

    id: str
    state: str
    incident_id: str | None
    rate_per_minute: int
    critical: bool
    reason: str | None
    created_by: str
    created_at: str | None
    finished_at: str | None
    queues: list[str]
    to_move: int
    moved: int
    skipped: int
    pending: int
    succeeded: int
    dead_again: int
    success_rate: float | None
    raw: dict[str, Any] = field(repr=False)
    failed: int = 0  # dead letters an upcaster refused (they stay dead)
    failure: RedriveFailure | None = None  # a failed task: why it stopped

    @property
    def finished(self) -> bool:
        return self.state in ("completed", "cancelled", "failed")

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RedriveTask:
        counts = object_of(document.get("counts"))
        rate = document.get("success_rate")
        return cls(
            id=str(document.get("id", "")),
            state=str(document.get("state", "")),
            incident_id=text_of(document, "incident_id"),
            rate_per_minute=integer_of(document, "rate_per_minute"),
            critical=document.get("critical") is True,
            reason=text_of(document, "reason"),
            created_by=str(document.get("created_by", "")),
            created_at=text_of(document, "created_at"),
            finished_at=text_of(document, "finished_at"),
            queues=strings_of(document.get("queues")),
            to_move=integer_of(counts, "to_move"),
            moved=integer_of(counts, "moved"),
            skipped=integer_of(counts, "skipped"),
            pending=integer_of(counts, "pending"),
            succeeded=integer_of(counts, "succeeded"),
            dead_again=integer_of(counts, "dead_again"),
            success_rate=float(rate) if isinstance(rate, int | float) else None,
            raw=document,
            failed=integer_of(counts, "failed"),
            failure=RedriveFailure.from_document(document.get("failure")),
        )


class RedriveOperations(Connection):
    """Starting and steering redrive tasks (operators; a critical rate needs an admin)."""

    async def start_redrive(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        incident: str | None = None,
        rate_per_minute: int | None = None,
        critical: bool = False,
        reason: str | None = None,
        limit: int | None = None,
    ) -> RedriveTask:
        """Start a paced redrive of the dead letters matching `filter` (or of `incident`) now;
        409 ConflictError when one of their queues has a task running (its id in details)."""
        body: dict[str, Any] = {}
        if filter is not None:
            body["filter"] = filter_params(filter)
        optional = {"incident": incident, "rate_per_minute": rate_per_minute,
                    "reason": reason, "limit": limit}  # fmt: skip
        body.update({key: value for key, value in optional.items() if value is not None})
        if critical:
            body["critical"] = True
        return await self._task("POST", REDRIVES, body)

    async def redrives(
        self, *, state: str | None = None, limit: int | None = None
    ) -> list[RedriveTask]:
        """Redrive tasks, the newest first."""
        values = {"state": state, "limit": None if limit is None else str(limit)}
        params = {key: value for key, value in values.items() if value is not None}
        payload = await self._request("GET", REDRIVES, params=params)
        return [RedriveTask.from_document(item) for item in payload.get("tasks") or []]

    async def get_redrive(self, task_id: str) -> RedriveTask:
        return await self._task("GET", f"{REDRIVES}/{task_id}")

    async def redrive_items(self, task_id: str, *, state: str | None = None) -> list[RedriveItem]:
        """A task's pinned dead letters (the first 100); `state="failed"`: those an upcaster
        refused, each with the error."""
        params = {} if state is None else {"state": state}
        payload = await self._request("GET", f"{REDRIVES}/{task_id}/items", params=params)
        return [RedriveItem.from_document(item) for item in payload.get("items") or []]

    async def pause_redrive(self, task_id: str) -> RedriveTask:
        return await self._task("POST", f"{REDRIVES}/{task_id}/pause")

    async def resume_redrive(self, task_id: str) -> RedriveTask:
        return await self._task("POST", f"{REDRIVES}/{task_id}/resume")

    async def cancel_redrive(self, task_id: str) -> RedriveTask:
        return await self._task("POST", f"{REDRIVES}/{task_id}/cancel")

    async def _task(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> RedriveTask:
        payload = await self._request(method, path, body)
        return RedriveTask.from_document(document_of(payload, "task"))
