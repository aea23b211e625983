"""What the job store's claims, acks and guarded updates take and give back (a worker's path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redrive.domain.frozen import frozen_dataclass

if TYPE_CHECKING:
    from redrive.domain.job import Job
    from redrive.domain.listeners import Listener


@frozen_dataclass
class Claim:
    """A request to lease up to `limit` available jobs of one queue (none of a paused one)."""

    queue: str
    limit: int
    worker_id: str | None
    lease_token: str
    visibility_timeout_ms: int | None
    tenant_id: str | None


class Claimed:
    """The `count` jobs a claim leased (by priority, then age), each with its `job.started`
    event; those of `unannounced` without it: their tenant has an active webhook subscription,
    so the caller emits their events (and queues the deliveries). The jobs are made from the
    claim's rows when first read (`jobs`), not in the unit: the SQLite store makes them while
    its thread commits (`SqlBase.defer`), where the worker's main thread made them (~7 us a
    job) with the store's one connection held and its thread idle."""

    __slots__ = ("_jobs", "_make", "count", "unannounced")

    def __init__(self, count: int, unannounced: list[Job], make: Callable[[], list[Job]]) -> None:
        self.count = count
        self.unannounced = unannounced
        self._make = make
        self._jobs: list[Job] | None = None

    @property
    def jobs(self) -> list[Job]:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = self._make()
        return jobs


@frozen_dataclass
class JobChange:
    """A decided job to write, guarded by the state and lease it was decided from."""

    job: Job
    expected_state: str
    expected_lease_token: str | None


@frozen_dataclass
class Completion:
    """One ack to write if its lease still holds: the job, the worker and lease token the
    request names (None: not named), its result and a block head (identifiers.
    uuid7_block_heads): the id of its `job.completed` event if that is a row of its own (a job
    of a subscribed tenant's always is), else of the run's row if its job is the run's first
    (the run's members' ids are that block's: domain/events.py `block_event_id`)."""

    job_id: str
    worker_id: str | None
    lease_token: str | None
    result: Any
    event_id: str


@frozen_dataclass
class CompletedJob:
    """A job an ack completed, as much of it as the ack's answer, event, metrics and redrive
    verification read."""

    id: str
    tenant_id: str
    queue: str
    type: str
    attempt: int
    max_attempts: int
    started_at: int | None
    redrive_task_id: str | None
    redrive_dead_letter_id: str | None


@frozen_dataclass
class Completions:
    """What a set of acks wrote: the jobs completed (an ack whose lease no longer held, or whose
    job is not there, is absent) and the active webhook subscriptions of their tenants."""

    done: list[CompletedJob]
    listeners: list[Listener]
