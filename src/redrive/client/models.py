"""Typed results the client returns, each built from the server's JSON and keeping it as `raw`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")


def _text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    return None if value is None else str(value)


def _integer(document: dict[str, Any], name: str, default: int = 0) -> int:
    value = document.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


@dataclass(frozen=True)
class RetryPolicy:
    """The OJS retry policy; fields left as None take the server's defaults."""

    max_attempts: int | None = None
    initial_interval: str | None = None
    backoff_coefficient: float | None = None
    max_interval: str | None = None
    jitter: bool | None = None
    non_retryable_errors: list[str] | None = None
    on_exhaustion: str | None = None

    def to_document(self) -> dict[str, Any]:
        values = {
            "max_attempts": self.max_attempts,
            "initial_interval": self.initial_interval,
            "backoff_coefficient": self.backoff_coefficient,
            "max_interval": self.max_interval,
            "jitter": self.jitter,
            "non_retryable_errors": self.non_retryable_errors,
            "on_exhaustion": self.on_exhaustion,
        }
        return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True)
class Job:
    """An OJS job as the server returned it."""

    id: str
    type: str
    queue: str
    state: str
    args: list[Any]
    meta: dict[str, Any]
    attempt: int
    max_attempts: int | None
    priority: int
    errors: list[dict[str, Any]]
    error: dict[str, Any] | None
    result: Any
    worker_id: str | None
    lease_token: str | None
    created_at: str | None
    enqueued_at: str | None
    started_at: str | None
    completed_at: str | None
    discarded_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Job:
        args = document.get("args")
        meta = document.get("meta")
        errors = document.get("errors")
        error = document.get("error")
        max_attempts = document.get("max_attempts")
        return cls(
            id=str(document.get("id") or document.get("job_id") or ""),
            type=str(document.get("type", "")),
            queue=str(document.get("queue", "default")),
            state=str(document.get("state", "")),
            args=list(args) if isinstance(args, list) else [],
            meta=dict(meta) if isinstance(meta, dict) else {},
            attempt=_integer(document, "attempt"),
            max_attempts=max_attempts if isinstance(max_attempts, int) else None,
            priority=_integer(document, "priority"),
            errors=[item for item in errors if isinstance(item, dict)]
            if isinstance(errors, list)
            else [],
            error=error if isinstance(error, dict) else None,
            result=document.get("result"),
            worker_id=_text(document, "worker_id"),
            lease_token=_text(document, "lease_token"),
            created_at=_text(document, "created_at"),
            enqueued_at=_text(document, "enqueued_at"),
            started_at=_text(document, "started_at"),
            completed_at=_text(document, "completed_at"),
            discarded_at=_text(document, "discarded_at"),
            raw=document,
        )


@dataclass(frozen=True)
class Outcome:
    """What ack or nack did to a job: its new state, and when it runs again or died."""

    job_id: str
    state: str
    attempt: int | None
    max_attempts: int | None
    next_attempt_at: str | None
    retry_delay_ms: int | None
    discarded_at: str | None
    completed_at: str | None
    dead_letter: bool
    job: Job | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Outcome:
        job = document.get("job")
        attempt = document.get("attempt")
        max_attempts = document.get("max_attempts")
        delay = document.get("retry_delay_ms")
        return cls(
            job_id=str(document.get("job_id") or document.get("id") or ""),
            state=str(document.get("state", "")),
            attempt=attempt if isinstance(attempt, int) else None,
            max_attempts=max_attempts if isinstance(max_attempts, int) else None,
            next_attempt_at=_text(document, "next_attempt_at"),
            retry_delay_ms=delay if isinstance(delay, int) else None,
            discarded_at=_text(document, "discarded_at"),
            completed_at=_text(document, "completed_at"),
            dead_letter=document.get("dead_letter") is True,
            job=Job.from_document(job) if isinstance(job, dict) else None,
            raw=document,
        )


@dataclass(frozen=True)
class Heartbeat:
    """The server's answer to a heartbeat: the directive and which leases were extended or lost."""

    state: str
    directive: str
    extended: list[str]
    lost: list[str]
    server_time: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Heartbeat:
        state = str(document.get("state") or document.get("directive") or "running")
        return cls(
            state=state,
            directive=str(document.get("directive") or ("" if state == "running" else state)),
            extended=_strings(document.get("jobs_extended")),
            lost=_strings(document.get("jobs_lost")),
            server_time=_text(document, "server_time"),
            raw=document,
        )


@dataclass(frozen=True)
class Episode:
    """One time a job died: why, and how it left the dead-letter queue (if it did)."""

    episode_id: str
    status: str
    reason: str | None
    error_type: str | None
    discarded_at: str | None
    moved_at: str | None
    moved_by: str | None
    replay_count: int
    attempts: int
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Episode:
        return cls(
            episode_id=str(document.get("episode_id", "")),
            status=str(document.get("status", "")),
            reason=_text(document, "reason"),
            error_type=_text(document, "error_type"),
            discarded_at=_text(document, "discarded_at"),
            moved_at=_text(document, "moved_at"),
            moved_by=_text(document, "moved_by"),
            replay_count=_integer(document, "replay_count"),
            attempts=_integer(document, "attempts"),
            raw=document,
        )


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered job: the job as it died, why, and (from get_dead_letter) its episodes."""

    id: str
    dead_letter_id: str | None
    reason: str | None
    status: str
    error_type: str | None
    discarded_at: str | None
    moved_at: str | None
    moved_by: str | None
    job: Job
    episodes: list[Episode]
    raw: dict[str, Any] = field(repr=False)

    @property
    def type(self) -> str:
        return self.job.type

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.job.errors

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> DeadLetter:
        episodes = document.get("episodes")
        return cls(
            id=str(document.get("id", "")),
            dead_letter_id=_text(document, "dead_letter_id"),
            reason=_text(document, "dead_letter_reason"),
            status=str(document.get("dead_letter_status") or "dead"),
            error_type=_text(document, "error_type"),
            discarded_at=_text(document, "discarded_at"),
            moved_at=_text(document, "moved_at"),
            moved_by=_text(document, "moved_by"),
            job=Job.from_document(document),
            episodes=[Episode.from_document(item) for item in episodes if isinstance(item, dict)]
            if isinstance(episodes, list)
            else [],
            raw=document,
        )


@dataclass(frozen=True)
class Page(Generic[Item]):
    """One page of a list; pass `next_cursor` back as `cursor` for the next one."""

    items: list[Item]
    total: int | None
    next_cursor: str | None
    has_more: bool
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class BulkResult:
    """What a bulk retry or purge matched and changed (or, with dry_run, would change)."""

    action: str
    matched: int
    succeeded: int
    failed: int
    dry_run: bool
    sample: list[str]
    queues: list[str]
    errors: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> BulkResult:
        errors = document.get("errors")
        return cls(
            action=str(document.get("action", "")),
            matched=_integer(document, "matched"),
            succeeded=_integer(document, "succeeded"),
            failed=_integer(document, "failed"),
            dry_run=document.get("dry_run") is True,
            sample=_strings(document.get("sample")),
            queues=_strings(document.get("queues")),
            errors=[item for item in errors if isinstance(item, dict)]
            if isinstance(errors, list)
            else [],
            raw=document,
        )


@dataclass(frozen=True)
class DeadLetterStats:
    """Counts of dead letters in total and by queue, type and error type."""

    total: int
    by_queue: dict[str, int]
    by_type: dict[str, int]
    by_error_type: dict[str, int]
    oldest_at: str | None
    newest_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> DeadLetterStats:
        def counts(name: str) -> dict[str, int]:
            value = document.get(name)
            return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}

        return cls(
            total=_integer(document, "total"),
            by_queue=counts("by_queue"),
            by_type=counts("by_type"),
            by_error_type=counts("by_error_type"),
            oldest_at=_text(document, "oldest_at"),
            newest_at=_text(document, "newest_at"),
            raw=document,
        )


@dataclass(frozen=True)
class ReplayRule:
    """An automatic replay rule: which dead letters it takes back, after what delay, how often."""

    id: str
    name: str
    filter: dict[str, Any]
    delay: str
    max_replays: int
    enabled: bool
    replayed_total: int
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ReplayRule:
        filters = document.get("filter")
        return cls(
            id=str(document.get("id", "")),
            name=str(document.get("name", "")),
            filter=dict(filters) if isinstance(filters, dict) else {},
            delay=str(document.get("delay") or "PT0S"),
            max_replays=_integer(document, "max_replays"),
            enabled=document.get("enabled") is True,
            replayed_total=_integer(document, "replayed_total"),
            raw=document,
        )


@dataclass(frozen=True)
class RetentionPolicy:
    """How long dead letters are kept: globally (queue None) or for one queue."""

    queue: str | None
    scope: str
    max_age: str | None
    max_count: int | None
    pruning_policy: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RetentionPolicy:
        max_count = document.get("max_count")
        return cls(
            queue=_text(document, "queue"),
            scope=str(document.get("scope", "")),
            max_age=_text(document, "max_age"),
            max_count=max_count if isinstance(max_count, int) else None,
            pruning_policy=_text(document, "pruning_policy"),
            raw=document,
        )


@dataclass(frozen=True)
class RetentionPolicies:
    """The global retention policy, the per-queue overrides and the next scheduled prune."""

    global_policy: RetentionPolicy
    queues: list[RetentionPolicy]
    next_prune_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RetentionPolicies:
        queues = document.get("queues")
        return cls(
            global_policy=RetentionPolicy.from_document(dict(document.get("global") or {})),
            queues=[RetentionPolicy.from_document(item) for item in queues or []],
            next_prune_at=_text(document, "next_prune_at"),
            raw=document,
        )


@dataclass(frozen=True)
class PruneReport:
    """What a prune removed: deleted and archived counts, per queue, and archive files."""

    deleted: int
    archived: int
    by_queue: dict[str, int]
    archives: list[str]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> PruneReport:
        by_queue = document.get("by_queue")
        return cls(
            deleted=_integer(document, "deleted"),
            archived=_integer(document, "archived"),
            by_queue={str(k): int(v) for k, v in by_queue.items()}
            if isinstance(by_queue, dict)
            else {},
            archives=_strings(document.get("archives")),
            raw=document,
        )


@dataclass(frozen=True)
class Archive:
    """An archive file written by pruning."""

    name: str
    entries: int
    created_at: str | None
    restored_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Archive:
        return cls(
            name=str(document.get("name", "")),
            entries=_integer(document, "entries"),
            created_at=_text(document, "created_at"),
            restored_at=_text(document, "restored_at"),
            raw=document,
        )


@dataclass(frozen=True)
class Queue:
    """A queue, whether it is paused, and (from queue_stats) its job counts by state."""

    name: str
    paused: bool
    status: str
    counts: dict[str, int]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Queue:
        stats = document.get("stats")
        counts = {str(k): v for k, v in stats.items() if isinstance(v, int)} if stats else {}
        paused = document.get("paused")
        if not isinstance(paused, bool):
            paused = document.get("status") == "paused"
        return cls(
            name=str(document.get("name") or document.get("queue") or ""),
            paused=paused,
            status=str(document.get("status") or ("paused" if paused else "active")),
            counts=counts,
            raw=document,
        )
