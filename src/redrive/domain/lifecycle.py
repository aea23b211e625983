"""State transitions of one job: ack, nack, cancel, lease expiry, TTL expiry, activation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from redrive.domain import job as states
from redrive.domain.durations import format_timestamp
from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.job import BACKTRACE_KEYS, Job, assemble_job, evolve
from redrive.domain.redaction import Redactor, counts_document
from redrive.domain.retry import matches_non_retryable, retry_delay_ms

MAX_ERROR_HISTORY = 50
DIRECTIVE_DEAD_LETTER = "DEAD_LETTER"
DIRECTIVES_DISCARD = frozenset({"DISCARD", "FAIL"})


@frozen_dataclass
class Failure:
    """A failed attempt as the worker (or the reaper) reported it."""

    code: str
    message: str
    type: str | None = None
    retryable: bool = True
    details: dict[str, Any] | None = None
    # How many secrets of each kind `redact_failure` removed (kept in the error record).
    redactions: Mapping[str, int] | None = None


@frozen_dataclass
class FailureOutcome:
    job: Job
    dead_letter_reason: str | None


assemble_outcome = Assembler(FailureOutcome)


def conflict(job: Job, action: str) -> Conflict:
    return Conflict(
        f"cannot {action} job {job.id} in state {job.state}",
        {"job_id": job.id, "state": job.state, "action": action},
    )


def check_lease(
    job: Job, now: int, action: str, worker_id: str | None, lease_token: str | None
) -> None:
    """Accept ack/nack/heartbeat only from the current, unexpired lease."""
    if job.state != states.ACTIVE:
        raise conflict(job, action)
    if job.lease_expires_at is not None and job.lease_expires_at <= now:
        raise Conflict(
            f"the lease on job {job.id} expired; another worker may hold it now",
            {"job_id": job.id, "reason": "lease_expired"},
        )
    if lease_token is not None and lease_token != job.lease_token:
        raise Conflict(
            f"lease token does not match the current lease on job {job.id}",
            {"job_id": job.id, "reason": "lease_replaced"},
        )
    if worker_id and job.worker_id and worker_id != job.worker_id:
        raise Conflict(
            f"job {job.id} is reserved by another worker",
            {"job_id": job.id, "reason": "worker_mismatch"},
        )


@frozen_dataclass
class Completed:
    """An acknowledged job as its ack reports it (an ack reads no more of the job)."""

    id: str
    attempt: int
    max_attempts: int
    completed_at: int
    state: str = states.COMPLETED


def _released() -> dict[str, Any]:
    return {"lease_token": None, "lease_expires_at": None, "timeout_at": None}


def completion(now: int) -> dict[str, Any]:
    """What an ack writes besides its result: completed now, no error, the lease released."""
    return {
        "state": states.COMPLETED, "completed_at": now, "error": None, "next_attempt_at": None,
        **_released(),
    }  # fmt: skip


def acknowledge(job: Job, now: int, result: Any) -> Job:
    return evolve(job, result=result, **completion(now))


def parse_failure(raw: object) -> Failure:
    """The `error` object of a nack; type falls back to details.error_class, then code.

    Wrong types are refused (naming the field) rather than stored as their Python spelling:
    code, type and message are strings, retryable a boolean, details an object, and a
    backtrace (`backtrace`, `stack`, `stacktrace`, `traceback`, in `error` or in its details) a
    string or an array of strings. null means absent, except for message (the one field the
    OJS JobError schema requires). Other keys are accepted: the schema leaves the object open.
    """
    if raw is None:
        return Failure(code="handler_error", message="")
    if not isinstance(raw, dict):
        raise InvalidRequest("error must be an object", {"field": "error"})
    details = raw.get("details")
    if details is not None and not isinstance(details, dict):
        raise InvalidRequest("error.details must be an object", {"field": "error.details"})
    message = raw.get("message", "")
    if not isinstance(message, str):
        raise InvalidRequest("error.message must be a string", {"field": "error.message"})
    code = _optional_string(raw, "code", "error") or "handler_error"
    error_type = _optional_string(raw, "type", "error")
    error_class = _optional_string(details or {}, "error_class", "error.details")
    retryable = raw.get("retryable")
    if retryable is not None and not isinstance(retryable, bool):
        raise InvalidRequest("error.retryable must be a boolean", {"field": "error.retryable"})
    _check_backtraces(raw, "error")
    _check_backtraces(details or {}, "error.details")
    return Failure(
        code=code,
        message=message,
        type=error_type or error_class or code,
        retryable=retryable is not False,
        details=details,
    )


def _optional_string(source: dict[str, Any], name: str, parent: str) -> str | None:
    value = source.get(name)
    if value is not None and not isinstance(value, str):
        field = f"{parent}.{name}"
        raise InvalidRequest(f"{field} must be a string", {"field": field})
    return value


def _check_backtraces(source: dict[str, Any], parent: str) -> None:
    for name in BACKTRACE_KEYS:
        value = source.get(name)
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, list) and all(isinstance(line, str) for line in value):
            continue
        field = f"{parent}.{name}"
        raise InvalidRequest(f"{field} must be a string or an array of strings", {"field": field})


def redact_failure(failure: Failure, redactor: Redactor) -> Failure:
    """The failure with secrets replaced by markers in its code, type, message and details
    (backtraces included), counting what went. Directive codes and plain words stay as they are,
    so retry decisions and error grouping read the same."""
    counts: Counter[str] = Counter()

    def text(value: str) -> str:
        redacted, found = redactor.redact(value)
        counts.update(found)
        return redacted

    details = None
    if failure.details is not None:
        details, found = redactor.redact_data(failure.details)
        counts.update(found)
    return replace(
        failure,
        code=text(failure.code),
        message=text(failure.message),
        type=None if failure.type is None else text(failure.type),
        details=details,
        redactions=counts_document(counts) or None,
    )


def redact_failures(failures: Sequence[Failure], redactor: Redactor) -> list[Failure]:
    """Each failure as `redact_failure` leaves it; equal failures (the jobs of a batch that fail
    the same way report the same error, word for word) are redacted once and share the result.
    Equal means the same `repr` of every field: values parsed from JSON, so no two different
    failures share one."""
    done: dict[str, Failure] = {}
    # The same failure given again (an embedded worker's nacks share one per document): its
    # redaction found without writing its repr again.
    by_identity: dict[int, Failure] = {}
    redacted = []
    for failure in failures:
        found = by_identity.get(id(failure))
        if found is None:
            key = repr((failure.code, failure.message, failure.type, failure.retryable,
                        failure.details, failure.redactions))  # fmt: skip
            found = done.get(key)
            if found is None:
                found = done[key] = redact_failure(failure, redactor)
            by_identity[id(failure)] = found
        redacted.append(found)
    return redacted


def error_record(failure: Failure, attempt: int, now: int) -> dict[str, Any]:
    moment = format_timestamp(now)
    record: dict[str, Any] = {
        "code": failure.code,
        "type": failure.type or failure.code,
        "message": failure.message,
        "retryable": failure.retryable,
        "details": failure.details or {},
        "attempt": attempt,
        "occurred_at": moment,
        "timestamp": moment,
    }
    if failure.redactions:
        record["redactions"] = dict(failure.redactions)
    return record


def _terminal(job: Job, failure: Failure) -> tuple[bool, str | None]:
    """(terminal?, dead-letter reason) for a failure that does not requeue."""
    if failure.code == DIRECTIVE_DEAD_LETTER:
        return True, "handler_requested"
    if failure.code in DIRECTIVES_DISCARD:
        return True, None
    if not failure.retryable or (
        # Most policies list no non-retryable errors: no candidates to gather then.
        (patterns := job.retry.non_retryable_errors)
        and matches_non_retryable(patterns, _candidates(failure))
    ):
        return True, _dead_letter_reason(job, "non_retryable_error")
    if failure.code == "RETRY":
        return job.attempt >= job.max_attempts, _dead_letter_reason(job, "max_attempts_exceeded")
    if job.attempt >= job.max_attempts:
        return True, _dead_letter_reason(job, "max_attempts_exceeded")
    return False, None


def _candidates(failure: Failure) -> list[str]:
    """The names a job's `non_retryable_errors` are matched against: type, code, error class."""
    candidates = [value for value in (failure.type, failure.code) if value]
    if failure.details and isinstance(failure.details.get("error_class"), str):
        candidates.append(failure.details["error_class"])
    return candidates


def _dead_letter_reason(job: Job, reason: str) -> str | None:
    return reason if job.retry.on_exhaustion == "dead_letter" else None


def fail(
    job: Job, now: int, failure: Failure, jitter_factor: float, requeue: bool = False,
    record: dict[str, Any] | None = None,
) -> FailureOutcome:  # fmt: skip
    """Apply one failed attempt: requeue, schedule a retry, or end the job (maybe as dead).
    `record` is `error_record(failure, job.attempt, now)` when the caller has it: the jobs of a
    batch that failed alike on the same attempt share one (read-only, as error records are)."""
    if record is None:
        record = error_record(failure, job.attempt, now)
    history = [*job.errors, record][-MAX_ERROR_HISTORY:]
    # The changes as one dict, given to `replaced` as it is, and the outcome assembled: no
    # keyword arguments packed twice, no frozen `__init__` (every nacked job makes one).
    changes: dict[str, Any] = {
        "error": record, "errors": history, "lease_token": None, "lease_expires_at": None,
        "timeout_at": None,
    }  # fmt: skip
    reason = None
    if requeue:
        # Handed back unrun (a worker shutting down): the delivery does not count against
        # max_attempts ("requeue without counting as a retry attempt"), so the next fetch
        # delivers the same attempt number again.
        changes.update(
            attempt=max(job.attempt - 1, 0), state=states.AVAILABLE, enqueued_at=now,
            worker_id=None, next_attempt_at=None, retry_delay_ms=None,
        )  # fmt: skip
    else:
        terminal, reason = _terminal(job, failure)
        if terminal:
            changes["state"] = states.DISCARDED
            changes["discarded_at"] = changes["completed_at"] = now
            changes["next_attempt_at"] = None
            changes["dead_lettered"] = reason is not None
        else:  # a retry: no dead-letter reason (`_terminal` may name the one it would be)
            reason = None
            delay = retry_delay_ms(job.retry, job.attempt, jitter_factor)
            changes["state"] = states.RETRYABLE
            changes["next_attempt_at"] = now + delay
            changes["retry_delay_ms"] = delay
    return assemble_outcome.adopt(
        {"job": assemble_job.replaced(job, changes), "dead_letter_reason": reason}
    )


def reap(job: Job, now: int, jitter_factor: float) -> FailureOutcome:
    """An active job whose lease or execution timeout ran out: it counts as a failed attempt.

    A lost lease (the worker vanished) makes the job available again at once; an execution
    timeout takes the normal retry path with backoff. Either way an exhausted job ends in its
    policy's terminal state, so a job whose worker keeps dying still reaches the dead-letter queue.
    """
    timed_out = job.timeout_at is not None and job.timeout_at <= now
    if timed_out:
        failure = Failure(
            code="timeout",
            type="timeout",
            message=f"execution exceeded timeout_ms={job.timeout_ms}",
        )
        return fail(job, now, failure, jitter_factor)
    failure = Failure(
        code="visibility_timeout",
        type="visibility_timeout",
        message="the worker's lease expired before it acknowledged the job",
    )
    outcome = fail(job, now, failure, jitter_factor)
    if outcome.job.state == states.RETRYABLE:
        available = evolve(
            outcome.job,
            state=states.AVAILABLE,
            enqueued_at=now,
            next_attempt_at=None,
            retry_delay_ms=None,
            worker_id=None,
        )
        return FailureOutcome(available, None)
    return outcome


def cancel(job: Job, now: int) -> Job:
    if job.state not in states.CANCELLABLE_STATES:
        raise conflict(job, "cancel")
    return evolve(job, state=states.CANCELLED, cancelled_at=now, **_released())


def activate(job: Job, now: int) -> Job:
    if job.state != states.PENDING:
        raise conflict(job, "activate")
    return evolve(job, state=states.AVAILABLE, enqueued_at=now)


def expire(job: Job, now: int) -> Job:
    """TTL ran out before the job started: discarded, no completed_at, not a dead letter."""
    return evolve(job, state=states.DISCARDED, discarded_at=now, expired_at=now)


def extend_lease(job: Job, now: int, visibility_timeout_ms: int | None) -> Job:
    return evolve(job, lease_expires_at=now + (visibility_timeout_ms or job.visibility_timeout_ms))
