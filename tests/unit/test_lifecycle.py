"""Unit tests for job state transitions: ack, lease checks, nack decisions, reaping, cancel, TTL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from redrive.domain import job as states
from redrive.domain.durations import format_timestamp
from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.job import Job
from redrive.domain.lifecycle import (
    MAX_ERROR_HISTORY,
    Failure,
    acknowledge,
    activate,
    cancel,
    check_lease,
    expire,
    extend_lease,
    fail,
    parse_failure,
    reap,
)
from redrive.domain.retry import RetryPolicy

NOW = 1_772_359_200_000  # 2026-03-01T10:00:00.000Z
STARTED = NOW - 5_000
NO_JITTER = RetryPolicy(jitter=False)
DLQ_POLICY = RetryPolicy(jitter=False, on_exhaustion="dead_letter")


def make_job(**changes: Any) -> Job:
    """An active job on its first attempt, held by worker w1, with `changes` applied."""
    base = Job(
        id="019cb7f3-b800-7000-8000-000000000001",
        tenant_id="_default",
        type="email.send",
        queue="default",
        args=["a@example.com"],
        state=states.ACTIVE,
        created_at=NOW - 60_000,
        attempt=1,
        retry=NO_JITTER,
        enqueued_at=NOW - 60_000,
        started_at=STARTED,
        worker_id="w1",
        lease_token="lease-1",
        lease_expires_at=NOW + 30_000,
    )
    return replace(base, **changes)


def handler_error(**changes: Any) -> Failure:
    return replace(
        Failure(code="handler_error", message="smtp refused", type="SmtpError"), **changes
    )


# --- acknowledge -------------------------------------------------------------------------------


def test_acknowledge_completes_the_job() -> None:
    job = make_job(
        error={"code": "old"}, errors=[{"code": "old"}], timeout_at=NOW + 1, next_attempt_at=NOW
    )
    done = acknowledge(job, NOW, {"sent": True})
    assert done.state == states.COMPLETED
    assert done.completed_at == NOW
    assert done.result == {"sent": True}
    assert done.error is None
    assert done.errors == [{"code": "old"}]
    assert (done.lease_token, done.lease_expires_at, done.timeout_at) == (None, None, None)
    assert done.next_attempt_at is None
    assert done.attempt == 1
    assert done.started_at == STARTED
    assert done.discarded_at is None


@pytest.mark.parametrize("result", [None, 0, "", [], {"nested": [1, {"x": None}]}])
def test_acknowledge_stores_result_as_given(result: Any) -> None:
    assert acknowledge(make_job(), NOW, result).result == result


# --- check_lease -------------------------------------------------------------------------------

# (job changes, worker_id sent, lease token sent)
LEASE_REFUSALS = [
    pytest.param({"state": states.AVAILABLE}, None, None, id="available"),
    pytest.param({"state": states.SCHEDULED}, None, None, id="scheduled"),
    pytest.param({"state": states.RETRYABLE}, None, None, id="retryable"),
    pytest.param({"state": states.COMPLETED}, None, None, id="completed"),
    pytest.param({"state": states.CANCELLED}, None, None, id="cancelled"),
    pytest.param({"state": states.DISCARDED}, None, None, id="discarded"),
    pytest.param({"lease_expires_at": NOW}, None, None, id="lease-expired-exactly-now"),
    pytest.param({"lease_expires_at": NOW - 1}, "w1", "lease-1", id="lease-expired"),
    pytest.param({}, None, "lease-0", id="wrong-lease-token"),
    pytest.param({}, "w2", None, id="different-worker"),
    pytest.param({}, "w2", "lease-1", id="different-worker-right-token"),
]


@pytest.mark.parametrize(("changes", "worker_id", "token"), LEASE_REFUSALS)
def test_check_lease_refuses(
    changes: dict[str, Any], worker_id: str | None, token: str | None
) -> None:
    with pytest.raises(Conflict) as caught:
        check_lease(make_job(**changes), NOW, "ack", worker_id, token)
    assert caught.value.code == "conflict"


# (job changes, worker_id sent, lease token sent)
LEASE_ACCEPTANCES = [
    pytest.param({}, None, None, id="worker-omitted"),
    pytest.param({}, "", None, id="worker-empty"),
    pytest.param({}, "w1", None, id="same-worker"),
    pytest.param({}, "w1", "lease-1", id="same-worker-and-token"),
    pytest.param({}, None, "lease-1", id="token-only"),
    pytest.param({"worker_id": None}, "w9", None, id="reservation-without-worker"),
    pytest.param({"lease_expires_at": None}, None, None, id="no-lease-deadline"),
    pytest.param({"lease_expires_at": NOW + 1}, "w1", None, id="lease-about-to-expire"),
]


@pytest.mark.parametrize(("changes", "worker_id", "token"), LEASE_ACCEPTANCES)
def test_check_lease_accepts(
    changes: dict[str, Any], worker_id: str | None, token: str | None
) -> None:
    check_lease(make_job(**changes), NOW, "nack", worker_id, token)


def test_extend_lease_uses_request_then_job_visibility() -> None:
    job = make_job(visibility_timeout_ms=3_000)
    assert extend_lease(job, NOW, 10_000).lease_expires_at == NOW + 10_000
    assert extend_lease(job, NOW, None).lease_expires_at == NOW + 3_000


# --- parse_failure -----------------------------------------------------------------------------

# (raw error, expected Failure)
PARSED_FAILURES = [
    pytest.param(None, Failure(code="handler_error", message="", type=None), id="missing"),
    pytest.param(
        {"code": "handler_error", "message": "boom", "type": "SmtpError"},
        Failure(code="handler_error", message="boom", type="SmtpError"),
        id="explicit-type",
    ),
    pytest.param(
        {"code": "handler_error", "message": "m", "details": {"error_class": "SmtpError"}},
        Failure(
            code="handler_error",
            message="m",
            type="SmtpError",
            details={"error_class": "SmtpError"},
        ),
        id="type-from-error-class",
    ),
    pytest.param(
        {"code": "E_TIMEOUT", "message": "m"},
        Failure(code="E_TIMEOUT", message="m", type="E_TIMEOUT"),
        id="type-from-code",
    ),
    pytest.param(
        {"message": "m"},
        Failure(code="handler_error", message="m", type="handler_error"),
        id="default-code",
    ),
    pytest.param(
        {"code": "x", "message": "m", "type": "T", "details": {"error_class": "C"}},
        Failure(code="x", message="m", type="T", details={"error_class": "C"}),
        id="type-beats-error-class",
    ),
    pytest.param(
        {"code": "x", "message": "m", "retryable": False},
        Failure(code="x", message="m", type="x", retryable=False),
        id="retryable-false",
    ),
    pytest.param(
        {"code": "x", "message": "m", "retryable": True},
        Failure(code="x", message="m", type="x", retryable=True),
        id="retryable-true",
    ),
    pytest.param(
        {"code": "x"}, Failure(code="x", message="", type="x"), id="message-defaults-empty"
    ),
]


@pytest.mark.parametrize(("raw", "expected"), PARSED_FAILURES)
def test_parse_failure(raw: object, expected: Failure) -> None:
    assert parse_failure(raw) == expected


INVALID_FAILURES = [
    pytest.param("boom", id="string"),
    pytest.param(["boom"], id="list"),
    pytest.param({"code": 500, "message": "m"}, id="code-number"),
    pytest.param({"code": "x", "message": 5}, id="message-number"),
    pytest.param({"code": "x", "message": "m", "details": "oops"}, id="details-string"),
    pytest.param({"code": "x", "message": "m", "details": [1]}, id="details-list"),
]


@pytest.mark.parametrize("raw", INVALID_FAILURES)
def test_parse_failure_rejects_bad_shapes(raw: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_failure(raw)
    assert caught.value.details["field"].startswith("error")


# --- fail: requeue and retry -------------------------------------------------------------------


def test_requeue_makes_the_job_available_without_backoff() -> None:
    job = make_job(attempt=2, retry=RetryPolicy(max_attempts=2))
    outcome = fail(job, NOW, handler_error(retryable=False), jitter_factor=1.0, requeue=True)
    assert outcome.dead_letter_reason is None
    assert outcome.job.state == states.AVAILABLE
    assert outcome.job.attempt == 1  # the handed-back delivery does not count
    assert outcome.job.enqueued_at == NOW
    assert outcome.job.next_attempt_at is None
    assert outcome.job.worker_id is None
    assert outcome.job.lease_token is None
    assert outcome.job.discarded_at is None
    assert outcome.job.completed_at is None
    assert outcome.job.dead_lettered is False
    assert outcome.job.error is not None
    assert len(outcome.job.errors) == 1


# (retry policy, attempt that failed, jitter factor, expected delay)
RETRIES = [
    pytest.param(NO_JITTER, 1, 1.0, 1_000, id="exponential-first"),
    pytest.param(NO_JITTER, 2, 1.0, 2_000, id="exponential-second"),
    pytest.param(replace(NO_JITTER, max_attempts=5), 4, 1.0, 8_000, id="exponential-fourth"),
    pytest.param(replace(NO_JITTER, backoff_strategy="linear"), 2, 1.0, 2_000, id="linear"),
    pytest.param(RetryPolicy(), 1, 0.5, 500, id="jitter-low"),
    pytest.param(RetryPolicy(), 1, 1.499, 1_499, id="jitter-high"),
]


@pytest.mark.parametrize(("retry", "attempt", "factor", "delay"), RETRIES)
def test_failure_with_attempts_left_schedules_a_retry(
    retry: RetryPolicy, attempt: int, factor: float, delay: int
) -> None:
    job = make_job(retry=retry, attempt=attempt)
    outcome = fail(job, NOW, handler_error(), factor)
    assert outcome.dead_letter_reason is None
    assert outcome.job.state == states.RETRYABLE
    assert outcome.job.retry_delay_ms == delay
    assert outcome.job.next_attempt_at == NOW + delay
    assert outcome.job.run_at == NOW + delay
    assert outcome.job.attempt == attempt
    assert outcome.job.completed_at is None
    assert outcome.job.discarded_at is None
    assert outcome.job.dead_lettered is False
    assert outcome.job.lease_token is None
    assert outcome.job.lease_expires_at is None


def test_stored_error_has_the_reference_fields() -> None:
    failure = handler_error(details={"error_class": "SmtpError", "host": "mx"})
    error = fail(make_job(), NOW, failure, 1.0).job.error
    assert error == {
        "code": "handler_error",
        "type": "SmtpError",
        "message": "smtp refused",
        "retryable": True,
        "details": {"error_class": "SmtpError", "host": "mx"},
        "attempt": 1,
        "occurred_at": format_timestamp(NOW),
        "timestamp": format_timestamp(NOW),
    }


# --- fail: terminal outcomes -------------------------------------------------------------------

# (job changes, failure, expected dead-letter reason)
TERMINAL_FAILURES = [
    pytest.param({"attempt": 3}, handler_error(), None, id="exhausted-discard-policy"),
    pytest.param(
        {"attempt": 3, "retry": DLQ_POLICY},
        handler_error(),
        "max_attempts_exceeded",
        id="exhausted-dead-letter-policy",
    ),
    pytest.param(
        {"attempt": 5, "retry": DLQ_POLICY},
        handler_error(),
        "max_attempts_exceeded",
        id="beyond-max-attempts",
    ),
    pytest.param(
        {"attempt": 1, "retry": replace(DLQ_POLICY, max_attempts=1)},
        handler_error(),
        "max_attempts_exceeded",
        id="single-attempt-policy",
    ),
    pytest.param(
        {"attempt": 1, "retry": replace(NO_JITTER, max_attempts=0)},
        handler_error(),
        None,
        id="max-attempts-zero",
    ),
    pytest.param({}, handler_error(retryable=False), None, id="retryable-false-discard"),
    pytest.param(
        {"retry": DLQ_POLICY},
        handler_error(retryable=False),
        "non_retryable_error",
        id="retryable-false-dead-letter",
    ),
    pytest.param(
        {"retry": replace(NO_JITTER, non_retryable_errors=("Smtp*",))},
        handler_error(),
        None,
        id="non-retryable-prefix-type",
    ),
    pytest.param(
        {"retry": replace(DLQ_POLICY, non_retryable_errors=("Auth.*",))},
        handler_error(type="Auth.TokenExpired"),
        "non_retryable_error",
        id="non-retryable-dotted-prefix",
    ),
    pytest.param(
        {"retry": replace(DLQ_POLICY, non_retryable_errors=("ValidationError",))},
        handler_error(type=None, code="x", details={"error_class": "ValidationError"}),
        "non_retryable_error",
        id="non-retryable-error-class",
    ),
    pytest.param(
        {"retry": replace(DLQ_POLICY, non_retryable_errors=("bad_input",))},
        handler_error(code="bad_input"),
        "non_retryable_error",
        id="non-retryable-code",
    ),
    pytest.param({}, handler_error(code="DEAD_LETTER"), "handler_requested", id="dead-letter-code"),
    pytest.param(
        {"retry": DLQ_POLICY},
        handler_error(code="DEAD_LETTER"),
        "handler_requested",
        id="dead-letter-code-dlq-policy",
    ),
    pytest.param({"retry": DLQ_POLICY}, handler_error(code="DISCARD"), None, id="discard-code"),
    pytest.param({"retry": DLQ_POLICY}, handler_error(code="FAIL"), None, id="fail-code"),
    pytest.param(
        {"attempt": 3, "retry": DLQ_POLICY},
        handler_error(code="RETRY"),
        "max_attempts_exceeded",
        id="retry-code-exhausted",
    ),
]


@pytest.mark.parametrize(("changes", "failure", "reason"), TERMINAL_FAILURES)
def test_terminal_failures(changes: dict[str, Any], failure: Failure, reason: str | None) -> None:
    job = make_job(**changes)
    outcome = fail(job, NOW, failure, jitter_factor=1.0)
    assert outcome.dead_letter_reason == reason
    assert outcome.job.state == states.DISCARDED
    assert outcome.job.dead_lettered is (reason is not None)
    assert outcome.job.completed_at == NOW
    assert outcome.job.discarded_at == NOW
    assert outcome.job.next_attempt_at is None
    assert outcome.job.attempt == job.attempt
    assert outcome.job.error is not None
    assert outcome.job.error["code"] == failure.code
    assert outcome.job.expired_at is None


# (job changes, failure) that must retry, not end the job
NON_TERMINAL_FAILURES = [
    pytest.param({"attempt": 2}, handler_error(), id="attempts-left"),
    pytest.param(
        {"retry": replace(NO_JITTER, non_retryable_errors=("Auth.*",))},
        handler_error(type="Auth"),
        id="prefix-does-not-match-parent",
    ),
    pytest.param(
        {"retry": replace(NO_JITTER, non_retryable_errors=("ValidationError",))},
        handler_error(type="ValidationErrorX"),
        id="exact-entry-is-not-prefix",
    ),
    pytest.param({"retry": DLQ_POLICY}, handler_error(code="RETRY"), id="retry-code"),
]


@pytest.mark.parametrize(("changes", "failure"), NON_TERMINAL_FAILURES)
def test_non_terminal_failures_retry(changes: dict[str, Any], failure: Failure) -> None:
    outcome = fail(make_job(**changes), NOW, failure, 1.0)
    assert outcome.job.state == states.RETRYABLE
    assert outcome.dead_letter_reason is None
    assert outcome.job.dead_lettered is False


def test_failure_history_appends_one_entry_per_failure() -> None:
    job = make_job(retry=replace(NO_JITTER, max_attempts=3))
    moments = [NOW, NOW + 10_000, NOW + 20_000]
    for attempt, moment in enumerate(moments, start=1):
        job = replace(job, state=states.ACTIVE, attempt=attempt, lease_expires_at=moment + 1)
        job = fail(job, moment, handler_error(message=f"try {attempt}"), 1.0).job
    assert job.state == states.DISCARDED
    assert [entry["attempt"] for entry in job.errors] == [1, 2, 3]
    assert [entry["message"] for entry in job.errors] == ["try 1", "try 2", "try 3"]
    assert [entry["occurred_at"] for entry in job.errors] == [format_timestamp(m) for m in moments]
    assert all(entry["code"] == "handler_error" for entry in job.errors)
    assert all(entry["type"] == "SmtpError" for entry in job.errors)
    assert job.error == job.errors[-1]


def test_failure_history_is_capped_keeping_the_newest() -> None:
    old = [{"attempt": index, "code": "old"} for index in range(MAX_ERROR_HISTORY)]
    job = make_job(errors=old, attempt=7, retry=replace(NO_JITTER, max_attempts=10))
    history = fail(job, NOW, handler_error(), 1.0).job.errors
    assert len(history) == MAX_ERROR_HISTORY
    assert history[0] == old[1]
    assert history[-1]["attempt"] == 7
    assert history[-1]["code"] == "handler_error"


def test_error_history_keeps_at_least_ten() -> None:
    assert MAX_ERROR_HISTORY >= 10


def test_fail_does_not_mutate_the_input_job() -> None:
    job = make_job()
    fail(job, NOW, handler_error(), 1.0)
    assert job.state == states.ACTIVE
    assert job.errors == []
    assert job.error is None


# --- reap --------------------------------------------------------------------------------------


def test_lost_lease_with_attempts_left_is_available_at_once() -> None:
    job = make_job(attempt=1, lease_expires_at=NOW - 1, retry=RetryPolicy())
    outcome = reap(job, NOW, jitter_factor=1.0)
    assert outcome.dead_letter_reason is None
    assert outcome.job.state == states.AVAILABLE
    assert outcome.job.enqueued_at == NOW
    assert outcome.job.next_attempt_at is None
    assert outcome.job.retry_delay_ms is None
    assert outcome.job.worker_id is None
    assert outcome.job.lease_token is None
    assert outcome.job.attempt == 1
    assert outcome.job.error is not None
    assert outcome.job.error["type"] == "visibility_timeout"
    assert outcome.job.error["attempt"] == 1
    assert [entry["type"] for entry in outcome.job.errors] == ["visibility_timeout"]


# (retry policy, expected dead-letter reason)
LOST_LEASE_EXHAUSTED = [
    pytest.param(DLQ_POLICY, "max_attempts_exceeded", id="dead-letter-policy"),
    pytest.param(NO_JITTER, None, id="discard-policy"),
]


@pytest.mark.parametrize(("retry", "reason"), LOST_LEASE_EXHAUSTED)
def test_lost_lease_on_last_attempt_ends_the_job(retry: RetryPolicy, reason: str | None) -> None:
    job = make_job(attempt=retry.max_attempts, lease_expires_at=NOW - 1, retry=retry)
    outcome = reap(job, NOW, jitter_factor=1.0)
    assert outcome.job.state == states.DISCARDED
    assert outcome.dead_letter_reason == reason
    assert outcome.job.dead_lettered is (reason is not None)
    assert outcome.job.discarded_at == NOW
    assert outcome.job.completed_at == NOW
    assert outcome.job.error is not None
    assert outcome.job.error["type"] == "visibility_timeout"


def test_job_whose_worker_keeps_dying_ends_in_the_dead_letter_queue() -> None:
    job = make_job(
        state=states.AVAILABLE, attempt=0, worker_id=None, lease_token=None, retry=DLQ_POLICY
    )
    moment = NOW
    reasons: list[str | None] = []
    for _ in range(DLQ_POLICY.max_attempts):
        assert job.state == states.AVAILABLE
        fetched = replace(
            job,
            state=states.ACTIVE,
            attempt=job.attempt + 1,
            worker_id="w1",
            lease_token="t",
            lease_expires_at=moment + 1_000,
        )
        moment += 2_000
        outcome = reap(fetched, moment, 1.0)
        job = outcome.job
        reasons.append(outcome.dead_letter_reason)
    assert job.state == states.DISCARDED
    assert reasons == [None, None, "max_attempts_exceeded"]
    assert job.dead_lettered is True
    assert [entry["attempt"] for entry in job.errors] == [1, 2, 3]
    assert {entry["type"] for entry in job.errors} == {"visibility_timeout"}


def test_execution_timeout_takes_the_retry_path_with_backoff() -> None:
    job = make_job(attempt=1, timeout_ms=2_000, timeout_at=NOW - 1, lease_expires_at=NOW + 60_000)
    outcome = reap(job, NOW, jitter_factor=1.0)
    assert outcome.dead_letter_reason is None
    assert outcome.job.state == states.RETRYABLE
    assert outcome.job.retry_delay_ms == 1_000
    assert outcome.job.next_attempt_at == NOW + 1_000
    assert outcome.job.error is not None
    assert outcome.job.error["code"] == "timeout"
    assert outcome.job.error["type"] == "timeout"
    assert "2000" in outcome.job.error["message"]


def test_execution_timeout_on_last_attempt_dead_letters() -> None:
    job = make_job(attempt=3, timeout_ms=2_000, timeout_at=NOW, retry=DLQ_POLICY)
    outcome = reap(job, NOW, jitter_factor=1.0)
    assert outcome.job.state == states.DISCARDED
    assert outcome.dead_letter_reason == "max_attempts_exceeded"
    assert outcome.job.dead_lettered is True


# --- cancel, activate, expire ------------------------------------------------------------------


@pytest.mark.parametrize("state", sorted(states.CANCELLABLE_STATES))
def test_cancel_from_cancellable_states(state: str) -> None:
    job = make_job(state=state)
    cancelled = cancel(job, NOW)
    assert cancelled.state == states.CANCELLED
    assert cancelled.cancelled_at == NOW
    assert cancelled.completed_at is None
    assert cancelled.attempt == job.attempt
    assert cancelled.started_at == job.started_at
    assert cancelled.lease_token is None
    assert cancelled.lease_expires_at is None


@pytest.mark.parametrize("state", sorted(states.TERMINAL_STATES))
def test_cancel_from_terminal_states_conflicts(state: str) -> None:
    with pytest.raises(Conflict) as caught:
        cancel(make_job(state=state), NOW)
    assert caught.value.details["state"] == state
    assert caught.value.details["action"] == "cancel"


def test_activate_pending_job() -> None:
    job = make_job(state=states.PENDING, enqueued_at=None, attempt=0)
    activated = activate(job, NOW)
    assert activated.state == states.AVAILABLE
    assert activated.enqueued_at == NOW


@pytest.mark.parametrize("state", [s for s in states.STATES if s != states.PENDING])
def test_activate_from_other_states_conflicts(state: str) -> None:
    with pytest.raises(Conflict):
        activate(make_job(state=state), NOW)


@pytest.mark.parametrize("state", [states.AVAILABLE, states.SCHEDULED])
def test_expire_discards_without_completing(state: str) -> None:
    job = make_job(state=state, attempt=0, started_at=None, expires_at=NOW - 1)
    expired = expire(job, NOW)
    assert expired.state == states.DISCARDED
    assert expired.discarded_at == NOW
    assert expired.expired_at == NOW
    assert expired.completed_at is None
    assert expired.dead_lettered is False
