"""Typed results for the dead-letter queue: dead letters and their episodes, bulk results, stats,
replay rules, retention policies, prune reports and archives."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.client.frozen import frozen_dataclass
from redrive.client.models import Job, integer_of, strings_of, text_of


@frozen_dataclass
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
    incident_id: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Episode:
        return cls(
            episode_id=str(document.get("episode_id", "")),
            status=str(document.get("status", "")),
            reason=text_of(document, "reason"),
            error_type=text_of(document, "error_type"),
            discarded_at=text_of(document, "discarded_at"),
            moved_at=text_of(document, "moved_at"),
            moved_by=text_of(document, "moved_by"),
            replay_count=integer_of(document, "replay_count"),
            attempts=integer_of(document, "attempts"),
            incident_id=text_of(document, "incident_id"),
            raw=document,
        )


@frozen_dataclass
class DeadLetter:
    """A dead-lettered job: the job as it died, why, the incident it belongs to (and the
    fingerprint of its error), and (from get_dead_letter) its episodes."""

    id: str
    dead_letter_id: str | None
    reason: str | None
    status: str
    error_type: str | None
    discarded_at: str | None
    moved_at: str | None
    moved_by: str | None
    incident_id: str | None
    fingerprint: str | None
    job: Job
    episodes: list[Episode]
    raw: dict[str, Any] = field(repr=False)
    legal_holds: list[str] = field(default_factory=list)  # the active holds that keep it

    @property
    def held(self) -> bool:
        return bool(self.legal_holds)

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
            dead_letter_id=text_of(document, "dead_letter_id"),
            reason=text_of(document, "dead_letter_reason"),
            status=str(document.get("dead_letter_status") or "dead"),
            error_type=text_of(document, "error_type"),
            discarded_at=text_of(document, "discarded_at"),
            moved_at=text_of(document, "moved_at"),
            moved_by=text_of(document, "moved_by"),
            incident_id=text_of(document, "incident_id"),
            fingerprint=text_of(document, "fingerprint"),
            job=Job.from_document(document),
            episodes=[Episode.from_document(item) for item in episodes if isinstance(item, dict)]
            if isinstance(episodes, list)
            else [],
            raw=document,
            legal_holds=strings_of(document.get("legal_holds")),
        )


@frozen_dataclass
class UpcastPreview:
    """What a redrive would change in one dead letter's payload: the schema versions, the
    upcasters in the order they run, and each changed value as a dict of `path` and `before`
    and/or `after` (a side is left out where the value is absent)."""

    job_id: str
    type: str
    from_version: int
    to_version: int
    upcasters: list[str]
    changes: list[dict[str, Any]]

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> UpcastPreview:
        changes = document.get("changes")
        return cls(
            job_id=text_of(document, "job_id") or "",
            type=text_of(document, "type") or "",
            from_version=integer_of(document, "from_version"),
            to_version=integer_of(document, "to_version"),
            upcasters=strings_of(document.get("upcasters")),
            changes=[item for item in changes if isinstance(item, dict)]
            if isinstance(changes, list)
            else [],
        )


def upcasts_of(value: object) -> list[UpcastPreview]:
    if not isinstance(value, list):
        return []
    return [UpcastPreview.from_document(item) for item in value if isinstance(item, dict)]


@frozen_dataclass
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
    # A bulk retry larger than a burst became this paced redrive task (nothing moved yet).
    task_id: str | None = None
    held: int = 0  # a purge: matching dead letters legal holds kept
    # A dry run of a retry: the sample's upcasts (those that change the payload).
    upcasts: list[UpcastPreview] = field(default_factory=list)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> BulkResult:
        errors = document.get("errors")
        task = document.get("task")
        return cls(
            action=str(document.get("action", "")),
            matched=integer_of(document, "matched"),
            succeeded=integer_of(document, "succeeded"),
            failed=integer_of(document, "failed"),
            dry_run=document.get("dry_run") is True,
            sample=strings_of(document.get("sample")),
            queues=strings_of(document.get("queues")),
            errors=[item for item in errors if isinstance(item, dict)]
            if isinstance(errors, list)
            else [],
            raw=document,
            task_id=str(task["id"]) if isinstance(task, dict) and "id" in task else None,
            held=integer_of(document, "held"),
            upcasts=upcasts_of(document.get("upcasts")),
        )


@frozen_dataclass
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
            total=integer_of(document, "total"),
            by_queue=counts("by_queue"),
            by_type=counts("by_type"),
            by_error_type=counts("by_error_type"),
            oldest_at=text_of(document, "oldest_at"),
            newest_at=text_of(document, "newest_at"),
            raw=document,
        )


@frozen_dataclass
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
            max_replays=integer_of(document, "max_replays"),
            enabled=document.get("enabled") is True,
            replayed_total=integer_of(document, "replayed_total"),
            raw=document,
        )


@frozen_dataclass
class RetentionPolicy:
    """How long dead letters are kept: globally (queue None) or for one queue."""

    queue: str | None
    scope: str
    max_age: str | None
    max_count: int | None
    pruning_policy: str | None
    raw: dict[str, Any] = field(repr=False)
    min_age: str | None = None  # the floor: none younger is deleted by pruning

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RetentionPolicy:
        max_count = document.get("max_count")
        return cls(
            queue=text_of(document, "queue"),
            scope=str(document.get("scope", "")),
            max_age=text_of(document, "max_age"),
            max_count=max_count if isinstance(max_count, int) else None,
            pruning_policy=text_of(document, "pruning_policy"),
            raw=document,
            min_age=text_of(document, "min_age"),
        )


@frozen_dataclass
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
            next_prune_at=text_of(document, "next_prune_at"),
            raw=document,
        )


@frozen_dataclass
class PruneReport:
    """What a prune removed: deleted and archived counts, per queue, and archive files."""

    deleted: int
    archived: int
    by_queue: dict[str, int]
    archives: list[str]
    raw: dict[str, Any] = field(repr=False)
    # Per scope (a queue, or * for the global policy): dead letters over max_count kept because
    # they are younger than the retention floor or under a legal hold.
    floor_holding: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> PruneReport:
        by_queue = document.get("by_queue")
        holding = document.get("floor_holding")
        return cls(
            deleted=integer_of(document, "deleted"),
            archived=integer_of(document, "archived"),
            by_queue={str(k): int(v) for k, v in by_queue.items()}
            if isinstance(by_queue, dict)
            else {},
            archives=strings_of(document.get("archives")),
            raw=document,
            floor_holding={str(k): int(v) for k, v in holding.items()}
            if isinstance(holding, dict)
            else {},
        )


@frozen_dataclass
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
            entries=integer_of(document, "entries"),
            created_at=text_of(document, "created_at"),
            restored_at=text_of(document, "restored_at"),
            raw=document,
        )
