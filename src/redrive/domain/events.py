"""Lifecycle events in the OJS event vocabulary, built from a job and what just happened to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redrive.domain.dead_letter import MovedEpisode
from redrive.domain.durations import format_timestamp
from redrive.domain.job import Job


@dataclass(frozen=True)
class Event:
    type: str
    tenant_id: str
    queue: str | None
    job_type: str | None
    subject: str | None
    data: dict[str, Any] = field(default_factory=dict)


def _event(
    kind: str, tenant_id: str, queue: str, job_type: str, subject: str, /, **data: Any
) -> Event:
    """Positional-only, so `data` may carry any key (a cron's event names its `job_id`)."""
    event_type = kind if "." in kind else f"job.{kind}"
    payload: dict[str, Any] = {"job_type": job_type, "queue": queue}
    payload.update({key: value for key, value in data.items() if value is not None})
    return Event(event_type, tenant_id, queue, job_type, subject, payload)


def job_event(kind: str, job: Job, **data: Any) -> Event:
    """An event about one job; `kind` is the part after `job.` or a full dotted name."""
    return _event(kind, job.tenant_id, job.queue, job.type, job.id, **data)


def episode_event(kind: str, episode: MovedEpisode, **data: Any) -> Event:
    """The same event about the job of an episode a bulk operation moved."""
    return _event(kind, episode.tenant_id, episode.queue, episode.type, episode.job_id, **data)


def started_event(job: Job) -> Event:
    return job_event("started", job, worker_id=job.worker_id, attempt=job.attempt)


def completed_event(job: Job) -> Event:
    started = job.started_at or job.completed_at or 0
    duration = (job.completed_at or started) - started
    return job_event("completed", job, duration_ms=duration, attempt=job.attempt, result=job.result)


def failure_events(job: Job, dead_letter_reason: str | None) -> list[Event]:
    """What a failed attempt announces: always job.failed, then retrying or discarded."""
    events = [job_event("failed", job, attempt=job.attempt, error=job.error)]
    if job.state == "retryable":
        events.append(
            job_event(
                "retrying",
                job,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                next_retry_at=format_timestamp(job.next_attempt_at or 0),
                error=job.error,
            )
        )
    elif job.state == "discarded":
        events.append(job_event("discarded", job, total_attempts=job.attempt, last_error=job.error))
    if dead_letter_reason is not None:
        error_type = (job.error or {}).get("type")
        events.append(
            job_event("dead_letter.added", job, reason=dead_letter_reason, error_type=error_type)
        )
    return events
