"""Unit tests for dead-letter filters, retry overrides, redrive and job record round trips."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from typing import Any

import pytest

from redrive.domain import job as states
from redrive.domain.dead_letter import (
    DEAD,
    RETRIED,
    apply_override,
    new_dead_letter,
    parse_override,
    redrive,
)
from redrive.domain.dead_letter_filter import DeadLetterFilter, parse_filter
from redrive.domain.errors import InvalidRequest, InvalidRetryPolicy
from redrive.domain.fingerprint import DEFAULT_FINGERPRINTER, incident_id
from redrive.domain.job import Job
from redrive.domain.records import (
    job_from_record,
    job_to_record,
    retry_to_record,
    sparse_job_record,
)
from redrive.domain.retry import RetryPolicy

NOW = 1_772_359_200_000  # 2026-03-01T10:00:00.000Z
DIED = NOW - 60_000
ERROR = {
    "code": "handler_error",
    "type": "SmtpError",
    "message": "smtp refused",
    "retryable": True,
    "details": {},
    "attempt": 3,
    "occurred_at": "2026-03-01T09:59:00.000Z",
    "timestamp": "2026-03-01T09:59:00.000Z",
}
DLQ_POLICY = RetryPolicy(max_attempts=3, on_exhaustion="dead_letter", non_retryable_errors=("A",))


def dead_job(**changes: Any) -> Job:
    """A job that exhausted its attempts and sits in the dead-letter queue."""
    base = Job(
        id="019cb7f3-b800-7000-8000-000000000002",
        tenant_id="_default",
        type="payment.charge",
        queue="payments",
        args=[{"amount": 100}],
        state=states.DISCARDED,
        created_at=NOW - 600_000,
        meta={"trace_id": "t1", "user": "u1"},
        priority=5,
        attempt=3,
        retry=DLQ_POLICY,
        options={"queue": "payments"},
        extra={"x_custom": 1},
        sequence=17,
        enqueued_at=NOW - 500_000,
        started_at=DIED - 1_000,
        completed_at=DIED,
        discarded_at=DIED,
        next_attempt_at=DIED - 10_000,
        retry_delay_ms=4_000,
        worker_id="w1",
        error=ERROR,
        errors=[{**ERROR, "attempt": 1}, {**ERROR, "attempt": 2}, ERROR],
        dead_lettered=True,
    )
    return replace(base, **changes)


# --- parse_filter ------------------------------------------------------------------------------

# (raw filter, expected filter)
FILTERS = [
    pytest.param({}, DeadLetterFilter(tenant_id="t"), id="empty"),
    pytest.param(
        {"queue": "payments"}, DeadLetterFilter(queue="payments", tenant_id="t"), id="queue"
    ),
    pytest.param(
        {"type": "payment.charge"},
        DeadLetterFilter(type="payment.charge", tenant_id="t"),
        id="type",
    ),
    pytest.param(
        {"type": "payment.*"}, DeadLetterFilter(type_prefix="payment.", tenant_id="t"), id="prefix"
    ),
    pytest.param(
        {"job_type": "payment.charge"},
        DeadLetterFilter(type="payment.charge", tenant_id="t"),
        id="job-type-alias",
    ),
    pytest.param(
        {"job_type": "payment.*"},
        DeadLetterFilter(type_prefix="payment.", tenant_id="t"),
        id="job-type-alias-prefix",
    ),
    pytest.param(
        {"type": "", "job_type": "payment.charge"},
        DeadLetterFilter(type="payment.charge", tenant_id="t"),
        id="empty-type-falls-back-to-alias",
    ),
    pytest.param(
        {"error_type": "SmtpError"},
        DeadLetterFilter(error_type="SmtpError", tenant_id="t"),
        id="error-type",
    ),
    pytest.param(
        {"since": "2026-03-01T09:00:00Z", "until": "2026-03-01T10:00:00Z"},
        DeadLetterFilter(since=NOW - 3_600_000, until=NOW, tenant_id="t"),
        id="since-until",
    ),
    pytest.param(
        {"since": "+PT0S"}, DeadLetterFilter(since=NOW, tenant_id="t"), id="relative-since"
    ),
    pytest.param(
        {"status": "retried"}, DeadLetterFilter(status=RETRIED, tenant_id="t"), id="status"
    ),
    pytest.param({"queue": ""}, DeadLetterFilter(tenant_id="t"), id="blank-queue-ignored"),
]


@pytest.mark.parametrize(("raw", "expected"), FILTERS)
def test_parse_filter(raw: dict[str, Any], expected: DeadLetterFilter) -> None:
    assert parse_filter(raw, NOW).scoped("t") == expected


def test_parse_filter_defaults() -> None:
    parsed = parse_filter({}, NOW)
    assert parsed.status == DEAD
    assert parsed.tenant_id is None
    assert parsed.is_empty


# (raw filter, field the error must name)
INVALID_FILTERS = [
    pytest.param({"status": "zombie"}, "status", id="unknown-status"),
    pytest.param({"queue": "Payments"}, "queue", id="queue-uppercase"),
    pytest.param({"queue": "my queue"}, "queue", id="queue-space"),
    pytest.param({"queue": "-invalid"}, "queue", id="queue-leading-hyphen"),
    pytest.param({"queue": 5}, "queue", id="queue-number"),
    pytest.param({"type": 5}, "type", id="type-number"),
    pytest.param({"since": "yesterday"}, "since", id="since-junk"),
    pytest.param({"until": "2026-03-01T10:00:00"}, "until", id="until-no-offset"),
]


@pytest.mark.parametrize(("raw", "field"), INVALID_FILTERS)
def test_parse_filter_rejects(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_filter(raw, NOW)
    assert field in caught.value.details["field"]


# (filter, is_empty)
EMPTINESS = [
    pytest.param(DeadLetterFilter(), True, id="default"),
    pytest.param(DeadLetterFilter(tenant_id="t", status=RETRIED), True, id="tenant-and-status"),
    pytest.param(DeadLetterFilter(queue="q"), False, id="queue"),
    pytest.param(DeadLetterFilter(type="a"), False, id="type"),
    pytest.param(DeadLetterFilter(type_prefix="a."), False, id="type-prefix"),
    pytest.param(DeadLetterFilter(error_type="E"), False, id="error-type"),
    pytest.param(DeadLetterFilter(since=NOW), False, id="since"),
    pytest.param(DeadLetterFilter(until=NOW), False, id="until"),
]


@pytest.mark.parametrize(("dead_filter", "empty"), EMPTINESS)
def test_filter_is_empty(dead_filter: DeadLetterFilter, empty: bool) -> None:
    assert dead_filter.is_empty is empty


# --- new_dead_letter ---------------------------------------------------------------------------


def test_new_dead_letter_records_the_episode() -> None:
    job = dead_job()
    fingerprint = DEFAULT_FINGERPRINTER.fingerprint(job)
    episode = new_dead_letter("ep-1", job, "max_attempts_exceeded", NOW, fingerprint)
    assert episode.job_id == job.id
    assert episode.job == job
    assert episode.reason == "max_attempts_exceeded"
    assert episode.discarded_at == DIED
    assert episode.error_type == "SmtpError"
    assert episode.status == DEAD
    assert (episode.fingerprint, episode.fingerprint_version) == (fingerprint.value, 1)
    assert episode.incident_id == incident_id(job.tenant_id, job.type, fingerprint.value)


# --- apply_override ----------------------------------------------------------------------------

# (override body, expected field changes)
OVERRIDES = [
    pytest.param({}, {}, id="none"),
    pytest.param({"override": {}}, {}, id="empty-override"),
    pytest.param({"override": {"queue": "payments-slow"}}, {"queue": "payments-slow"}, id="queue"),
    pytest.param({"override": {"priority": -100}}, {"priority": -100}, id="priority"),
    pytest.param({"override": {"args": []}}, {"args": []}, id="args-empty"),
    pytest.param(
        {"override": {"args": [{"amount": 50}, "x"]}},
        {"args": [{"amount": 50}, "x"]},
        id="args-replaced",
    ),
    pytest.param(
        {"override": {"meta": {"user": "u2", "retry_reason": "fixed"}}},
        {"meta": {"trace_id": "t1", "user": "u2", "retry_reason": "fixed"}},
        id="meta-merged",
    ),
    pytest.param(
        {"override": {"retry": {"max_attempts": 10}}},
        {"retry": replace(DLQ_POLICY, max_attempts=10)},
        id="retry-merged",
    ),
    pytest.param(
        {"queue": "other", "priority": 1, "retry": {"on_exhaustion": "discard"}},
        {"queue": "other", "priority": 1, "retry": replace(DLQ_POLICY, on_exhaustion="discard")},
        id="top-level-form",
    ),
]


@pytest.mark.parametrize(("raw", "changes"), OVERRIDES)
def test_apply_override(raw: dict[str, Any], changes: dict[str, Any]) -> None:
    job = dead_job()
    assert apply_override(job, parse_override(raw)) == replace(job, **changes)


def test_apply_override_retry_merge_keeps_other_fields() -> None:
    job = apply_override(dead_job(), parse_override({"override": {"retry": {"max_attempts": 10}}}))
    assert job.retry.on_exhaustion == "dead_letter"
    assert job.retry.non_retryable_errors == ("A",)


# (override body, field the message must name)
INVALID_OVERRIDES = [
    pytest.param({"override": "queue"}, "override", id="override-not-object"),
    pytest.param({"override": {"queue": "Bad Queue"}}, "queue", id="queue-invalid"),
    pytest.param({"override": {"queue": "q" * 129}}, "queue", id="queue-too-long"),
    pytest.param({"override": {"priority": 101}}, "priority", id="priority-too-high"),
    pytest.param({"override": {"priority": True}}, "priority", id="priority-bool"),
    pytest.param({"override": {"priority": "1"}}, "priority", id="priority-string"),
    pytest.param({"override": {"args": {"a": 1}}}, "args", id="args-object"),
    pytest.param({"override": {"args": None}}, "args", id="args-null"),
    pytest.param({"override": {"meta": ["x"]}}, "meta", id="meta-list"),
    pytest.param({"priority": -101}, "priority", id="top-level-priority"),
    pytest.param({"override": {"queue": "a"}, "queue": "b"}, "queue", id="override-and-top-level"),
    pytest.param({"override": {"qeueu": "a"}}, "qeueu", id="unknown-key"),
    pytest.param({"queue": "a", "reason": "x"}, "reason", id="unknown-top-level-key"),
]


@pytest.mark.parametrize(("raw", "field"), INVALID_OVERRIDES)
def test_apply_override_rejects(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        apply_override(dead_job(), parse_override(raw))
    assert field in caught.value.message


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        pytest.param({"max_attempts": -1}, "max_attempts", id="max-attempts"),
        pytest.param({"backoff_coefficient": 0.5}, "backoff_coefficient", id="coefficient"),
        pytest.param("x", "retry", id="not-an-object"),
    ],
)
def test_apply_override_invalid_retry(retry: object, field: str) -> None:
    with pytest.raises(InvalidRetryPolicy) as caught:
        apply_override(dead_job(), parse_override({"override": {"retry": retry}}))
    assert field in caught.value.message


# --- redrive -----------------------------------------------------------------------------------


def test_redrive_returns_the_job_to_its_queue() -> None:
    job = dead_job(lease_token="old", lease_expires_at=DIED, timeout_at=DIED, result={"x": 1})
    revived = redrive(job, NOW)
    assert revived.state == states.AVAILABLE
    assert revived.attempt == 0
    assert revived.enqueued_at == NOW
    assert revived.dead_lettered is False
    assert revived.error is None
    assert revived.completed_at is None
    assert revived.discarded_at is None
    assert revived.started_at is None
    assert revived.next_attempt_at is None
    assert revived.retry_delay_ms is None
    assert revived.worker_id is None
    assert revived.lease_token is None
    assert revived.lease_expires_at is None
    assert revived.timeout_at is None
    assert revived.result is None
    assert revived.run_at is None


def test_redrive_keeps_identity_envelope_and_history() -> None:
    job = dead_job()
    revived = redrive(job, NOW)
    assert revived.errors == job.errors
    kept = ("id", "tenant_id", "type", "queue", "args", "meta", "priority", "retry", "options",
            "extra", "created_at", "sequence")  # fmt: skip
    for name in kept:
        assert getattr(revived, name) == getattr(job, name), name
    assert revived.max_attempts == job.max_attempts


def test_redrive_after_override() -> None:
    revived = redrive(
        apply_override(dead_job(), parse_override({"override": {"queue": "retry-lane"}})), NOW
    )
    assert revived.queue == "retry-lane"
    assert revived.state == states.AVAILABLE


# --- records -----------------------------------------------------------------------------------

ROUND_TRIP_JOBS = [
    pytest.param(dead_job(), id="dead-letter"),
    pytest.param(redrive(dead_job(), NOW), id="redriven"),
    pytest.param(
        dead_job(
            state=states.SCHEDULED,
            scheduled_at=NOW + 5_000,
            scheduled_at_text="2026-03-01T10:00:05Z",
            expires_at=NOW + 9_000,
            expires_at_text=None,
            error=None,
            errors=[],
            dead_lettered=False,
        ),
        id="scheduled",
    ),
    pytest.param(
        dead_job(
            state=states.COMPLETED,
            result={"nested": [1, {"a": None}]},
            error=None,
            retry=RetryPolicy(non_retryable_errors=("Auth.*", "X"), extra={"x_vendor": {"k": [1]}}),
        ),
        id="completed-with-result",
    ),
]


@pytest.mark.parametrize("job", ROUND_TRIP_JOBS)
def test_record_round_trip(job: Job) -> None:
    restored = job_from_record(job_to_record(job))
    assert restored == job
    assert restored.retry.extra == job.retry.extra
    assert isinstance(restored.retry.non_retryable_errors, tuple)


@pytest.mark.parametrize("job", ROUND_TRIP_JOBS)
def test_record_round_trip_through_json(job: Job) -> None:
    record = job_to_record(job)
    restored = job_from_record(json.loads(json.dumps(record)))
    assert restored == job
    assert restored.retry.extra == job.retry.extra


SPARSE_JOBS = [
    *ROUND_TRIP_JOBS,
    pytest.param(dead_job(error={**ERROR, "message": "not the last"}), id="error-not-the-last"),
    pytest.param(dead_job(error=None), id="no-error-with-history"),
    pytest.param(dead_job(error=None, errors=[]), id="no-error-no-history"),
    pytest.param(dead_job(error=ERROR, errors=[]), id="error-without-history"),
    pytest.param(
        Job(
            id="j",
            tenant_id="t",
            type="x",
            queue="q",
            args=[],
            state=states.DISCARDED,
            created_at=NOW,
        ),
        id="all-defaults",
    ),
]


@pytest.mark.parametrize("job", SPARSE_JOBS)
def test_a_sparse_record_reads_back_as_the_job(job: Job) -> None:
    record = sparse_job_record(job)
    assert job_from_record(record) == job
    assert job_from_record(json.loads(json.dumps(record))) == job


def test_a_sparse_record_leaves_out_defaults_and_the_last_error_once() -> None:
    job = dead_job(meta={}, extra={}, retry=RetryPolicy(max_attempts=1))
    record = sparse_job_record(job)
    assert "error" not in record  # the last of errors
    assert record["errors"] == job.errors
    assert record["retry"] == {"max_attempts": 1}
    for name in ("meta", "extra", "result", "cancelled_at", "lease_token", "redrive_task_id"):
        assert name not in record, name
    assert record["dead_lettered"] is True and record["attempt"] == 3
    assert "retry" not in sparse_job_record(dead_job(retry=RetryPolicy()))
    # No last error, but a history: written as null, not read as the history's last.
    assert sparse_job_record(dead_job(error=None))["error"] is None


def test_full_records_written_before_still_read() -> None:
    for job in (dead_job(), dead_job(error=None), dead_job(errors=[])):
        assert job_from_record(json.loads(json.dumps(job_to_record(job)))) == job


def test_record_ignores_unknown_keys() -> None:
    record = {**job_to_record(dead_job()), "legacy_column": 1}
    assert job_from_record(record) == dead_job()


@pytest.mark.parametrize("job", ROUND_TRIP_JOBS)
def test_a_record_holds_every_field_of_the_job_in_order_and_nothing_else(job: Job) -> None:
    record = job_to_record(job)
    assert list(record) == [item.name for item in dataclasses.fields(Job)]
    assert record["retry"] == retry_to_record(job.retry)
    assert all(record[name] is getattr(job, name) for name in record if name != "retry")


def _sparse_field_by_field(job: Job) -> dict[str, Any]:
    """What `sparse_job_record` keeps of a job's fields, decided one field at a time (as it
    was written before its comprehension): null where the default is not null, and anything
    not equal in value and type to its default."""
    defaults = {
        item.name: item.default_factory() if item.default_factory is not dataclasses.MISSING
        else item.default
        for item in dataclasses.fields(Job)
    }  # fmt: skip
    record: dict[str, Any] = {}
    for name, value in vars(job).items():
        default = defaults.get(name, dataclasses.MISSING)
        if value is None and default is None:
            continue
        if name != "retry" and type(value) is type(default) and value == default:
            continue
        record[name] = value
    return record


# Jobs whose fields are null where the default is not, or equal to a default in value but not
# in type (False for 0, True for 1, 0.0 for 0): each is kept, as it was, in the job's order.
ODD_JOBS = [
    dead_job(priority=False, attempt=True, dead_lettered=0, meta=None),
    dead_job(visibility_timeout_ms=1_800_000.0, options=None, errors=None),
    dead_job(priority=0, attempt=0, meta={}, extra={}, dead_lettered=False, error=None, errors=[]),
    dead_job(args=None, created_at=None, timeout_ms=0, result=0),
]


@pytest.mark.parametrize("job", [*SPARSE_JOBS, *ODD_JOBS])
def test_a_sparse_record_keeps_the_fields_a_field_by_field_reading_keeps(job: Job) -> None:
    record = sparse_job_record(job)
    expected = _sparse_field_by_field(job)
    kept = [name for name in record if name not in ("retry", "error")]
    assert kept == [name for name in expected if name not in ("retry", "error")]
    for name in kept:
        assert record[name] is expected[name], name


def test_a_sparse_retry_record_is_worked_out_once_and_given_as_a_copy() -> None:
    from redrive.domain.records import sparse_retry_record

    policy = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
    first = sparse_retry_record(policy)
    first["max_attempts"] = 9
    assert sparse_retry_record(policy) == {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    assert sparse_retry_record(policy) is not sparse_retry_record(policy)
    assert policy == RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
