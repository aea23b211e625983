"""Ending attempts: acks and nacks, one or a whole batch per transaction, and failure records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from redrive.domain import lifecycle
from redrive.domain.alerts import aggregate_key
from redrive.domain.caller import Caller
from redrive.domain.dead_letter import DeadLetter, new_dead_letter
from redrive.domain.errors import InvalidRequest, NotFound, OjsError
from redrive.domain.events import arrival_events, completed_event, failure_events
from redrive.domain.fingerprint import Fingerprint
from redrive.domain.incident import entries_of
from redrive.domain.job import AVAILABLE, Job
from redrive.domain.redrive import DEAD_AGAIN, SUCCEEDED, RedriveOutcome
from redrive.ports import AttemptWrites, JobChange, JobStore
from redrive.service.runtime import Runtime
from redrive.service.verification import verify

Request = TypeVar("Request", bound="AttemptRequest")
# One entry per request of a batch: the job as written, or why that request was refused.
Outcome = Job | OjsError


@dataclass(frozen=True)
class AttemptRequest:
    job_id: str
    worker_id: str | None
    lease_token: str | None


@dataclass(frozen=True)
class AckRequest(AttemptRequest):
    result: Any


@dataclass(frozen=True)
class NackRequest(AttemptRequest):
    failure: lifecycle.Failure
    requeue: bool


def check_batch(requests: list[Request | OjsError], field: str, limit: int) -> None:
    """A batch's size is the server's to limit; an empty batch means nothing."""
    if not requests:
        raise InvalidRequest(f"{field} must be a non-empty array", {"field": field})
    if len(requests) > limit:
        raise InvalidRequest(f"a batch holds at most {limit} {field}", {"field": field})


def without_repeats(requests: list[Request | OjsError]) -> list[Request | OjsError]:
    """A job named twice in one batch: the second entry is refused, the first goes ahead."""
    seen: set[str] = set()
    checked: list[Request | OjsError] = []
    for index, request in enumerate(requests):
        if not isinstance(request, OjsError) and request.job_id in seen:
            checked.append(
                InvalidRequest(
                    f"job {request.job_id} appears twice in the batch",
                    {"job_id": request.job_id, "index": index},
                )
            )
            continue
        if not isinstance(request, OjsError):
            seen.add(request.job_id)
        checked.append(request)
    return checked


async def lock_requested(
    transaction: JobStore, requests: list[Request | OjsError], tenant: str | None
) -> dict[str, Job]:
    ids = [request.job_id for request in requests if not isinstance(request, OjsError)]
    return await transaction.lock_jobs(ids, tenant)


def decide(
    request: Request | OjsError,
    jobs: dict[str, Job],
    now: int,
    action: str,
    apply: Callable[[Job, Request], Any],
) -> tuple[Job, Any] | OjsError:
    """Check one request against its locked job; (job before, the domain's outcome) or why not."""
    if isinstance(request, OjsError):
        return request
    job = jobs.get(request.job_id)
    if job is None:
        return NotFound("job", request.job_id)
    try:
        lifecycle.check_lease(job, now, action, request.worker_id, request.lease_token)
    except OjsError as error:
        return error
    return job, apply(job, request)


async def record_failures(
    runtime: Runtime,
    transaction: AttemptWrites,
    failures: list[tuple[Job, lifecycle.FailureOutcome]],
    now: int,
) -> set[str]:
    """Write failed attempts, the dead letters of those that died (fingerprinted, and added to
    their incidents) and their events, in one transaction; returns the ids written (the others
    lost a race)."""
    written = await transaction.update_jobs(
        [JobChange(outcome.job, job.state, job.lease_token) for job, outcome in failures]
    )
    landed = [(job, outcome) for job, outcome in failures if job.id in written]
    await transaction.notify({o.job.queue for _, o in landed if o.job.state == AVAILABLE})
    found: list[tuple[DeadLetter, Fingerprint]] = []
    dying = [
        (outcome.job, reason)
        for _, outcome in landed
        if (reason := outcome.dead_letter_reason) is not None
    ]
    for (job, reason), episode_id in zip(dying, runtime.new_ids(len(dying), now), strict=True):
        fingerprint = runtime.options.fingerprinter.fingerprint(job)
        dead = new_dead_letter(
            episode_id, job, reason, now, fingerprint,
            aggregate_key(runtime.options.alerts, job, runtime.options.redactor),
        )  # fmt: skip
        found.append((dead, fingerprint))
        runtime.metrics.dead_letter_added[(dead.job.queue, dead.job.type)] += 1
    entries = entries_of(found, runtime.options.classification_rules)
    incidents = await transaction.enter_dead_letters([dead for dead, _ in found], entries)
    events = [event for _, o in landed for event in failure_events(o.job, o.dead_letter_reason)]
    events += arrival_events(entries, incidents)
    await runtime.emit(transaction, events, now)
    redriven = [
        RedriveOutcome(task_id, dead.job.id, DEAD_AGAIN, fingerprint.value, dead.incident_id)
        for dead, fingerprint in found
        if (task_id := dead.job.redrive_task_id) is not None
    ]
    await verify(runtime, transaction, redriven, now)
    for job, _ in landed:
        runtime.metrics.failed[(job.queue, job.type)] += 1
    return written


async def acknowledge_all(
    runtime: Runtime, requests: list[AckRequest | OjsError], caller: Caller
) -> list[Outcome]:
    """Acknowledge many jobs in one transaction; each entry succeeds or fails on its own."""
    now = runtime.now()
    async with runtime.store.transaction(caller) as transaction:
        jobs = await lock_requested(transaction, requests, caller.tenant_scope)
        decided = [
            decide(
                request, jobs, now, "ack", lambda job, r: lifecycle.acknowledge(job, now, r.result)
            )
            for request in requests
        ]
        done = [entry for entry in decided if not isinstance(entry, OjsError)]
        written = await transaction.update_jobs(
            [JobChange(after, before.state, before.lease_token) for before, after in done]
        )
        await runtime.emit(
            transaction, [completed_event(after) for _, after in done if after.id in written], now
        )
        redriven = [
            RedriveOutcome(task_id, after.id, SUCCEEDED)
            for _, after in done
            if (task_id := after.redrive_task_id) is not None and after.id in written
        ]
        await verify(runtime, transaction, redriven, now)
    outcomes: list[Outcome] = []
    for entry in decided:
        if isinstance(entry, OjsError):
            outcomes.append(entry)
            continue
        before, after = entry
        if after.id not in written:
            outcomes.append(lifecycle.conflict(before, "ack"))
            continue
        runtime.metrics.completed[(before.queue, before.type)] += 1
        runtime.metrics.duration_sum_seconds += (now - (before.started_at or now)) / 1000
        runtime.metrics.duration_count += 1
        outcomes.append(after)
    return outcomes


async def fail_all(
    runtime: Runtime, requests: list[NackRequest | OjsError], caller: Caller
) -> list[Outcome]:
    """Record many failed attempts in one transaction; each entry succeeds or fails on its own.
    Secrets in the errors are redacted first: the job, its dead letter and the events all store
    the redacted error."""
    failures = iter(
        lifecycle.redact_failures(
            [r.failure for r in requests if not isinstance(r, OjsError)], runtime.options.redactor
        )
    )
    requests = [
        request if isinstance(request, OjsError) else replace(request, failure=next(failures))
        for request in requests
    ]
    now = runtime.now()

    def apply(job: Job, request: NackRequest) -> lifecycle.FailureOutcome:
        return lifecycle.fail(job, now, request.failure, runtime.jitter_factor(), request.requeue)

    async with runtime.store.transaction(caller) as transaction:
        jobs = await lock_requested(transaction, requests, caller.tenant_scope)
        decided = [decide(request, jobs, now, "nack", apply) for request in requests]
        written = await record_failures(
            runtime,
            transaction,
            [entry for entry in decided if not isinstance(entry, OjsError)],
            now,
        )
    outcomes: list[Outcome] = []
    for entry in decided:
        if isinstance(entry, OjsError):
            outcomes.append(entry)
        elif entry[0].id in written:
            outcomes.append(entry[1].job)
        else:
            outcomes.append(lifecycle.conflict(entry[0], "nack"))
    return outcomes


def single(outcomes: list[Outcome]) -> Job:
    """The one outcome of a one-request batch, raised when it is an error."""
    outcome = outcomes[0]
    if isinstance(outcome, OjsError):
        raise outcome
    return outcome
