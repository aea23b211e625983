"""The store's JSON text: compact, exact for every value a job can carry."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from redrive.domain.identifiers import uuid7_blocks
from redrive.store.codec import claim_listened, dump, event_from_row, load


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
        row = {
            **job_parameters(job),
            "sequence": 1,
            "redrive_task_id": None,
            "redrive_dead_letter_id": None,
        }
        assert job_from_row(row) == job
    assert "scheduled_at_text" not in load(job_parameters(base)["envelope"])
    assert load(job_parameters(timed)["envelope"])["expires_at_text"] == "2026-03-01T10:00:00Z"


def test_a_job_s_last_error_is_stored_once_and_reads_back() -> None:
    """`error` is stored as `true` when it is the last of `errors` (row, batch row, lifecycle
    write alike); a row holding the error itself (written before) or none reads as it is."""
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import job_from_row, job_parameters, job_records, lifecycle_record

    first = {"type": "Boom", "message": "one", "attempt": 1, "at": 3}
    last = {"type": "Boom", "message": "two", "attempt": 2, "at": 4}
    failed = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="retryable",
                 created_at=5, enqueued_at=5, sequence=1, error=dict(last),
                 errors=[first, last])  # fmt: skip
    retried = replace(failed, state="available", error=None)
    odd = replace(failed, error=dict(first))
    extra = {"sequence": 1, "redrive_task_id": None, "redrive_dead_letter_id": None}
    assert job_parameters(failed)["error"] == "true"
    assert job_records([failed])[0]["error"] is True
    assert lifecycle_record(failed, "active", None)["error"] is True
    assert "error" not in lifecycle_record(retried, "active", None)
    for job, stored in ((failed, "true"), (retried, None), (odd, dump(first))):
        assert job_parameters(job)["error"] == stored
        assert job_from_row({**job_parameters(job), **extra}) == job
    written_before = {**job_parameters(failed), **extra, "error": dump(last)}
    assert job_from_row(written_before) == failed


def test_a_claimed_row_reads_as_the_whole_row_reads() -> None:
    """A claim reads each job's envelope, then its other JSON columns and the columns it did not
    set (CLAIMED_JOB_COLUMNS), on SQLite as one JSON array holding those JSON columns' texts (an
    error history and an error included), and makes the others as its UPDATE wrote them: the job
    of such a row is the job of the whole row read as a dict, in the same field order, with or
    without the redrive columns and a timeout, with a long integer in its arguments, under the
    job's lease or the claim's; by priority, then sequence; the listened ones named."""
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import CLAIMED_JOB_COLUMNS, claimed_jobs, job_from_row, job_parameters

    error = {"type": "E", "message": "m"}
    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[2**70], state="active",
               created_at=5, enqueued_at=5, sequence=7, attempt=1, started_at=6, worker_id="w",
               lease_token="l", lease_expires_at=6 + 1_800_000, retry_delay_ms=9,
               errors=[error], error=dict(error))  # fmt: skip
    redriven = replace(base, id="j2", sequence=3, redrive_task_id="rt_1",
                       redrive_dead_letter_id="dl_1", timeout_ms=50, timeout_at=56, errors=[],
                       error=None)  # fmt: skip
    urgent = replace(base, id="j3", sequence=9, priority=2)
    rows, whole = [], []
    for job, listened in ((base, 1), (redriven, 0), (urgent, 0)):
        row = {
            **job_parameters(job),
            "sequence": job.sequence,
            "redrive_task_id": job.redrive_task_id,
            "redrive_dead_letter_id": job.redrive_dead_letter_id,
            "listened": listened,
        }
        columns = [row["errors"], row["error"], row["result"]]
        rows.append((row["envelope"], dump(columns + [row[name] for name in CLAIMED_JOB_COLUMNS])))
        whole.append(job_from_row(row))
    jobs, listened_jobs = claimed_jobs(rows, 6, "w", "l", None)
    assert jobs == [whole[2], whole[1], whole[0]] == [urgent, redriven, base]
    assert [list(vars(job)) for job in jobs] == [list(vars(job)) for job in whole[::-1]]
    assert listened_jobs == [base]
    leased, _ = claimed_jobs(rows[::-1], 6, "w", "l", 70)
    assert leased == [replace(job, lease_expires_at=6 + 70) for job in jobs]
    # PostgreSQL's rows: the same columns as columns, not one array.
    as_columns = [(row[0], *load(row[1])) for row in rows]
    assert claimed_jobs(as_columns, 6, "w", "l", None) == (jobs, listened_jobs)


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


def test_jobs_whose_retry_records_are_alike_share_one_policy_of_their_types() -> None:
    """A record read again (another job's envelope, parsed on its own) is the policy read
    before, one instance; records alike in value but not in type (1, True, 1.0) are not."""
    from redrive.domain.records import retry_from_record
    from redrive.domain.retry import RetryPolicy

    def read(text: str) -> RetryPolicy:
        return retry_from_record(load(text))

    policy = read('{"max_attempts": 1, "on_exhaustion": "dead_letter"}')
    assert read('{"max_attempts": 1, "on_exhaustion": "dead_letter"}') is policy
    assert policy == RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
    assert read('{"max_attempts": true}').max_attempts is True
    assert type(read('{"max_attempts": 1}').max_attempts) is int
    assert type(read('{"backoff_coefficient": 2}').backoff_coefficient) is int
    assert type(read('{"backoff_coefficient": 2.0}').backoff_coefficient) is float
    # Lists and objects are read every time, each into its own policy.
    listed = '{"non_retryable_errors": ["a.B"], "extra": {"x": 1}}'
    assert read(listed) is not read(listed)
    assert read(listed) == RetryPolicy(non_retryable_errors=("a.B",), extra={"x": 1})


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
        row = {
            **job_parameters(job),
            "sequence": 1,
            "redrive_task_id": None,
            "redrive_dead_letter_id": None,
        }
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
    event_ids = [f"evt_{id_}" for id_ in uuid7_blocks(5, [3], random.Random(1))]
    shared, records = new_job_records(jobs, event_ids)
    assert "priority" not in shared and "queue" in shared and "timeout_ms" not in shared
    assert shared["event_block"] == event_ids[0]  # one block: named once
    assert [set(record) for record in records] == [{"id", "envelope", "priority"}] * 3
    for job, record, event_id in zip(jobs, records, event_ids, strict=True):
        one = new_job_parameters(job, event_id, 0, False)
        expected = {
            key: value for key, value in one.items() if value is not None and key not in
            ("now", "alone", "envelope", "event_id")
        }  # fmt: skip
        merged = {**shared, **record}
        assert load(one["envelope"]) == merged.pop("envelope")
        assert merged == {**expected, "event_block": event_ids[0]}


def test_a_batch_of_alike_jobs_sends_every_column_once() -> None:
    """Jobs alike in every column but their id and envelope (a producer's batch): each record is
    its id and envelope alone, and the shared columns are a one-job enqueue's, the event's type
    among them only when the jobs have events."""
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import new_job_parameters, new_job_records

    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="scheduled",
               created_at=5, scheduled_at=9, timeout_ms=7)  # fmt: skip
    jobs = [base, replace(base, id="j2", args=[2]), replace(base, id="j3", args=[3])]
    event_ids = [f"evt_{id_}" for id_ in uuid7_blocks(5, [3], random.Random(1))]
    one = new_job_parameters(base, event_ids[0], 0, False)
    expected = {
        key: value for key, value in one.items() if value is not None and key not in
        ("id", "now", "alone", "envelope", "event_id")
    }  # fmt: skip
    shared, records = new_job_records(jobs, event_ids)
    assert shared == {**expected, "event_block": event_ids[0]}
    assert shared["event_type"] == "job.scheduled" and shared["run_at"] == 9
    assert [set(record) for record in records] == [{"id", "envelope"}] * 3
    assert [record["envelope"]["args"] for record in records] == [[1], [2], [3]]
    shared, records = new_job_records(jobs, None)
    assert shared == {key: value for key, value in expected.items() if key != "event_type"}


def test_each_job_of_a_batch_of_blocks_names_its_block() -> None:
    """Two runs (two blocks of event ids): each record names its block; event_blocks makes a
    row of each, its members in order, the priorities kept apart only where they differ."""
    from dataclasses import replace

    from redrive.domain.job import Job
    from redrive.store.codec import event_blocks, new_job_records

    base = Job(id="j1", tenant_id="t", type="a.b", queue="q", args=[1], state="available",
               created_at=5, enqueued_at=5)  # fmt: skip
    jobs = [base, replace(base, id="j2", priority=3), replace(base, id="j3", type="c.d")]
    event_ids = [f"evt_{id_}" for id_ in uuid7_blocks(5, [2, 1], random.Random(1))]
    shared, records = new_job_records(jobs, event_ids)
    assert "event_block" not in shared
    assert [record["event_block"] for record in records] == [event_ids[0]] * 2 + [event_ids[2]]
    rows = event_blocks(jobs, event_ids)
    assert [(row["id"], row["job_type"], row["size"]) for row in rows] == [
        (event_ids[0], "a.b", 2), (event_ids[2], "c.d", 1),
    ]  # fmt: skip
    assert rows[0]["members"] == {"subjects": ["j1", "j2"], "priorities": [0, 3]}
    assert rows[0]["data"] == {"job_type": "a.b", "queue": "q"}
    assert rows[1]["members"] == {"subjects": ["j3"]}
    assert rows[1]["data"] == {"job_type": "c.d", "queue": "q", "priority": 0}


def test_a_run_member_s_own_data_follows_the_run_s_in_the_event_s_order() -> None:
    """A claim's or an ack's run member (SQLite's select_events gives its own values as columns):
    its duration, attempt and result after the run's shared keys, as `completed_event` orders
    them, a null result left out; a row of its own reads as it is."""
    row = {
        "sequence": 7, "id": "evt_01900000-0000-7000-8000-000000000000", "tenant_id": "t",
        "type": "job.completed", "queue": "q", "job_type": "j", "time": 5,
        "data": '{"job_type":"j","queue":"q"}', "subject": "job-2", "position": 2,
        "priority": None, "episode_id": None, "duration_ms": 12, "attempt": 3,
        "result": '{"a":null}',
    }  # fmt: skip
    stored = event_from_row(row)
    assert stored.id == "evt_01900000-0000-7002-8000-000000000000"
    assert list(stored.event.data.items()) == [
        ("job_type", "j"), ("queue", "q"), ("duration_ms", 12), ("attempt", 3),
        ("result", {"a": None}),
    ]  # fmt: skip
    assert "result" not in event_from_row({**row, "result": "null"}).event.data
    alone = {**row, "position": None, "data": '{"attempt":1}', "duration_ms": None,
             "attempt": None, "result": None}  # fmt: skip
    assert event_from_row(alone).event.data == {"attempt": 1}


def packed(subscribed: list[bool]) -> list[tuple[str, str]]:
    """Claimed rows as SQLite's claim packs them: its `listened` (an `IN`) last in the array,
    after values that hold `1]` themselves."""
    connection = sqlite3.connect(":memory:")
    try:
        return [
            connection.execute(
                "SELECT '{}', json_array('[1]', 1, :tenant IN (SELECT 'hooked'))",
                {"tenant": "hooked" if hooked else "other"},
            ).fetchone()
            for hooked in subscribed
        ]
    finally:
        connection.close()


@pytest.mark.parametrize(
    "subscribed", [[False], [True], [False, False, True], [False, False, False]]
)
def test_a_claim_s_rows_tell_a_subscribed_tenant_s_job_packed_or_as_columns(
    subscribed: list[bool],
) -> None:
    assert claim_listened(packed(subscribed)) is any(subscribed)
    columns = [("{}", "[]", None, None, "id", hooked) for hooked in subscribed]
    assert claim_listened(columns) is any(subscribed)
