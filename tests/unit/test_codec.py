"""The store's JSON text: compact, exact for every value a job can carry."""

from __future__ import annotations

import json

import pytest

from redrive.store.codec import dump, load


@pytest.mark.parametrize(
    "value",
    [
        {"amount": 2**70, "negative": -(2**65)},
        {"text": "é \u2028 \U0001f600", "quote": 'a"b\\c'},
        [1.5e-05, 1e16, 0.1, -0.0, 12345678901234567890],
        {"nested": {"list": [None, True, False, {}, []]}},
        "plain",
    ],
)
def test_json_round_trips_exactly(value: object) -> None:
    text = dump(value)
    assert text is not None
    assert load(text) == value
    assert json.loads(text) == value


def test_json_is_compact_and_keeps_unicode() -> None:
    assert dump({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
    assert dump({"big": 2**70}) == '{"big":1180591620717411303424}'


def test_none_stays_sql_null() -> None:
    assert dump(None) is None
    assert load(None) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"id": 123456789012345678901234567890}', {"id": 123456789012345678901234567890}),
        ("[9223372036854775807, -9223372036854775808]", [2**63 - 1, -(2**63)]),
        ('"\\ud800 lone"', "\ud800 lone"),
        # non-ASCII text before a long integer, and a lone surrogate written as itself
        ('{"é": "ü €", "n": 18446744073709551617}', {"é": "ü €", "n": 2**64 + 1}),
        ('["\ud800", 12345678901234567890123]', ["\ud800", 12345678901234567890123]),
        (b'{"bytes": [1, 2.5]}', {"bytes": [1, 2.5]}),
    ],
)
def test_json_read_exactly_whatever_reader_is_fastest(text: str | bytes, value: object) -> None:
    loaded = load(text)
    assert loaded == value
    assert type(loaded) is type(value)
    if isinstance(value, dict) and isinstance(value.get("id"), int):
        assert isinstance(loaded, dict) and isinstance(loaded["id"], int)


def test_batch_rows_are_the_single_job_records_without_nulls() -> None:
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.domain.retry import RetryPolicy
    from redrive.store.codec import job_record, job_records

    shared = RetryPolicy(max_attempts=3, on_exhaustion="dead_letter")
    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="available",
               created_at=5, retry=shared, meta={"k": "v"}, enqueued_at=5)  # fmt: skip
    jobs = [
        base,
        replace(base, id="j2", scheduled_at=9, state="scheduled", scheduled_at_text="+PT1S"),
        replace(
            base,
            id="j3",
            retry=RetryPolicy(max_attempts=1),
            error={"type": "X"},
            errors=[{"type": "X"}],
            dead_lettered=True,
            result={"ok": 1},
        ),
    ]
    expected = [
        {key: value for key, value in job_record(job).items() if value is not None} for job in jobs
    ]
    assert job_records(jobs) == expected


def test_a_job_reads_back_with_or_without_its_text_times() -> None:
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import job_from_row, job_parameters

    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="available",
               created_at=5, enqueued_at=5, sequence=1)  # fmt: skip
    timed = replace(base, state="scheduled", scheduled_at=9, scheduled_at_text="+PT1S",
                    expires_at=99, expires_at_text="2026-03-01T10:00:00Z")  # fmt: skip
    for job in (base, timed):
        row = {**job_parameters(job), "sequence": 1, "redrive_task_id": None}
        assert job_from_row(row) == job
    assert "scheduled_at_text" not in load(job_parameters(base)["envelope"])
    assert load(job_parameters(timed)["envelope"])["expires_at_text"] == "2026-03-01T10:00:00Z"


def test_a_retry_policy_reads_back_from_its_sparse_record() -> None:
    from redrive.domain.records import retry_from_record, sparse_retry_record
    from redrive.domain.retry import RetryPolicy

    policies = [
        RetryPolicy(),
        RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"),
        RetryPolicy(jitter=False, backoff_coefficient=1.5, non_retryable_errors=("a.B",)),
        RetryPolicy(initial_interval_ms=10, max_interval_ms=20, extra={"x": 1}),
    ]
    for policy in policies:
        assert retry_from_record(load(dump(sparse_retry_record(policy)))) == policy
    assert sparse_retry_record(RetryPolicy()) == {}
    assert sparse_retry_record(RetryPolicy(max_attempts=1)) == {"max_attempts": 1}


def test_an_envelope_holds_only_what_says_something_and_reads_back_whole() -> None:
    """Empty meta and extra are left out, and so is the retry record when the options hold it
    as the same JSON; a job reads back the same either way (an options' retry equal in Python
    but not as JSON, 1.0 for 1, keeps the record)."""
    from redrive.domain.job import Job
    from redrive.domain.retry import RetryPolicy
    from redrive.store.codec import job_from_row, job_parameters

    policy = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
    same = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    jobs = {
        "in options": Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1],
                          state="available", created_at=5, enqueued_at=5, sequence=1,
                          retry=policy, options={"retry": same})
    }  # fmt: skip
    from dataclasses import replace

    jobs["a float"] = replace(jobs["in options"], options={"retry": {**same, "max_attempts": 1.0}})
    jobs["no options"] = replace(jobs["in options"], options={}, meta={"k": 1}, extra={"x": []})
    envelopes = {name: load(job_parameters(job)["envelope"]) for name, job in jobs.items()}
    assert envelopes["in options"] == {"args": [1], "options": {"retry": same}}
    assert envelopes["a float"]["retry"] == same
    assert envelopes["no options"] == {
        "args": [1], "options": {}, "meta": {"k": 1}, "extra": {"x": []}, "retry": same,
    }  # fmt: skip
    for job in jobs.values():
        row = {**job_parameters(job), "sequence": 1, "redrive_task_id": None}
        assert job_from_row(row) == job


def test_a_batch_s_shared_columns_are_sent_once() -> None:
    """new_job_records: the columns every job has alike once, each record its own columns;
    merged back, each record is the job's record (and event type) as a one-job enqueue has it."""
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import new_job_parameters, new_job_records

    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="available",
               created_at=5, enqueued_at=5)  # fmt: skip
    jobs = [base, replace(base, id="j2", args=[2], priority=3), replace(base, id="j3", args=[3])]
    shared, records = new_job_records(jobs, ["e1", "e2", "e3"])
    assert "priority" not in shared and "queue" in shared and "timeout_ms" not in shared
    assert [set(record) for record in records] == [{"id", "envelope", "priority", "event_id"}] * 3
    for job, record, event_id in zip(jobs, records, ["e1", "e2", "e3"], strict=True):
        one = new_job_parameters(job, event_id, 0, False)
        expected = {
            key: value for key, value in one.items() if value is not None and key not in
            ("now", "alone", "envelope")
        }  # fmt: skip
        merged = {**shared, **record}
        assert load(one["envelope"]) == merged.pop("envelope")
        assert merged == expected
