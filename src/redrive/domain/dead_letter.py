"""Dead-letter episodes and redriving one back into its queue (the filter has its own module)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from redrive.domain import job as states
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import RESERVED_QUEUE_PREFIX, check_client_queue
from redrive.domain.errors import InvalidRequest, InvalidRetryPolicy
from redrive.domain.fingerprint import Fingerprint, incident_id
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.redaction import counts_document
from redrive.domain.retry import parse_retry_policy

DEAD = "dead"
RETRIED = "retried"
REPLAYED = "replayed"
DELETED = "deleted"
PRUNED = "pruned"
ARCHIVED = "archived"
STATUSES = (DEAD, RETRIED, REPLAYED, DELETED, PRUNED, ARCHIVED)
# What pruning leaves of a dead letter: a tombstone (who pruned it and when, the job without its
# args, meta, errors and result), kept apart from the episodes (migration 0023).
TOMBSTONES = (PRUNED, ARCHIVED)


@frozen_dataclass
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
    replay_count: int = 0
    # The fingerprint of its final error, the algorithm version that made it, and the incident
    # it belongs to (None for episodes from before incidents, until they are backfilled).
    fingerprint: str | None = None
    fingerprint_version: int | None = None
    incident_id: str | None = None
    # The active legal holds that keep it (read with it; never stored on the episode).
    legal_holds: tuple[str, ...] = ()
    # The value at the alerts' aggregate key path (meta.aggregate_id by default) when it died.
    aggregate_key: str | None = None

    @property
    def job_id(self) -> str:
        return self.job.id

    @property
    def redactions(self) -> dict[str, int]:
        """How many secrets of each kind were redacted from the errors this episode holds (each
        error record keeps its own counts)."""
        total: Counter[str] = Counter()
        for record in self.job.errors:
            counts = record.get("redactions") if isinstance(record, dict) else None
            if isinstance(counts, dict):
                total.update(
                    {
                        str(kind): number
                        for kind, number in counts.items()
                        if isinstance(number, int) and not isinstance(number, bool)
                    }
                )
        return counts_document(total)


@frozen_dataclass
class MovedEpisode:
    """An episode a bulk operation moved out of `dead`, as the move returns it: enough for the
    tallies, the events and requeueing, without the job snapshot."""

    id: str
    job_id: str
    tenant_id: str
    queue: str
    type: str
    error_type: str | None
    incident_id: str | None = None
    # The move put the job back in its queue already (a bulk retry does where it can).
    requeued: bool = False
    # When the episode died, where the bulk moves return it: their next chunk starts there.
    discarded_at: int | None = None

    @classmethod
    def of(cls, dead: DeadLetter) -> MovedEpisode:
        job = dead.job
        return cls(
            dead.id, job.id, job.tenant_id, job.queue, job.type, dead.error_type, dead.incident_id
        )


@frozen_dataclass
class RequeuedGroup:
    """Episodes a bulk retry moved and requeued in place, counted by what the tallies, the
    incidents and the metrics count them by (nothing more is done with them one by one)."""

    tenant_id: str
    queue: str
    type: str
    error_type: str | None
    incident_id: str | None
    count: int


REPLAY_COUNT = "ojs.replay_count"
LAST_REPLAYED_AT = "ojs.last_replayed_at"
REPLAY_RULE = "ojs.replay_rule"


@frozen_dataclass
class DeadLetterStats:
    """What the dead-letter queue holds now (status `dead`): how many, per queue, per job type
    and per error type ("unknown" for none), and when the oldest and newest died."""

    total: int
    by_queue: dict[str, int]
    by_type: dict[str, int]
    by_error_type: dict[str, int]
    oldest_at: int | None
    newest_at: int | None


# A dying job's episode, assembled (no frozen __init__ setting each of its fields).
assemble_dead_letter = Assembler(DeadLetter)


def replay_count(job: Job) -> int:
    value = job.meta.get(REPLAY_COUNT, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def new_dead_letter(
    episode_id: str,
    job: Job,
    reason: str,
    now: int,
    fingerprint: Fingerprint,
    aggregate_key: str | None = None,
) -> DeadLetter:
    """The episode of a job that just died, fingerprinted and named to its incident."""
    error_type = (job.error or {}).get("type")
    state = assemble_dead_letter.blank()
    state["id"] = episode_id
    state["job"] = job
    state["reason"] = reason
    state["discarded_at"] = job.discarded_at or now
    state["error_type"] = str(error_type) if error_type is not None else None
    state["replay_count"] = replay_count(job)
    state["fingerprint"] = fingerprint.value
    state["fingerprint_version"] = fingerprint.version
    state["incident_id"] = incident_id(job.tenant_id, job.type, fingerprint.value)
    state["aggregate_key"] = aggregate_key
    return assemble_dead_letter.adopt(state)


def fingerprinted(dead: DeadLetter, fingerprint: Fingerprint) -> DeadLetter:
    """An episode from before incidents, fingerprinted and named to its incident."""
    job = dead.job
    return replace(
        dead,
        fingerprint=fingerprint.value,
        fingerprint_version=fingerprint.version,
        incident_id=incident_id(job.tenant_id, job.type, fingerprint.value),
    )


OVERRIDE_KEYS = ("queue", "priority", "args", "meta", "retry")


@frozen_dataclass
class RetryOverride:
    """What a single retry changes: queue, priority and args replace; meta and the retry policy
    merge over what the job had. All None: the job goes back exactly as it died."""

    queue: str | None = None
    priority: int | None = None
    args: list[Any] | None = None
    meta: dict[str, Any] | None = None
    retry: dict[str, Any] | None = None


def _priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -100 <= value <= 100:
        raise InvalidRequest(
            "override.priority must be an integer from -100 to 100", {"field": "override.priority"}
        )
    return value


def parse_override(raw: object) -> RetryOverride:
    """The override from a retry body: its fields at the top level or under `override`; any
    other key is refused."""
    if raw is None:
        return RetryOverride()
    if not isinstance(raw, dict):
        raise InvalidRequest("the retry body must be a JSON object", {"field": "body"})
    if "override" in raw:
        if set(raw) != {"override"}:
            extra = sorted(set(raw) - {"override"})
            raise InvalidRequest(
                f"send the changes either under override or at the top level, not both "
                f"(found {', '.join(extra)})",
                {"field": extra[0]},
            )
        raw = raw["override"]
        if not isinstance(raw, dict):
            raise InvalidRequest("override must be an object", {"field": "override"})
    unknown = sorted(set(raw) - set(OVERRIDE_KEYS))
    if unknown:
        raise InvalidRequest(
            f"unknown override key {unknown[0]!r}; the keys are {', '.join(OVERRIDE_KEYS)}",
            {"field": f"override.{unknown[0]}", "allowed": list(OVERRIDE_KEYS)},
        )
    args, meta, retry = raw.get("args"), raw.get("meta"), raw.get("retry")
    if "args" in raw and not isinstance(args, list):
        raise InvalidRequest("override.args must be an array", {"field": "override.args"})
    if "meta" in raw and not isinstance(meta, dict):
        raise InvalidRequest("override.meta must be an object", {"field": "override.meta"})
    if "retry" in raw and not isinstance(retry, dict):
        # Checked field by field when merged over the job's own policy, before anything is written.
        raise InvalidRetryPolicy("override.retry must be an object", {"field": "override.retry"})
    return RetryOverride(
        queue=check_client_queue(raw["queue"], "override.queue") if "queue" in raw else None,
        priority=_priority(raw["priority"]) if "priority" in raw else None,
        args=args,
        meta=meta,
        retry=retry,
    )


def apply_override(job: Job, override: RetryOverride) -> Job:
    """The dead job with the override's changes."""
    changes: dict[str, Any] = {}
    if override.queue is not None:
        changes["queue"] = override.queue
    if override.priority is not None:
        changes["priority"] = override.priority
    if override.args is not None:
        changes["args"] = override.args
    if override.meta is not None:
        changes["meta"] = {**job.meta, **override.meta}
    if override.retry is not None:
        changes["retry"] = parse_retry_policy(override.retry, job.retry)
    if changes and job.queue.startswith(RESERVED_QUEUE_PREFIX):
        raise InvalidRequest(
            f"job {job.id} is the server's own (queue {job.queue}): it is retried as it was, "
            "without changes",
            {"field": "override", "queue": job.queue},
        )
    return replace(job, **changes) if changes else job


def mark_replayed(job: Job, rule_name: str, now: int) -> Job:
    """Replay tracking in meta, so a rule can stop at its max_replays."""
    meta = {
        **job.meta,
        REPLAY_COUNT: replay_count(job) + 1,
        LAST_REPLAYED_AT: format_timestamp(now),
        REPLAY_RULE: rule_name,
    }
    return replace(job, meta=meta)


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
