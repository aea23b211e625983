"""Dead-letter episodes, the filters that select them, and redriving one back into its queue."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from redrive.domain import job as states
from redrive.domain.durations import format_timestamp, parse_timestamp
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
    replay_count: int = 0

    @property
    def job_id(self) -> str:
        return self.job.id


@dataclass(frozen=True)
class MovedEpisode:
    """An episode a bulk operation moved out of `dead`, as the move returns it: enough for the
    tallies, the events and requeueing, without the job snapshot."""

    id: str
    job_id: str
    tenant_id: str
    queue: str
    type: str
    error_type: str | None

    @classmethod
    def of(cls, dead: DeadLetter) -> MovedEpisode:
        job = dead.job
        return cls(dead.id, job.id, job.tenant_id, job.queue, job.type, dead.error_type)


REPLAY_COUNT = "ojs.replay_count"
LAST_REPLAYED_AT = "ojs.last_replayed_at"
REPLAY_RULE = "ojs.replay_rule"


def replay_count(job: Job) -> int:
    value = job.meta.get(REPLAY_COUNT, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def new_dead_letter(episode_id: str, job: Job, reason: str, now: int) -> DeadLetter:
    error_type = (job.error or {}).get("type")
    return DeadLetter(
        id=episode_id,
        job=job,
        reason=reason,
        discarded_at=job.discarded_at or now,
        error_type=str(error_type) if error_type is not None else None,
        replay_count=replay_count(job),
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
    args_contains: str | None = None
    args_path: str | None = None
    args_value: str | None = None
    replay_count_below: int | None = None

    @property
    def is_empty(self) -> bool:
        return not any(
            (
                self.queue, self.type, self.type_prefix, self.error_type, self.since,
                self.until, self.args_contains, self.args_path,
            )
        )  # fmt: skip


# `$.customer_id == "cust_123"`: a path of names and indexes, then a JSON scalar.
ARGS_MATCH = re.compile(
    r"\s*(?P<path>\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d{1,6}\])+)\s*==\s*(?P<value>.+?)\s*"
)


def parse_args_match(text: str) -> tuple[str, str]:
    """(path, JSON text of the value). The path is checked here; both are bound as parameters."""
    match = ARGS_MATCH.fullmatch(text)
    invalid = InvalidRequest(
        'args_match must look like $.customer_id == "cust_123" (a path, ==, a JSON value)',
        {"field": "args_match"},
    )
    if match is None:
        raise invalid
    try:
        value = json.loads(match.group("value"))
    except ValueError as error:
        raise invalid from error
    if isinstance(value, dict | list):
        raise invalid
    return match.group("path"), json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
    args_match = _text(raw, "args_match", "args_path")
    args_path, args_value = parse_args_match(args_match) if args_match else (None, None)
    return DeadLetterFilter(
        queue=validate_queue_name(queue, "queue") if queue is not None else None,
        type=job_type,
        type_prefix=prefix,
        error_type=_text(raw, "error_type"),
        since=parse_timestamp(since_text, "since", now)[0] if since_text else None,
        until=parse_timestamp(until_text, "until", now)[0] if until_text else None,
        status=status,
        tenant_id=tenant_id,
        args_contains=_text(raw, "args_contains", "args"),
        args_path=args_path,
        args_value=args_value,
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
