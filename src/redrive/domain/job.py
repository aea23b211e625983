"""The job record, its eight OJS states and which of them each operation may start from."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.retry import RetryPolicy

SCHEDULED = "scheduled"
AVAILABLE = "available"
PENDING = "pending"
ACTIVE = "active"
RETRYABLE = "retryable"
COMPLETED = "completed"
CANCELLED = "cancelled"
DISCARDED = "discarded"

STATES = (SCHEDULED, AVAILABLE, PENDING, ACTIVE, RETRYABLE, COMPLETED, CANCELLED, DISCARDED)
TERMINAL_STATES = frozenset({COMPLETED, CANCELLED, DISCARDED})
CANCELLABLE_STATES = frozenset({SCHEDULED, AVAILABLE, PENDING, ACTIVE, RETRYABLE})

DEFAULT_TENANT = "_default"
DEFAULT_QUEUE = "default"
DEFAULT_VISIBILITY_TIMEOUT_MS = 1_800_000
# Where workers put a failure's backtrace in its error record (the CLI and dashboard read the
# same names). Here, beside the job, not in lifecycle.py: fingerprints read them too, and a
# process that fingerprints nothing (a bulk retry) loads no lifecycle (1.4 ms of CPU).
BACKTRACE_KEYS = ("backtrace", "stack", "stacktrace", "traceback")


@frozen_dataclass
class Job:
    """One job as stored: the client's envelope plus everything the server tracks about it."""

    id: str
    tenant_id: str
    type: str
    queue: str
    args: list[Any]
    state: str
    created_at: int
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    attempt: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int | None = None
    visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS
    sequence: int | None = None
    enqueued_at: int | None = None
    scheduled_at: int | None = None
    scheduled_at_text: str | None = None
    expires_at: int | None = None
    expires_at_text: str | None = None
    started_at: int | None = None
    completed_at: int | None = None
    cancelled_at: int | None = None
    discarded_at: int | None = None
    expired_at: int | None = None
    next_attempt_at: int | None = None
    retry_delay_ms: int | None = None
    worker_id: str | None = None
    lease_token: str | None = None
    lease_expires_at: int | None = None
    timeout_at: int | None = None
    error: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    dead_lettered: bool = False
    # The redrive task that requeued it (its end updates the task's counts); the store's own.
    redrive_task_id: str | None = None
    # The dead letter of that task's item (the episode it moved), by which its end finds it.
    redrive_dead_letter_id: str | None = None

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    @property
    def run_at(self) -> int | None:
        """When a scheduled or retryable job becomes available again."""
        if self.state == SCHEDULED:
            return self.scheduled_at
        if self.state == RETRYABLE:
            return self.next_attempt_at
        return None

    @property
    def test_directive(self) -> str | None:
        metadata = self.options.get("metadata")
        if isinstance(metadata, dict):
            directive = metadata.get("test_directive")
            return directive if isinstance(directive, str) else None
        return None


# Job(...) of a new job cost ~72,000 instructions (callgrind) of the ~214,000 a job of an
# enqueue of 1,000 took in the producer: a frozen dataclass sets each of its 40 fields with a
# call to object.__setattr__. The hot paths make, read and copy jobs with this instead.
assemble_job = Assembler(Job)
JOB_FIELDS = assemble_job.names


def evolve(job: Job, **changes: Any) -> Job:
    """`dataclasses.replace` for the hot path: a copy of `job` with `changes` (replace rebuilds
    the job through its frozen `__init__`: 21.6 -> 1.5 us per ack, nack or heartbeat)."""
    return assemble_job.replaced(job, changes)
