"""Dead-letter episodes, the filters that select them, and redriving one back into its queue."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from redrive.domain import job as states
from redrive.domain.durations import parse_timestamp
from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import InvalidRequest
from redrive.domain.job import Job
from redrive.domain.retry import parse_retry_policy

DEAD = "dead"
RETRIED = "retried"
REPLAYED = "replayed"
DELETED = "deleted"
PRUNED = "pruned"
ARCHIVED = "archived"
STATUSES = (DEAD, RETRIED, REPLAYED, DELETED, PRUNED, ARCHIVED)


@dataclass(frozen=True)
class DeadLetter:
    """One dead episode of a job: the job exactly as it died, and how the episode ended."""

    id: str
    job: Job
    reason: str
    discarded_at: int
    status: str = DEAD
    error_type: str | None = None
    moved_at: int | None = None
    moved_by: str | None = None

    @property
    def job_id(self) -> str:
        return self.job.id


def new_dead_letter(episode_id: str, job: Job, reason: str, now: int) -> DeadLetter:
    error_type = (job.error or {}).get("type")
    return DeadLetter(
        id=episode_id,
        job=job,
        reason=reason,
        discarded_at=job.discarded_at or now,
        error_type=str(error_type) if error_type is not None else None,
    )


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters an operation means. An empty filter means all of them."""

    queue: str | None = None
    type: str | None = None
    type_prefix: str | None = None
    error_type: str | None = None
    since: int | None = None
    until: int | None = None
    status: str = DEAD
    tenant_id: str | None = None

    @property
    def is_empty(self) -> bool:
        return not any(
            (self.queue, self.type, self.type_prefix, self.error_type, self.since, self.until)
        )


def _text(raw: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = raw.get(name)
        if value is not None and value != "":
            if not isinstance(value, str):
                raise InvalidRequest(f"filter {name} must be a string", {"field": name})
            return value
    return None


def parse_filter(raw: dict[str, Any], now: int, tenant_id: str | None) -> DeadLetterFilter:
    """Filter from query parameters or a JSON `filter` object; `type` may end in `*`."""
    job_type = _text(raw, "type", "job_type")
    prefix = None
    if job_type is not None and job_type.endswith("*"):
        prefix, job_type = job_type[:-1], None
    since_text, until_text = _text(raw, "since"), _text(raw, "until")
    status = _text(raw, "status") or DEAD
    if status not in STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}", {"field": "status"})
    queue = _text(raw, "queue")
    return DeadLetterFilter(
        queue=validate_queue_name(queue, "queue") if queue is not None else None,
        type=job_type,
        type_prefix=prefix,
        error_type=_text(raw, "error_type"),
        since=parse_timestamp(since_text, "since", now)[0] if since_text else None,
        until=parse_timestamp(until_text, "until", now)[0] if until_text else None,
        status=status,
        tenant_id=tenant_id,
    )


def _override_fields(raw: dict[str, Any]) -> dict[str, Any]:
    override = raw.get("override")
    if override is None:
        return {k: raw[k] for k in ("queue", "meta", "retry", "args", "priority") if k in raw}
    if not isinstance(override, dict):
        raise InvalidRequest("override must be an object", {"field": "override"})
    return override


def _priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -100 <= value <= 100:
        raise InvalidRequest("override.priority must be an integer from -100 to 100", {})
    return value


def apply_override(job: Job, raw: dict[str, Any]) -> Job:
    """Queue, priority, args replace; meta and retry merge over what the job had."""
    override = _override_fields(raw)
    changes: dict[str, Any] = {}
    if "queue" in override:
        changes["queue"] = validate_queue_name(override["queue"], "override.queue")
    if "priority" in override:
        changes["priority"] = _priority(override["priority"])
    if "args" in override:
        if not isinstance(override["args"], list):
            raise InvalidRequest("override.args must be an array", {"field": "override.args"})
        changes["args"] = override["args"]
    if "meta" in override:
        if not isinstance(override["meta"], dict):
            raise InvalidRequest("override.meta must be an object", {"field": "override.meta"})
        changes["meta"] = {**job.meta, **override["meta"]}
    if "retry" in override:
        changes["retry"] = parse_retry_policy(override["retry"], job.retry)
    return replace(job, **changes)


def redrive(job: Job, now: int) -> Job:
    """The dead job back in its queue: fresh attempts, same id, error history kept."""
    return replace(
        job,
        state=states.AVAILABLE,
        attempt=0,
        enqueued_at=now,
        error=None,
        completed_at=None,
        discarded_at=None,
        started_at=None,
        next_attempt_at=None,
        retry_delay_ms=None,
        worker_id=None,
        lease_token=None,
        lease_expires_at=None,
        timeout_at=None,
        result=None,
        dead_lettered=False,
    )
