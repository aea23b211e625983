"""Lifecycle events in the OJS event vocabulary, built from a job and what just happened to it."""

from __future__ import annotations

from dataclasses import field
from itertools import groupby
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from redrive.domain.durations import format_timestamp
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.identifiers import (
    SERIES_COUNTER,
    UUID7_PATTERN,
    block_head,
    block_of,
    in_block,
    position_in_block,
)  # fmt: skip
from redrive.domain.job import SCHEDULED, Job

# Named for the builders' types only: a producer that only enqueues (its events built here)
# loads neither the dead-letter, incident nor alert rules.
if TYPE_CHECKING:
    from redrive.domain.alerts import Alert
    from redrive.domain.dead_letter import MovedEpisode
    from redrive.domain.incident import Incident, IncidentEntry

# Every event type the server emits: webhook subscriptions name these, or a prefix of them
# (`dead_letter.*`), or `*`. A new kind of event is one more line here.
EVENT_TYPES = frozenset(
    {
        "job.enqueued", "job.scheduled", "job.started", "job.completed", "job.failed",
        "job.retrying", "job.discarded", "job.cancelled", "job.expired",
        "dead_letter.added", "dead_letter.retried", "dead_letter.replayed",
        "dead_letter.deleted", "dead_letter.pruned", "dead_letter.retention_floor_holding",
        "queue.paused", "queue.resumed", "cron.triggered", "cron.skipped",
        "incident.opened", "incident.regressed", "incident.resolved",
        "redrive.started", "redrive.completed", "redrive.cancelled", "redrive.failed",
        "alert.fired", "alert.acknowledged", "alert.resolved",
        "incident.classified", "incident.root_cause_recorded",
    }
)  # fmt: skip
SOURCE = "ojs://redrive"


@frozen_dataclass
class Event:
    type: str
    tenant_id: str
    queue: str | None
    job_type: str | None
    subject: str | None
    data: dict[str, Any] = field(default_factory=dict)


# Events are assembled (no frozen __init__ setting each field): a failed attempt makes two or
# three a job.
assemble_event = Assembler(Event)


def _event(
    kind: str, tenant_id: str, queue: str, job_type: str, subject: str, /, **data: Any
) -> Event:
    """Positional-only, so `data` may carry any key (a cron's event names its `job_id`)."""
    event_type = kind if "." in kind else f"job.{kind}"
    return _event_of(event_type, tenant_id, queue, job_type, subject, data)


def _event_of(
    event_type: str, tenant_id: str, queue: str, job_type: str, subject: str, data: dict[str, Any]
) -> Event:
    """The event, its null data left out."""
    payload: dict[str, Any] = {"job_type": job_type, "queue": queue}
    for key, value in data.items():
        if value is not None:
            payload[key] = value
    return assemble_event.adopt(
        {
            "type": event_type,
            "tenant_id": tenant_id,
            "queue": queue,
            "job_type": job_type,
            "subject": subject,
            "data": payload,
        }
    )


def job_event(kind: str, job: Job, **data: Any) -> Event:
    """An event about one job; `kind` is the part after `job.` or a full dotted name."""
    return _event(kind, job.tenant_id, job.queue, job.type, job.id, **data)


def enqueued_event_type(job: Job) -> str:
    """What a new job announces: `job.scheduled` if it waits for its time, else `job.enqueued`."""
    return "job.scheduled" if job.state == SCHEDULED else "job.enqueued"


def enqueued_event(job: Job) -> Event:
    """The event of a new job: its type, queue and priority. The enqueue statement
    (store/*/statements.sql, enqueue_jobs) writes the same row from the job's own columns, so an
    enqueue builds none of these unless a webhook subscription wants them."""
    return job_event(enqueued_event_type(job), job, priority=job.priority)


# An event's id: `evt_` and a UUIDv7.
EVENT_ID_PREFIX = "evt_"
# What one job's attributes say of its enqueued event's row: consecutive jobs of a batch alike in
# these (the same tenant, event type, queue and job type) share one row of the outbox.
_RUN_KEY = attrgetter("tenant_id", "state", "queue", "type")


def enqueued_runs(jobs: list[Job]) -> list[int]:
    """The sizes of a batch's runs of jobs whose events one outbox row keeps: consecutive jobs
    alike in tenant, state (so event type), queue and job type, at most 4,096 a run (the ids of
    a run's events are one block, `uuid7_blocks`: the run's row is named by the first and each
    event's counter is its position). A batch of one kind of job is one run."""
    sizes: list[int] = []
    for _, run in groupby(jobs, _RUN_KEY):
        size = sum(1 for _ in run)
        while size > len(SERIES_COUNTER):
            sizes.append(len(SERIES_COUNTER))
            size -= len(SERIES_COUNTER)
        sizes.append(size)
    return sizes


def alike_runs(events: list[Event]) -> list[int]:
    """The sizes of the runs of consecutive events one outbox row keeps: each about a subject and
    alike in all else (type, tenant, queue, job type and data), at most 4,096 a run (the ids of a
    run's events are one block, as `enqueued_runs`' are). A batch of nacks that fail alike (the
    same error, attempt and outcome) announces each kind of event in one run; events that differ
    are runs of one."""
    sizes: list[int] = []
    previous: Event | None = None
    for event in events:
        if (
            previous is not None
            and previous.subject is not None
            and event.subject is not None
            and sizes[-1] < len(SERIES_COUNTER)
            and event.type == previous.type
            and event.tenant_id == previous.tenant_id
            and event.queue == previous.queue
            and event.job_type == previous.job_type
            and event.data == previous.data
        ):
            sizes[-1] += 1
        else:
            sizes.append(1)
        previous = event
    return sizes


@frozen_dataclass(slots=True)
class EventRun:
    """Consecutive events alike in all but their subjects (`alike_runs`), as one outbox row keeps
    them: the first event, and each one's subject in order (a run of one: its own)."""

    event: Event
    subjects: list[str | None]


def event_runs(events: list[Event]) -> list[EventRun]:
    """The events as the runs `alike_runs` finds in them."""
    runs: list[EventRun] = []
    start = 0
    for size in alike_runs(events):
        run = events[start : start + size]
        runs.append(EventRun(run[0], [event.subject for event in run]))
        start += size
    return runs


def event_block_id(event_id: str) -> str:
    """The id of the row that keeps the event of a run's block (`enqueued_runs`)."""
    return EVENT_ID_PREFIX + block_of(event_id[len(EVENT_ID_PREFIX) :])


def block_position(event_id: str) -> tuple[str, int] | None:
    """The row an event id would be kept in as one of a block (its id) and its position there;
    None if the id is not an event id of that shape."""
    uuid = event_id[len(EVENT_ID_PREFIX) :]
    if not event_id.startswith(EVENT_ID_PREFIX) or UUID7_PATTERN.fullmatch(uuid) is None:
        return None
    return EVENT_ID_PREFIX + block_of(uuid), position_in_block(uuid)


def block_event_id(block_id: str, position: int) -> str:
    """The id of the event at `position` of the block whose row is `block_id`."""
    return EVENT_ID_PREFIX + in_block(block_id[len(EVENT_ID_PREFIX) :], position)


@frozen_dataclass(slots=True)
class BlockHeads:
    """A claim's or a bulk retry chunk's block heads, one a job or chosen episode, kept as their
    parts (identifiers.uuid7_block_head_parts): `prefix`, `evt_` and the text every head's UUID
    begins with, and `randoms`, 8 bytes a head. The statement (claim_jobs, retry_dead_letters)
    builds only the heads of the blocks it writes, and `retried_event_ids` those of the
    episodes webhooks are told of: made as a list, 5,000 ids a chunk were ~9 ms of the caller's
    CPU before each statement, which named its events by one or two of them."""

    prefix: str
    randoms: bytes

    def __getitem__(self, index: int) -> str:
        return block_head(self.prefix, self.randoms, index)

    def __len__(self) -> int:
        return len(self.randoms) // 8


def retried_event_ids(
    chosen: list[str], heads: BlockHeads, moved: list[MovedEpisode]
) -> dict[str, str]:
    """The ids of the `dead_letter.retried` events of the `moved` episodes, by episode id, as
    a retry chunk that chose `chosen` (in order, each with its block head in `heads`) writes
    them (retry_dead_letters): a block for each tenant, queue and job type among each 4,096
    chosen, named by its first member's head, its members in the chosen order. `moved` holds
    every moved episode of the tenants asked about."""
    place = {episode_id: index for index, episode_id in enumerate(chosen)}
    blocks: dict[tuple[str, str, str, int], tuple[str, int]] = {}
    ids: dict[str, str] = {}
    for episode in sorted(moved, key=lambda episode: place[episode.id]):
        index = place[episode.id]
        key = (episode.tenant_id, episode.queue, episode.type, index // len(SERIES_COUNTER))
        block, size = blocks.get(key, (heads[index], 0))
        blocks[key] = (block, size + 1)
        ids[episode.id] = block_event_id(block, size)
    return ids


def episode_event(kind: str, episode: MovedEpisode, **data: Any) -> Event:
    """The same event about the job of an episode a bulk operation moved."""
    return _event(kind, episode.tenant_id, episode.queue, episode.type, episode.job_id, **data)


def started_event(job: Job) -> Event:
    return job_event("started", job, worker_id=job.worker_id, attempt=job.attempt)


def completed_event(job: Job) -> Event:
    return completion_event(
        job.id, job.tenant_id, job.queue, job.type, job.attempt, (job.started_at, job.completed_at),
        job.result,
    )  # fmt: skip


def completion_event(
    job_id: str, tenant_id: str, queue: str, job_type: str, attempt: int,
    times: tuple[int | None, int | None], result: Any,
) -> Event:  # fmt: skip
    """A job's `job.completed`, from its columns (`times`: started and completed at). The ack
    statement (store/*/statements.sql, complete_jobs) writes the same row from the job's
    columns, so an ack builds none of these unless a webhook subscription wants them."""
    started_at, completed_at = times
    started = started_at or completed_at or 0
    duration = (completed_at or started) - started
    return _event(
        "completed", tenant_id, queue, job_type, job_id, duration_ms=duration, attempt=attempt,
        result=result,
    )  # fmt: skip


# The types of a failed attempt's events (`failure_events`).
FAILED, RETRYING, DISCARDED, DEAD_LETTER_ADDED = (
    "job.failed", "job.retrying", "job.discarded", "dead_letter.added"
)  # fmt: skip


def _failure_kinds(job: Job, dead_letter_reason: str | None) -> list[str]:
    """The types of `failure_events(job, dead_letter_reason)`, in order."""
    kinds = [FAILED]
    if job.state == "retryable":
        kinds.append(RETRYING)
    elif job.state == "discarded":
        kinds.append(DISCARDED)
    if dead_letter_reason is not None:
        kinds.append(DEAD_LETTER_ADDED)
    return kinds


def failure_events(job: Job, dead_letter_reason: str | None) -> list[Event]:
    """What a failed attempt announces: always job.failed, then retrying or discarded (and
    dead_letter.added for a dead letter)."""
    return [
        failure_event(kind, job, dead_letter_reason)
        for kind in _failure_kinds(job, dead_letter_reason)
    ]


def failure_event(kind: str, job: Job, dead_letter_reason: str | None) -> Event:
    """The event of type `kind` among a failed attempt's (`failure_events`), its data as a dict
    rather than keyword arguments passed down twice."""
    error = job.error
    data: dict[str, Any]
    if kind == FAILED:
        data = {"attempt": job.attempt, "error": error}
    elif kind == RETRYING:
        data = {
            "attempt": job.attempt,
            "max_attempts": job.max_attempts,
            "next_retry_at": format_timestamp(job.next_attempt_at or 0),
            "error": error,
        }
    elif kind == DISCARDED:
        data = {"total_attempts": job.attempt, "last_error": error}
    else:
        data = {"reason": dead_letter_reason, "error_type": (error or {}).get("type")}
    return _event_of(kind, job.tenant_id, job.queue, job.type, job.id, data)


def incident_event(kind: str, incident: Incident, queue: str | None = None) -> Event:
    """`incident.opened`, `incident.regressed` (in the queue of the dead letter that did it),
    `incident.resolved`, `incident.classified` or `incident.root_cause_recorded`, about one
    incident as it is after the change."""
    data: dict[str, Any] = {
        "incident_id": incident.id,
        "job_type": incident.type,
        "fingerprint": incident.fingerprint,
        "error_type": incident.error_type,
        "message": incident.message,
        "state": incident.state,
        "dead_count": incident.dead_count,
        "total_count": incident.total_count,
        "queues": list(incident.queues),
        "changed_by": incident.state_changed_by,
        "fix_reference": incident.fix_reference,
        "class": incident.classification,
    }
    return Event(kind, incident.tenant_id, queue, incident.type, incident.id, data)


def _alike_data(kind: str, job: Job, reason: str | None) -> tuple[Any, ...]:
    """What the data of `kind`'s event about `job` (`failure_event`) holds besides its type and
    queue: two jobs' events of one kind are alike when these are equal (the error first by
    identity: a nack batch's jobs that failed alike share one record)."""
    if kind in (FAILED, DISCARDED):
        return job.attempt, job.error
    if kind == RETRYING:
        return job.attempt, job.max_attempts, job.next_attempt_at or 0, job.error
    return reason, (job.error or {}).get("type")


def batch_failure_runs(failures: list[tuple[Job, str | None]]) -> list[EventRun]:
    """`event_runs` of the `failure_events` of a batch's failed jobs (each with its dead-letter
    reason, if any), the first event of every job, then the second of every job, and so on: each
    job's own events keep their order, and the jobs' alike events are consecutive, so that one
    outbox row keeps a run of them. Built as runs: an event is made for each run's first job
    only, the others compared to it (a batch that failed alike made and compared two or three
    events a job, each with its data)."""
    kinds = [_failure_kinds(job, reason) for job, reason in failures]
    # Whether each job's events are all alike those of the job before it (which then has the
    # same kinds, and is the last one of each of its runs): found once a job, then it joins
    # every run its predecessor is in without its events' data made and compared kind by kind
    # (three a dead-lettered job). The others are compared to their run's first as before.
    joins = [False] * len(failures)
    for index in range(1, len(failures)):
        job, reason = failures[index]
        joins[index] = _alike_failures(job, reason, *failures[index - 1])
    limit = len(SERIES_COUNTER)
    runs: list[EventRun] = []
    for step in range(max(map(len, kinds), default=0)):
        run: EventRun | None = None
        first: tuple[str, str, str, str, tuple[Any, ...]] | None = None
        for (job, reason), job_kinds, joined in zip(failures, kinds, joins, strict=True):
            if step >= len(job_kinds):
                continue
            if joined and run is not None and len(run.subjects) < limit:
                run.subjects.append(job.id)
                continue
            kind = job_kinds[step]
            alike = (kind, job.tenant_id, job.queue, job.type, _alike_data(kind, job, reason))
            if run is not None and alike == first and len(run.subjects) < limit:
                run.subjects.append(job.id)
                continue
            run = EventRun(failure_event(kind, job, reason), [job.id])
            first = alike
            runs.append(run)
    return runs


def _alike_failures(job: Job, reason: str | None, before: Job, before_reason: str | None) -> bool:
    """Whether every failure event of `job` is alike the one of the same kind of `before`
    (`_alike_data`): the same kinds (state and dead-letter reason), tenant, queue, type and
    attempt, the very same error record (a batch's jobs that failed alike share one), and for
    a retry the same limit and next attempt."""
    return (
        job.error is before.error
        and reason == before_reason
        and job.state == before.state
        and job.attempt == before.attempt
        and job.type == before.type
        and job.queue == before.queue
        and job.tenant_id == before.tenant_id
        and (
            job.state != "retryable"
            or (
                (job.next_attempt_at or 0) == (before.next_attempt_at or 0)
                and job.max_attempts == before.max_attempts
            )
        )
    )


def arrival_events(entries: list[IncidentEntry], incidents: list[Incident]) -> list[Event]:
    """What dead letters entering did to their incidents, announced: `incident.opened` for an
    incident they created, `incident.regressed` for a resolved one they reopened."""
    after = {incident.id: incident for incident in incidents}
    events = []
    for entry in entries:
        incident = after[entry.id]
        if entry.opened(incident):
            events.append(incident_event("incident.opened", incident, entry.queues[0]))
        elif entry.regressed(incident):
            events.append(incident_event("incident.regressed", incident, entry.queues[0]))
    return events


def alert_event(kind: str, alert: Alert) -> Event:
    """`alert.fired`, `alert.acknowledged` or `alert.resolved`, about one alert as it is after
    the change."""
    data: dict[str, Any] = {
        "alert_id": alert.id,
        "rule": alert.rule,
        "severity": alert.severity,
        "queue": alert.queue,
        "key": alert.key,
        "state": alert.state,
        "message": alert.message,
        "count": alert.count,
        "first_fired_at": format_timestamp(alert.first_fired_at),
        "last_fired_at": format_timestamp(alert.last_fired_at),
        "acknowledged_by": alert.acknowledged_by,
    }
    return Event(kind, alert.tenant_id, alert.queue, None, alert.id, data)


def event_envelope(event_id: str, time: int, event: Event) -> dict[str, Any]:
    """The OJS event envelope (CloudEvents 1.0 attributes) the event stream answers with and a
    webhook delivery carries as its body."""
    envelope: dict[str, Any] = {
        "specversion": "1.0",
        "id": event_id,
        "type": event.type,
        "source": SOURCE,
        "time": format_timestamp(time),
        "data": event.data,
    }
    if event.subject is not None:
        envelope["subject"] = event.subject
    return envelope
