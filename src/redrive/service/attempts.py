"""Ending attempts: acks and nacks, one or a whole batch per transaction, and failure records."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from redrive.domain import lifecycle
from redrive.domain.caller import Caller
from redrive.domain.errors import InvalidRequest, NotFound, OjsError
from redrive.domain.events import (
    arrival_events,
    batch_failure_runs,
    completion_event,
    event_runs,
)
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.job import AVAILABLE, COMPLETED, Job
from redrive.ports import (
    AttemptWrites,
    CompletedJob,
    Completion,
    JobChange,
    JobStore,
    StoredEvent,
)
from redrive.service.runtime import Runtime
from redrive.service.verification import verify

# The dead-letter, incident, alert and redrive modules are imported where a failure or a
# redriven job needs them: an embedded worker acking its first jobs loads none of them (they
# were a fifth of its start-up instructions; its sweep imports them a sweep interval later).
if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter
    from redrive.domain.fingerprint import Fingerprint
    from redrive.domain.listeners import Listener

# Each ack's record for the store, assembled (no frozen __init__ setting each of its fields).
assemble_completion = Assembler(Completion)
# Each failed job's change for the store, assembled too.
assemble_change = Assembler(JobChange)
# Each ack's answer, assembled too (its frozen __init__ cost ~9,000 instructions a job).
assemble_completed = Assembler(lifecycle.Completed)
Request = TypeVar("Request", bound="AttemptRequest")
Answer = TypeVar("Answer")
# One entry per request of a batch: the job as written, or why that request was refused.
Outcome = Job | OjsError
# One entry per ack of a batch: the job completed, or why that ack was refused.
Acknowledgement = lifecycle.Completed | OjsError


@frozen_dataclass
class AttemptRequest:
    job_id: str
    worker_id: str | None
    lease_token: str | None


@frozen_dataclass
class AckRequest(AttemptRequest):
    result: Any


@frozen_dataclass
class NackRequest(AttemptRequest):
    failure: lifecycle.Failure
    requeue: bool
    # The job as this worker's own claim returned it (an embedded worker holds it): while that
    # lease has not expired by the clock, the nack decides from it instead of reading the row
    # again; the write is still refused unless the row's state and lease are the claim's.
    held: Job | None = None


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


def held_jobs(
    requests: list[NackRequest | OjsError], now: int, tenant: str | None
) -> dict[str, Job]:
    """The jobs the nacks hold from their own claim, where deciding from them gives what the row
    would: the same lease, unexpired at the claim's expiry (a heartbeat only extends it, and
    anything else that touched the row changed its state or lease, which the guarded write
    refuses). The others are read."""
    held: dict[str, Job] = {}
    for request in requests:
        if isinstance(request, OjsError) or (job := request.held) is None:
            continue
        if (
            job.id == request.job_id
            and job.lease_token is not None
            and job.lease_token == request.lease_token
            and job.lease_expires_at is not None
            and job.lease_expires_at > now
            and (tenant is None or job.tenant_id == tenant)
        ):
            held[job.id] = job
    return held


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
    from redrive.domain.alerts import aggregate_key
    from redrive.domain.dead_letter import new_dead_letter
    from redrive.domain.incident import entries_of
    from redrive.domain.redrive import DEAD_AGAIN, RedriveOutcome

    written = await transaction.update_jobs(
        [
            assemble_change.adopt(
                {"job": outcome.job, "expected_state": job.state,
                 "expected_lease_token": job.lease_token}
            )
            for job, outcome in failures
        ]
    )  # fmt: skip
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
            aggregate_key(runtime.alerts, job, runtime.options.redactor),
        )  # fmt: skip
        found.append((dead, fingerprint))
        runtime.metrics.dead_letter_added[(dead.job.queue, dead.job.type)] += 1
    entries = entries_of(found, runtime.options.classification_rules)
    incidents = await transaction.enter_dead_letters([dead for dead, _ in found], entries)
    runs = batch_failure_runs([(o.job, o.dead_letter_reason) for _, o in landed])
    runs += event_runs(arrival_events(entries, incidents))
    await runtime.emit_runs(transaction, runs, now)
    redriven = [
        RedriveOutcome(task_id, item, dead.job.id, DEAD_AGAIN, fingerprint.value, dead.incident_id)
        for dead, fingerprint in found
        if (task_id := dead.job.redrive_task_id) is not None
        and (item := dead.job.redrive_dead_letter_id) is not None
    ]
    await verify(runtime, transaction, redriven, now)
    for job, _ in landed:
        runtime.metrics.failed[(job.queue, job.type)] += 1
    return written


async def acknowledge_all(
    runtime: Runtime, requests: list[AckRequest | OjsError], caller: Caller
) -> list[Acknowledgement]:
    """Acknowledge many jobs in one transaction; each entry succeeds or fails on its own (a job
    named twice: the second is refused)."""
    now = runtime.now()
    async with runtime.store.transaction(caller) as transaction:
        outcomes, done = await _acknowledge(
            runtime, transaction, without_repeats(requests), caller.tenant_scope, now
        )
    _count(runtime, done, now)
    return outcomes


async def acknowledge_one(runtime: Runtime, request: AckRequest, caller: Caller) -> Job:
    """One ack, answered with the whole job as the ack left it (read in its transaction)."""
    now = runtime.now()
    async with runtime.store.transaction(caller) as transaction:
        outcomes, done = await _acknowledge(
            runtime, transaction, [request], caller.tenant_scope, now
        )
        job = await transaction.get_job(single(outcomes).id, caller.tenant_scope)
    _count(runtime, done, now)
    if job is None:  # never: the ack holds the row's lock until it commits
        raise NotFound("job", request.job_id)
    return job


async def _acknowledge(
    runtime: Runtime, transaction: AttemptWrites, requests: list[AckRequest | OjsError],
    tenant: str | None, now: int,
) -> tuple[list[Acknowledgement], list[CompletedJob]]:  # fmt: skip
    """Write the acks (of distinct jobs) in one guarded statement that reads no job; only those
    it did not write (lease lost, wrong state, unknown job, another tenant's) are locked, read
    and checked (`lifecycle.check_lease`), so each gets its own refusal, and any of them the
    check accepts (its job changed in between) is written by the same statement again.
    Returns the outcomes in order and the jobs completed."""
    columns = lifecycle.completion(now)
    asked = [request for request in requests if not isinstance(request, OjsError)]
    # Each ack's record as written (its event id): read only when a listener wants the events.
    written_acks: list[Completion] = []
    listeners: dict[str, Listener] = {}
    done: dict[str, CompletedJob] = {}

    async def complete(chosen: list[AckRequest]) -> None:
        # Block heads: the acks' events are a row a run of alike jobs, named by its first
        # ack's (complete_jobs); a subscribed tenant's job's is a row of its own, its ack's id.
        ids = runtime.block_heads(len(chosen), now)
        completions = [
            assemble_completion.adopt(
                {
                    "job_id": r.job_id,
                    "worker_id": r.worker_id,
                    "lease_token": r.lease_token,
                    "result": r.result,
                    "event_id": event_id,
                }
            )
            for r, event_id in zip(chosen, ids, strict=True)
        ]
        written_acks.extend(completions)
        written = await transaction.complete_jobs(completions, columns, tenant, now)
        done.update({job.id: job for job in written.done})
        listeners.update({listener.id: listener for listener in written.listeners})

    await complete(asked)
    refused: dict[str, OjsError] = {}
    rest = [request for request in asked if request.job_id not in done]
    if rest:
        jobs = await transaction.lock_jobs([request.job_id for request in rest], tenant)
        decided = {r.job_id: decide(r, jobs, now, "ack", lambda job, r: None) for r in rest}
        refused = {
            job_id: entry for job_id, entry in decided.items() if isinstance(entry, OjsError)
        }
        await complete([request for request in rest if request.job_id not in refused])
        for job_id, entry in decided.items():
            if not isinstance(entry, OjsError) and job_id not in done:
                refused[job_id] = lifecycle.conflict(entry[0], "ack")
    completed = [done[request.job_id] for request in asked if request.job_id in done]
    if listeners:
        # (A job completed by the second write keeps the event id of that write's record.)
        event_ids = {c.job_id: c.event_id for c in written_acks}
        results = {request.job_id: request.result for request in asked}
        stored = [
            StoredEvent(event_ids[job.id], 0, now, completion_event(
                job.id, job.tenant_id, job.queue, job.type, job.attempt, (job.started_at, now),
                results[job.id],
            ))
            for job in completed
        ]  # fmt: skip
        await runtime.queue_deliveries(transaction, list(listeners.values()), stored, now)
    if any(job.redrive_task_id is not None for job in completed):
        from redrive.domain.redrive import SUCCEEDED, RedriveOutcome

        redriven = [
            RedriveOutcome(task_id, item, job.id, SUCCEEDED)
            for job in completed
            if (task_id := job.redrive_task_id) is not None
            and (item := job.redrive_dead_letter_id) is not None
        ]
        await verify(runtime, transaction, redriven, now)
    outcomes: list[Acknowledgement] = []
    for request in requests:
        if isinstance(request, OjsError):
            outcomes.append(request)
        elif request.job_id in refused:
            outcomes.append(refused[request.job_id])
        else:
            job = done[request.job_id]
            outcomes.append(
                assemble_completed.adopt(
                    {"id": job.id, "attempt": job.attempt, "max_attempts": job.max_attempts,
                     "completed_at": now, "state": COMPLETED}
                )
            )  # fmt: skip
    return outcomes, completed


def _count(runtime: Runtime, done: list[CompletedJob], now: int) -> None:
    """The metrics of completed jobs, once their transaction committed."""
    metrics = runtime.metrics
    completed, duration = metrics.completed, metrics.duration_sum_seconds
    for job in done:  # the same sums, in the same order, without their attribute reads a job
        completed[(job.queue, job.type)] += 1
        duration += (now - (job.started_at or now)) / 1000
    metrics.duration_sum_seconds = duration
    metrics.duration_count += len(done)


async def fail_all(
    runtime: Runtime, requests: list[NackRequest | OjsError], caller: Caller
) -> list[Outcome]:
    """Record many failed attempts (of distinct jobs: `without_repeats`) in one transaction; each
    entry succeeds or fails on its own. Secrets in the errors are redacted first: the job, its
    dead letter and the events all store the redacted error."""
    asked = [request for request in requests if not isinstance(request, OjsError)]
    # Each job's redacted failure, by its id: no copy of each request to carry it (4 us a nack).
    redacted = lifecycle.redact_failures([r.failure for r in asked], runtime.options.redactor)
    failures = {request.job_id: failure for request, failure in zip(asked, redacted, strict=True)}
    now = runtime.now()
    # Each error record made once for the jobs that failed alike on the same attempt, and shared
    # (read-only): their failure events then compare it by identity to join one run of the
    # outbox (`batch_failure_runs`), not key by key with its backtrace.
    records: dict[tuple[int, int], dict[str, Any]] = {}

    def apply(job: Job, request: NackRequest) -> lifecycle.FailureOutcome:
        failure = failures[request.job_id]
        key = (id(failure), job.attempt)
        record = records.get(key)
        if record is None:
            record = records[key] = lifecycle.error_record(failure, job.attempt, now)
        return lifecycle.fail(job, now, failure, runtime.jitter_factor(), request.requeue, record)

    jobs = held_jobs(requests, now, caller.tenant_scope)
    unheld: list[NackRequest | OjsError] = [
        request
        for request in requests
        if isinstance(request, OjsError) or request.job_id not in jobs
    ]
    async with runtime.store.transaction(caller) as transaction:
        jobs.update(await lock_requested(transaction, unheld, caller.tenant_scope))
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


def single(outcomes: list[Answer | OjsError]) -> Answer:
    """The one outcome of a one-request batch, raised when it is an error."""
    outcome = outcomes[0]
    if isinstance(outcome, OjsError):
        raise outcome
    return outcome
