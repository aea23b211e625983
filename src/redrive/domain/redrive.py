"""Redrive tasks: their states and transitions, the rate they move at (and who may set it), the
batch due at a moment (pacing), what stopped one (a failure), and the verification figures of
the jobs they redrove."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import Conflict, Forbidden, InvalidRequest, OjsError
from redrive.domain.events import Event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.incident import (
    ACKNOWLEDGED,
    OPEN,
    REGRESSED,
    RESOLVED,
    Incident,
    StateChange,
    Transition,
)

RUNNING = "running"
PAUSED = "paused"
COMPLETED = "completed"
CANCELLED = "cancelled"
FAILED = "failed"
STATES = (RUNNING, PAUSED, COMPLETED, CANCELLED, FAILED)
UNFINISHED = frozenset({RUNNING, PAUSED})

# What a pinned dead letter is: waiting, moved back to its queue, skipped (no longer dead when its
# turn came), failed (an upcaster refused its payload: it stays dead, with the error), and, once
# its job ended, succeeded or dead again.
PENDING = "pending"
MOVED = "moved"
SKIPPED = "skipped"
ITEM_FAILED = FAILED
SUCCEEDED = "succeeded"
DEAD_AGAIN = "dead_again"
ITEM_STATES = (PENDING, MOVED, SKIPPED, ITEM_FAILED, SUCCEEDED, DEAD_AGAIN)

DEFAULT_RATE = 100  # dead letters a minute (seed 003 §5.2, "Default")
CRITICAL_RATE = 1000  # seed 003 §5.2, "Critical": admins only, with a reason
MINUTE_MS = 60_000
MAX_REASON = 500
MAX_FAILURE_MESSAGE = 2000
UNEXPECTED = "internal_error"  # the code of a failure that is no OjsError


@frozen_dataclass
class RedriveFailure:
    """Why a task stopped, or why one of its dead letters could not move: an error code and
    message, and (a task's) the job it stopped at."""

    code: str
    message: str
    job_id: str | None = None


@frozen_dataclass
class RedriveRequest:
    """Start a task: by filter or for one incident's dead letters, at a rate (None: the default),
    `critical` for a rate above the default (admins, with a reason), at most `limit` of them."""

    filters: DeadLetterFilter
    rate_per_minute: int | None = None
    critical: bool = False
    reason: str | None = None
    limit: int | None = None


@frozen_dataclass
class RedriveTask:
    """A task as stored: its pinned set's counts, its pace (`paced_until`: the moment up to which
    its rate has been spent), who started it and why, and its state."""

    id: str
    tenant_id: str
    state: str
    filter: dict[str, Any]
    incident_id: str | None
    rate_per_minute: int
    critical: bool
    reason: str | None
    created_by: str
    created_at: int
    updated_at: int
    updated_by: str
    finished_at: int | None
    paced_until: int
    to_move: int
    moved: int
    skipped: int
    succeeded: int
    dead_again: int
    queues: tuple[str, ...]
    # Dead letters an upcaster refused (they stay dead); why the task failed, when it did.
    failed: int = 0
    failure: RedriveFailure | None = None

    @property
    def pending(self) -> int:
        return self.to_move - self.moved - self.skipped - self.failed

    @property
    def verified(self) -> int:
        """How many redriven jobs have ended (succeeded or died again)."""
        return self.succeeded + self.dead_again

    @property
    def success_rate(self) -> float | None:
        """Of the redriven jobs that ended, the share that succeeded; None before any ended."""
        return None if not self.verified else self.succeeded / self.verified


@frozen_dataclass
class RedriveOutcome:
    """A redriven job ended: it succeeded, or died again (with its new fingerprint and incident);
    its item is the task's and the dead letter's the task moved (the job's own: a moved item has
    no row of its own until its job ends, and the job names its tenant and queue)."""

    task_id: str
    dead_letter_id: str
    job_id: str
    state: str
    fingerprint: str | None = None
    incident_id: str | None = None


@frozen_dataclass
class ItemOutcome:
    """An outcome as recorded: the pinned item's original incident beside where it died again."""

    task_id: str
    state: str
    incident_id: str | None
    died_incident_id: str | None

    @property
    def regresses(self) -> bool:
        """Died again the same way (the same incident: same type and fingerprint)."""
        return (
            self.state == DEAD_AGAIN
            and self.incident_id is not None
            and (self.incident_id == self.died_incident_id)
        )


def check_rate(request: RedriveRequest, caller: Caller, maximum: int) -> int:
    """The rate a request may run at: the default unless it asks for another; above the default
    only as `critical`, by an admin, with a reason, and never above `maximum`."""
    rate = DEFAULT_RATE if request.rate_per_minute is None else request.rate_per_minute
    if rate < 1:
        raise InvalidRequest("rate_per_minute must be at least 1", {"field": "rate_per_minute"})
    if rate > maximum:
        raise InvalidRequest(
            f"rate_per_minute is at most {maximum}", {"field": "rate_per_minute", "max": maximum}
        )
    if request.critical and caller.role != Role.ADMIN:
        raise Forbidden("a critical redrive needs the admin role")
    if request.critical and not request.reason:
        raise InvalidRequest("a critical redrive needs a reason", {"field": "reason"})
    if rate > DEFAULT_RATE and not request.critical:
        raise InvalidRequest(
            f"a rate above {DEFAULT_RATE}/minute is a critical redrive: send critical: true "
            "and a reason (admins only)",
            {"field": "critical"},
        )
    return rate


def burst(rate_per_minute: int) -> int:
    """A minute's worth: the most a task moves at once, and the largest bulk retry that still
    completes within its request."""
    return rate_per_minute


def due(task: RedriveTask, now: int) -> tuple[int, int]:
    """How many a running task may move now, and its pace afterwards. Its rate is spent evenly
    (each dead letter costs 60,000 / rate ms); credit left unspent (a pause, a restart, a slow
    tick) is kept for at most one minute, so a task never moves more than a burst at once."""
    if task.state != RUNNING or task.pending <= 0:
        return 0, task.paced_until
    start = max(task.paced_until, now - MINUTE_MS)
    if now <= start:
        return 0, task.paced_until
    count = min((now - start) * task.rate_per_minute // MINUTE_MS, task.pending)
    return count, paced_after(task, now, count)


def paced_after(task: RedriveTask, now: int, count: int) -> int:
    """A running task's pace once `count` of the dead letters due at `now` have moved."""
    if count <= 0:
        return task.paced_until
    start = max(task.paced_until, now - MINUTE_MS)
    return start + -(-count * MINUTE_MS // task.rate_per_minute)


class Change:
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"


# Each change: the states it starts from, and the state it leads to.
CHANGES: dict[str, tuple[frozenset[str], str]] = {
    Change.PAUSE: (frozenset({RUNNING}), PAUSED),
    Change.RESUME: (frozenset({PAUSED}), RUNNING),
    Change.CANCEL: (UNFINISHED, CANCELLED),
}


def change(task: RedriveTask, name: str) -> str:
    """The state `name` leads to, or a conflict when the task's state forbids it."""
    sources, target = CHANGES[name]
    if task.state not in sources:
        raise Conflict(
            f"cannot {name} redrive task {task.id} in state {task.state}",
            {"task_id": task.id, "state": task.state, "allowed": sorted(sources)},
        )
    return target


def check_reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_REASON:
        raise InvalidRequest(
            f"reason must be a non-empty string of at most {MAX_REASON} characters",
            {"field": "reason"},
        )
    return value.strip()


def failure_of(error: Exception, job_id: str | None) -> RedriveFailure:
    """The reason a batch raised `error`: an OJS error's code and message (and the job it names,
    else `job_id`); anything else is unexpected, named by its type."""
    if isinstance(error, OjsError):
        named = error.details.get("job_id")
        found = named if isinstance(named, str) else job_id
        return RedriveFailure(error.code, error.message[:MAX_FAILURE_MESSAGE], found)
    message = f"unexpected {type(error).__name__} in a batch: {error}"
    return RedriveFailure(UNEXPECTED, message[:MAX_FAILURE_MESSAGE], job_id)


def task_event(kind: str, task: RedriveTask) -> Event:
    """`redrive.started`, `redrive.completed`, `redrive.cancelled` or `redrive.failed` (with
    the reason), about the task as it is."""
    data: dict[str, Any] = {
        "task_id": task.id,
        "state": task.state,
        "incident_id": task.incident_id,
        "rate_per_minute": task.rate_per_minute,
        "to_move": task.to_move,
        "moved": task.moved,
        "skipped": task.skipped,
        "succeeded": task.succeeded,
        "dead_again": task.dead_again,
        "failed": task.failed,
        "queues": list(task.queues),
        "created_by": task.created_by,
        "reason": task.reason,
    }
    if task.failure is not None:
        data["failure"] = asdict(task.failure)
    queue = task.queues[0] if len(task.queues) == 1 else None
    return Event(kind, task.tenant_id, queue, None, task.id, data)


def regression(incident: Incident, now: int, changed_by: str) -> StateChange | None:
    """A redriven job died again the same way: an open or acknowledged incident regresses (a
    resolved one regressed already when the dead letter entered; an ignored one stays so)."""
    if incident.state not in (OPEN, ACKNOWLEDGED):
        return None
    return StateChange(
        incident.id, Transition.REOPEN, incident.state, REGRESSED, incident.fix_reference, now,
        changed_by,
    )  # fmt: skip


def closure(task: RedriveTask, incident: Incident, now: int) -> StateChange | None:
    """A finished task of one incident whose every redriven job succeeded resolves it (when the
    server is set to); the fix reference it has, or the task as the evidence."""
    finished = task.state == COMPLETED and task.moved > 0 and task.succeeded == task.moved
    if not finished or incident.state not in (OPEN, ACKNOWLEDGED, REGRESSED):
        return None
    reference = incident.fix_reference or f"redrive task {task.id} verified"
    return StateChange(
        incident.id, Transition.RESOLVE, incident.state, RESOLVED, reference, now,
        f"redrive:{task.id}",
    )  # fmt: skip
