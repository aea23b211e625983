"""OJS JSON shapes of jobs, dead letters (and their stats), incidents, crons, workers, events."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from redrive.domain.alerts import Alert
from redrive.domain.dead_letter import DeadLetter, DeadLetterStats
from redrive.domain.durations import format_timestamp
from redrive.domain.events import event_envelope
from redrive.domain.incident import Incident
from redrive.domain.job import Job
from redrive.domain.keys import ApiKey
from redrive.domain.records import CronRecord, WorkerRecord
from redrive.domain.root_cause import ACTIONS, RootCause
from redrive.domain.trend import Trend
from redrive.domain.upcasting import Upcast
from redrive.ports import StoredEvent

# A batch's jobs share their moments (one `now` for 1,000 created_at and enqueued_at), so each
# is formatted once.
_formatted = lru_cache(maxsize=1024)(format_timestamp)


def timestamp(value: int | None) -> str | None:
    return None if value is None else _formatted(value)


def job_documents(jobs: list[Job]) -> list[dict[str, Any]]:
    """The documents of many jobs (a batch's, answered at once): the retry policy they share
    (one object, as a batch's jobs made from one template have) is written once and its document
    shared, which was two fifths of a document's instructions."""
    policies: dict[int, dict[str, Any]] = {}  # by id(): `jobs` keeps each policy alive
    documents = []
    for job in jobs:
        retry = policies.get(id(job.retry))
        if retry is None:
            retry = policies[id(job.retry)] = job.retry.to_document()
        documents.append(job_document(job, retry))
    return documents


def _head(job: Job) -> dict[str, Any]:
    """The fields every job document opens with, the minimal answer's and the whole one's."""
    return {
        "id": job.id,
        "type": job.type,
        "queue": job.queue,
        "args": job.args,
        "meta": job.meta,
        "priority": job.priority,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.retry.max_attempts,
    }


def job_summaries(jobs: list[Job]) -> list[dict[str, Any]]:
    """New jobs (a batch's) as a minimal answer: the fields the client's Job reads that a new
    job has (the OJS job's required ones, meta, priority, max_attempts and its times), without
    the options, retry policy, tags and timeouts it was sent or given by default."""
    summaries = []
    for job in jobs:
        summary = _head(job)
        if job.created_at is not None:
            summary["created_at"] = _formatted(job.created_at)
        if job.enqueued_at is not None:
            summary["enqueued_at"] = _formatted(job.enqueued_at)
        summaries.append(summary)
    return summaries


def job_document(job: Job, retry: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job as OJS clients read it; unset fields are left out rather than sent as null.
    Written out field by field, the always-present ones in `_head`'s dict and six stores: this
    runs 1,000 times per batch enqueue and fetch (29 us a job once, 13 with the cached
    timestamps; a loop over (name, value) pairs and getattr per timestamp took half of what
    remained; `_head` shared with the minimal answer costs ~0.1 us a job). `retry` is the
    retry policy's document when the caller has it already (`job_documents`)."""
    options = job.options
    document = _head(job)
    document["specversion"] = "1.0"
    document["options"] = options
    document["retry"] = job.retry.to_document() if retry is None else retry
    document["tags"] = options.get("tags", [])
    document["visibility_timeout_ms"] = job.visibility_timeout_ms
    document["errors"] = job.errors
    if job.extra:  # the client's own top-level keys, first, as sent (ours win a clash)
        document = {**job.extra, **document}
    if job.timeout_ms is not None:
        document["timeout_ms"] = job.timeout_ms
    _add_outcome(job, document)
    unique = options.get("unique")
    if unique is not None:
        document["unique"] = unique
    scheduled = job.scheduled_at_text or timestamp(job.scheduled_at)
    if scheduled is not None:
        document["scheduled_at"] = scheduled
    expires = job.expires_at_text or timestamp(job.expires_at)
    if expires is not None:
        document["expires_at"] = expires
    if job.created_at is not None:
        document["created_at"] = _formatted(job.created_at)
    if job.enqueued_at is not None:
        document["enqueued_at"] = _formatted(job.enqueued_at)
    _add_later_moments(job, document)
    return document


def _add_outcome(job: Job, document: dict[str, Any]) -> None:
    """What the job's attempts left: its retry delay, its lease while active, error, result."""
    if job.retry_delay_ms is not None:
        document["retry_delay_ms"] = job.retry_delay_ms
    if job.state == "active":
        if job.worker_id is not None:
            document["worker_id"] = job.worker_id
        if job.lease_token is not None:
            document["lease_token"] = job.lease_token
        if job.lease_expires_at is not None:
            document["lease_expires_at"] = _formatted(job.lease_expires_at)
    if job.error is not None:
        document["error"] = job.error
    if job.result is not None:
        document["result"] = job.result


def _add_later_moments(job: Job, document: dict[str, Any]) -> None:
    """The moments after enqueueing that the job has reached, and its dead-letter mark."""
    if job.started_at is not None:
        document["started_at"] = _formatted(job.started_at)
    if job.completed_at is not None:
        document["completed_at"] = _formatted(job.completed_at)
    if job.cancelled_at is not None:
        document["cancelled_at"] = _formatted(job.cancelled_at)
    if job.discarded_at is not None:
        document["discarded_at"] = _formatted(job.discarded_at)
    if job.expired_at is not None:
        document["expired_at"] = _formatted(job.expired_at)
    if job.next_attempt_at is not None:
        document["next_attempt_at"] = _formatted(job.next_attempt_at)
    if job.dead_lettered:
        document["dead_letter"] = True


def dead_letter_document(dead: DeadLetter) -> dict[str, Any]:
    document = job_document(dead.job)
    document.update(
        dead_letter_id=dead.id,
        dead_letter_reason=dead.reason,
        dead_letter_status=dead.status,
        error_type=dead.error_type,
        discarded_at=format_timestamp(dead.discarded_at),
        redactions=dead.redactions,
        fingerprint=dead.fingerprint,
        fingerprint_version=dead.fingerprint_version,
        incident_id=dead.incident_id,
        metadata={
            "created_at": timestamp(dead.job.created_at),
            "discarded_at": format_timestamp(dead.discarded_at),
        },
    )
    if dead.moved_at is not None:
        document.update(moved_at=format_timestamp(dead.moved_at), moved_by=dead.moved_by)
    document.update(held=bool(dead.legal_holds), legal_holds=list(dead.legal_holds))
    return document


def episode_document(dead: DeadLetter) -> dict[str, Any]:
    """One dead episode of a job in its history: when it died, why, and how it left."""
    return {
        "episode_id": dead.id,
        "status": dead.status,
        "reason": dead.reason,
        "error_type": dead.error_type,
        "discarded_at": format_timestamp(dead.discarded_at),
        "moved_at": timestamp(dead.moved_at),
        "moved_by": dead.moved_by,
        "replay_count": dead.replay_count,
        "attempts": len(dead.job.errors),
        "fingerprint": dead.fingerprint,
        "incident_id": dead.incident_id,
    }


def trend_document(trend: Trend) -> dict[str, Any]:
    """An incident's arrivals per bucket (oldest first; each from its start to the next's) and
    the direction of the last bucket against the one before."""
    return {
        "window": trend.window.value,
        "bucket_seconds": trend.width // 1000,
        "buckets": [
            {"start": format_timestamp(bucket.start), "count": bucket.count}
            for bucket in trend.buckets
        ],
        "total": trend.total,
        "direction": trend.direction.value,
        "summary": trend.summary,
    }


def incident_document(incident: Incident, trend: Trend | None = None) -> dict[str, Any]:
    """An incident: its key, what its errors read, its counts and its state; with its trend
    when one was asked for."""
    return {
        "id": incident.id,
        "tenant_id": incident.tenant_id,
        "type": incident.type,
        "fingerprint": incident.fingerprint,
        "fingerprint_version": incident.fingerprint_version,
        "error_type": incident.error_type,
        "message": incident.message,
        "state": incident.state,
        "dead_count": incident.dead_count,
        "total_count": incident.total_count,
        "first_seen_at": format_timestamp(incident.first_seen_at),
        "last_seen_at": format_timestamp(incident.last_seen_at),
        "queues": list(incident.queues),
        "sample_dead_letter_id": incident.sample_dead_letter_id,
        "fix_reference": incident.fix_reference,
        "state_changed_at": format_timestamp(incident.state_changed_at),
        "state_changed_by": incident.state_changed_by,
        "class": incident.classification,
        "classified_by": incident.classified_by,
        "default_action": ACTIONS[incident.classification],
        **({} if trend is None else {"trend": trend_document(trend)}),
    }


def root_cause_document(root_cause: RootCause | None) -> dict[str, Any] | None:
    """An incident's root-cause record (None: nobody wrote one yet)."""
    if root_cause is None:
        return None
    return {
        "incident_id": root_cause.incident_id,
        "category": root_cause.category,
        "root_cause": root_cause.root_cause,
        "fix_reference": root_cause.fix_reference,
        "created_by": root_cause.created_by,
        "created_at": format_timestamp(root_cause.created_at),
        "updated_by": root_cause.updated_by,
        "updated_at": format_timestamp(root_cause.updated_at),
        "revision": root_cause.revision,
    }


def alert_document(alert: Alert) -> dict[str, Any]:
    """An alert: its rule, what it is about, its state and when it fired."""
    return {
        "id": alert.id,
        "tenant_id": alert.tenant_id,
        "rule": alert.rule,
        "severity": alert.severity,
        "queue": alert.queue,
        "key": alert.key,
        "state": alert.state,
        "message": alert.message,
        "count": alert.count,
        "first_fired_at": format_timestamp(alert.first_fired_at),
        "last_fired_at": format_timestamp(alert.last_fired_at),
        "acknowledged_at": timestamp(alert.acknowledged_at),
        "acknowledged_by": alert.acknowledged_by,
        "resolved_at": timestamp(alert.resolved_at),
    }


def cron_document(cron: CronRecord) -> dict[str, Any]:
    return {
        "name": cron.name,
        "expression": cron.expression,
        "timezone": cron.timezone,
        "overlap_policy": cron.overlap_policy,
        "enabled": cron.enabled,
        "job_template": cron.job_template,
        "description": cron.description,
        "next_run_at": timestamp(cron.next_run_at),
        "last_run_at": timestamp(cron.last_run_at),
        "last_job_id": cron.last_job_id,
        "run_count": cron.run_count,
        "created_at": timestamp(cron.created_at),
    }


def worker_document(worker: WorkerRecord, now: int, stale_after_ms: int) -> dict[str, Any]:
    stale = now - worker.last_heartbeat_at > stale_after_ms
    return {
        "id": worker.id,
        "state": "stale" if stale else worker.state,
        "directive": worker.directive or "",
        "queues": list(worker.queues),
        "active_jobs": worker.active_jobs,
        "first_seen_at": timestamp(worker.first_seen_at),
        "last_heartbeat_at": timestamp(worker.last_heartbeat_at),
    }


def dead_letter_stats_document(stats: DeadLetterStats) -> dict[str, Any]:
    return {
        "total": stats.total,
        "by_queue": stats.by_queue,
        "by_type": stats.by_type,
        "by_error_type": stats.by_error_type,
        "oldest_at": timestamp(stats.oldest_at),
        "newest_at": timestamp(stats.newest_at),
    }


def event_document(stored: StoredEvent) -> dict[str, Any]:
    return event_envelope(stored.id, stored.time, stored.event)


def key_document(key: ApiKey) -> dict[str, Any]:
    """An API key as answered: never its secret nor its hash."""
    return {
        "id": key.id,
        "tenant": key.tenant_id,
        "name": key.name,
        "role": key.role.value,
        "all_tenants": key.all_tenants,
        "created_at": format_timestamp(key.created_at),
        "created_by": key.created_by,
        "expires_at": timestamp(key.expires_at),
        "revoked_at": timestamp(key.revoked_at),
    }


def upcast_document(result: Upcast) -> dict[str, Any]:
    """What a redrive would change in a job's payload: versions, the upcasters in order, and
    each changed value (`before`/`after` left out where the value is absent)."""
    changes = []
    for change in result.changes():
        entry: dict[str, Any] = {"path": change.path}
        entry.update({"before": change.before} if change.had_before else {})
        entry.update({"after": change.after} if change.has_after else {})
        changes.append(entry)
    return {
        "job_id": result.before.id,
        "type": result.before.type,
        "from_version": result.from_version,
        "to_version": result.to_version,
        "upcasters": list(result.steps),
        "changes": changes,
    }
